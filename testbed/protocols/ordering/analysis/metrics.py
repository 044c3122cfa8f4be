"""Per-run metrics of the ordering protocol (Sec 5.2), as Spark transforms.

* timestamp size: entries per completed timestamp (``o_timestamp.size``): mean, std dev;
* end-to-end latency of timestamp creation: publish() call -> EVENT_TS back (ms);
* throughput: completed timestamps per second: ``n / max(completion span, request span)``
  (first to last completion; first to last request of those completed). A system that keeps up
  completes at the offered rate over the request span: the ratio is the offered rate, whatever
  the latency (issue #12: ``n / (last completion - first request)`` adds one latency to the span,
  so at the quick scale's 5 s a 0.6 s latency already read as below 0.9x offered, a knee that was
  only the latency). A saturated one completes at its service rate over a completion span longer
  than the request span; a backlog drained fast after a stall cannot count above the offered
  rate (the request span bounds it);
* % outgoing bandwidth per TM server: bytes of timestamps forwarded to a TM on
  another server / bytes of every timestamp a TM step on that server produced
  (last cumulative ``o_tm_stats`` of each server).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def timestamp_summary(ts: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """One row (per ``by`` group): n, size_mean, size_std, latency_mean_ms, latency_p50_ms,
    latency_p99_ms, t_first_s (first request), t_last_s (last completion), t_first_done_s,
    t_last_req_s, throughput_per_s (see the module docstring)."""
    agg = ts.select(*by, "size", "latency_ms", "t_rel_s").groupBy(*by).agg(
        F.count("*").alias("n"),
        F.mean("size").alias("size_mean"),
        F.stddev_pop("size").alias("size_std"),
        F.mean("latency_ms").alias("latency_mean_ms"),
        F.expr("percentile_approx(latency_ms, 0.5)").alias("latency_p50_ms"),
        F.expr("percentile_approx(latency_ms, 0.99)").alias("latency_p99_ms"),
        F.min(F.col("t_rel_s") - F.col("latency_ms") / 1e3).alias("t_first_s"),  # first request
        F.max("t_rel_s").alias("t_last_s"),  # last completion
        F.min("t_rel_s").alias("t_first_done_s"),
        F.max(F.col("t_rel_s") - F.col("latency_ms") / 1e3).alias("t_last_req_s"),
    )
    span = F.greatest(F.col("t_last_s") - F.col("t_first_done_s"), F.col("t_last_req_s") - F.col("t_first_s"))
    return agg.withColumn("throughput_per_s",
                          F.when(span > 0, F.col("n") / span).otherwise(F.lit(None).cast("double")))


def outgoing_bandwidth(tm_stats: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """[*by, server, ts_bytes_handled, ts_bytes_remote, outgoing_pct, created, completed]."""
    last = (tm_stats.groupBy(*by, "node").agg(F.max_by(F.struct(
        "ts_bytes_handled", "ts_bytes_remote", "created", "completed"), "t").alias("s")))
    return last.select(
        *by,
        F.col("node").alias("server"),
        F.col("s.ts_bytes_handled").alias("ts_bytes_handled"),
        F.col("s.ts_bytes_remote").alias("ts_bytes_remote"),
        F.when(F.col("s.ts_bytes_handled") > 0,
               F.col("s.ts_bytes_remote") * 100.0 / F.col("s.ts_bytes_handled")).otherwise(0.0)
        .alias("outgoing_pct"),
        F.col("s.created").alias("created"),
        F.col("s.completed").alias("completed"),
    ).orderBy(*by, "server")


def run_metrics(events: dict[str, DataFrame], spark) -> dict[str, Any]:
    """The metrics of one run as a plain dict (for the figure CSVs)."""
    from testbed.analysis.ingest import empty_events

    ts = events.get("o_timestamp") or empty_events(spark, "o_timestamp")
    tm = events.get("o_tm_stats") or empty_events(spark, "o_tm_stats")
    row = timestamp_summary(ts).collect()[0].asDict()
    bw = {r["server"]: r.asDict() for r in outgoing_bandwidth(tm).collect()}
    return {**row, "servers": bw}
