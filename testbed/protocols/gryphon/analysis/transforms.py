"""Gryphon Spark transforms (DataFrame -> DataFrame, ``select`` at entry and exit).

Times: ``*_s`` are seconds from the workload start (clock-corrected); latencies in ms.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F


def latencies(deliver: DataFrame, t0_wall_ns: int) -> DataFrame:
    """g_deliver -> [client, broker, pubend, tick, pub_s, recv_s, lat_ms]: one row per delivery;
    ``pub_s`` is the publisher's send time (x axis of the paper's latency plots)."""
    return (
        deliver.select("client", "broker", "pubend", "tick", "pub_t", "t_corr", "t_rel_s")
        .withColumn("pub_s", (F.col("pub_t") - F.lit(int(t0_wall_ns))).cast("double") / F.lit(1e9))
        .withColumn("lat_ms", (F.col("t_corr") - F.col("pub_t")).cast("double") / F.lit(1e6))
        .select("client", "broker", "pubend", "tick", "pub_s", F.col("t_rel_s").alias("recv_s"), "lat_ms")
    )


def nacks(nack: DataFrame) -> DataFrame:
    """g_nack -> [node, nack_s, pubend, lo, hi, range_ms, origin, reason, to, n, cum_range_ms]: each nack
    with the running count and cumulative nack range of its node."""
    w = Window.partitionBy("node").orderBy("t_rel_s", "m").rowsBetween(Window.unboundedPreceding, 0)
    return (
        nack.select("node", "t_rel_s", "m", "pubend", "lo", "hi", "range_ms", "origin", "reason", "to")
        .withColumn("n", F.count("*").over(w))
        .withColumn("cum_range_ms", F.sum("range_ms").over(w))
        .select("node", F.col("t_rel_s").alias("nack_s"), "pubend", "lo", "hi", "range_ms", "origin", "reason",
                F.concat_ws(",", "to").alias("to"), "n", "cum_range_ms")
    )


def cpu_utilization(cpu: DataFrame, lo_s: float, hi_s: float) -> DataFrame:
    """runtime ``cpu`` samples -> [node, cpu_pct, samples]: process CPU time used per wall second
    (100 = one core) between ``lo_s`` and ``hi_s``."""
    return (
        cpu.select("node", "t_rel_s", (F.col("user_s") + F.col("sys_s")).alias("cpu_s"))
        .where((F.col("t_rel_s") >= F.lit(lo_s)) & (F.col("t_rel_s") <= F.lit(hi_s)))
        .groupBy("node")
        .agg(F.min_by("cpu_s", "t_rel_s").alias("c0"), F.max_by("cpu_s", "t_rel_s").alias("c1"),
             F.min("t_rel_s").alias("s0"), F.max("t_rel_s").alias("s1"), F.count("*").alias("samples"))
        .where(F.col("s1") > F.col("s0"))
        .select("node", (F.lit(100.0) * (F.col("c1") - F.col("c0")) / (F.col("s1") - F.col("s0"))).alias("cpu_pct"),
                "samples")
    )


def latency_summary(lat: DataFrame) -> DataFrame:
    """[broker, lat_ms, ...] -> [broker, n, median_ms, p90_ms, max_ms] per delivering broker."""
    return (
        lat.groupBy("broker")
        .agg(F.count("*").alias("n"), F.percentile_approx("lat_ms", 0.5, 10000).alias("median_ms"),
             F.percentile_approx("lat_ms", 0.9, 10000).alias("p90_ms"), F.max("lat_ms").alias("max_ms"))
        .select("broker", "n", "median_ms", "p90_ms", "max_ms")
    )
