"""Ordering runs read back for the figures: every run's timestamps, bandwidth and history checks.

Pure readers of run directories (their ``logs/*.jsonl`` and ``plan.json``) through one Spark job
for many runs at once; ``testbed.protocols.ordering.experiments`` draws the figures and judges the claims.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

def read_events(spark, run_dirs: dict[str, str], ev: str):
    """Every ``ev`` line of the given runs' logs, typed, plus ``run`` (``analysis.batch.read_events``)."""
    from testbed.analysis.batch import read_events as read

    return read(spark, run_dirs, ev)


def spark_metrics(spark, run_dirs: dict[str, str]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Per run: the timestamp summary; per run and server: the outgoing bandwidth."""
    from pyspark.sql import functions as F

    from testbed.protocols.ordering.analysis.metrics import outgoing_bandwidth, timestamp_summary

    ts = read_events(spark, run_dirs, "o_timestamp").withColumn("t_rel_s", F.col("t") / 1e9)
    summary: dict[str, dict[str, Any]] = {r: {} for r in run_dirs}
    for row in timestamp_summary(ts, ("run",)).collect():
        d = row.asDict()
        summary[d.pop("run")] = d
    tm = read_events(spark, run_dirs, "o_tm_stats")
    bw: dict[str, dict[str, Any]] = {r: {} for r in run_dirs}
    for row in outgoing_bandwidth(tm, ("run",)).collect():
        d = row.asDict()
        bw[d.pop("run")][d["server"]] = d
    return summary, bw


def spark_checks(spark, run_dirs: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """The history checks of each run, from its logs through Spark (see checks/ordering.py)."""
    from pyspark.sql import functions as F

    from testbed.protocols.ordering.analysis import history as H
    from testbed.protocols.ordering.analysis.liveness import check_liveness, liveness_bound

    notify = read_events(spark, run_dirs, "o_notify").select(
        "run", "client", "eid", "topic", "ts", "ooo", "wait_ms", F.col("n").alias("order"),
        (F.col("t") / 1e9).alias("t"))
    stamps = read_events(spark, run_dirs, "o_timestamp").select(
        "run", "client", "eid", "topic", "sn", (F.col("t") / 1e9).alias("t"), (F.col("t0") / 1e9).alias("t0"))
    subs = read_events(spark, run_dirs, "o_subscribed").select("run", "client", "topic", "ts",
                                                               (F.col("t") / 1e9).alias("t"))
    stuck = read_events(spark, run_dirs, "o_stuck").select("run", "client", "eid", "topic", "age_ms", "final",
                                                           "waits", "sub")
    unsubs = read_events(spark, run_dirs, "o_unsubscribe").select("run", "client", "topic", (F.col("t") / 1e9).alias("t"))
    hist: dict[str, list[dict[str, Any]]] = {r: [] for r in run_dirs}
    for df, ev in ((notify, "o_notify"), (stamps, "o_ens_publish"), (subs, "o_subscribed"),
                   (unsubs, "o_unsubscribe"), (stuck, "o_stuck")):
        for row in df.toLocalIterator():
            d = row.asDict()
            hist[d.pop("run")].append({**d, "ev": ev})
    out: dict[str, list[dict[str, Any]]] = {}
    for run, h in hist.items():
        plan = json.loads((Path(run_dirs[run]) / "plan.json").read_text())
        params = plan.get("params") or {}
        reliable = params.get("ens", "reliable") == "reliable"
        notes = [x for x in h if x["ev"] == "o_notify"]
        last = max((x["t"] for x in notes), default=0.0)
        res = [H.check_tno(h)]
        if reliable:
            res.append(H.check_completeness(h, until=last - 1.0))
        else:
            res.append(H.check_ooo_tags(h))
        res.append(check_liveness(h, liveness_bound(plan)["bound_s"]))
        for r in res:
            r["notifications"] = len(notes)
        out[run] = res
    return out


def run_row(run_dir: str, summary: dict[str, Any]) -> dict[str, Any]:
    """One run of a figure sweep: its setup (from ``plan.json``) and its timestamp summary."""
    plan = json.loads((Path(run_dir) / "plan.json").read_text())
    groups = [n["clients"] for n in plan["nodes"].values() if n.get("clients")]
    ncl = sum(g["count"] for g in groups)
    k = next((g["extra"].get("topics_per_client", 10) for g in groups), 10)
    offered = sum(g["count"] * g["rate_per_s"] for g in groups)
    point = plan.get("point") or {}
    return {"shape": point.get("shape"), "rate": point.get("rate", round(offered)), "k": k,
            "total_subscribed": ncl * k, "clients": ncl, "rate_offered": offered,
            "repeat": plan.get("repeat_index", 0),
            "timestamps": summary.get("n"), "latency_mean_ms": summary.get("latency_mean_ms"),
            "latency_p50_ms": summary.get("latency_p50_ms"), "latency_p99_ms": summary.get("latency_p99_ms"),
            "throughput_per_s": summary.get("throughput_per_s"), "size_mean": summary.get("size_mean"),
            "size_std": summary.get("size_std"), "run": Path(run_dir).name}
