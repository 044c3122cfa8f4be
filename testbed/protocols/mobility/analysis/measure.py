"""Mobility runs read back for the paper's figures (Hu et al., Figs 8-14).

``moves(spark, run_dirs)`` reads the ``move_begin`` / ``move_end`` / ``move_traffic`` lines of many
runs' logs in one Spark job and returns one row per move (pandas): run, mid, client, src, dst,
movement, begin (seconds since the run's t0), outcome, dur_ms, msgs (sum of ``move_traffic.msgs``
over every broker: the move's own messages over overlay links). ``annotate`` adds each client's
workload and template (recomputed from the plan exactly as the brokers compute them,
``testbed.protocols.mobility.nodes.workloads.assign``) and route. ``summary`` turns one run's moves into the
numbers the figures and claims use; ``testbed.protocols.mobility.experiments`` judges them over the seeds.

Definitions (docs/mobility.md, "Reproduce"):

* a move is *counted* when it committed and began at or after the warm-up (the set-up phase,
  "ignored in subsequent results" by the paper); latency = ``move_end.dur_ms`` (the source's
  monotonic clock, from MOVE to done);
* messages per movement = the counted moves' messages / their number (the movement's own
  protocol messages: reconfiguration (1)-(5) per link, covering the (un)subscriptions, their
  acknowledgements, the transfer and done, plus every other client's (un)subscription the move
  caused through retraction);
* number of movements = the commits over the whole run (Fig 9b's impulses).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd

from testbed.analysis.congestion import CONGESTION_COLUMNS, congestion, congestion_summary, run_t0_ns  # noqa: F401

MOVE_COLUMNS = ["run", "mid", "client", "src", "dst", "movement", "begin", "outcome", "dur_ms", "path_len",
                "msgs"]


def _schema():
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("t", T.LongType()), T.StructField("node", T.StringType()), T.StructField("ev", T.StringType()),
        T.StructField("mid", T.StringType()), T.StructField("client", T.StringType()),
        T.StructField("src", T.StringType()), T.StructField("dst", T.StringType()),
        T.StructField("movement", T.StringType()), T.StructField("outcome", T.StringType()),
        T.StructField("dur_ms", T.DoubleType()), T.StructField("path_len", T.LongType()),
        T.StructField("msgs", T.LongType()),
    ])


def moves(spark, run_dirs: dict[str, str]) -> pd.DataFrame:
    """One row per move id of every run (``run`` = the key of ``run_dirs``), begin in seconds
    since that run's t0; moves that never ended have outcome None."""
    from pyspark.sql import functions as F

    files = [str(p) for d in run_dirs.values() for p in sorted((Path(d) / "logs").glob("*.jsonl"))]
    if not files:
        return pd.DataFrame(columns=MOVE_COLUMNS)
    by_dir = {str(Path(d).resolve()): k for k, d in run_dirs.items()}
    t0 = {k: run_t0_ns(d) for k, d in run_dirs.items()}
    mapping = F.create_map(*[x for d, k in by_dir.items() for x in (F.lit(d), F.lit(k))])
    t0map = F.create_map(*[x for k, v in t0.items() for x in (F.lit(k), F.lit(v))])
    lines = spark.read.text(files).select(F.col("_metadata.file_path").alias("file"), "value")
    ev = (lines.where(F.col("value").contains('"ev":"move_'))
          .select("file", F.from_json("value", _schema()).alias("e")).select("file", "e.*")
          .where(F.col("ev").isin("move_begin", "move_end", "move_traffic")))
    run_dir = F.regexp_replace(F.regexp_extract("file", r"^(?:file:)?(.*)/logs/[^/]*$", 1), "%20", " ")
    ev = ev.withColumn("run", mapping[run_dir]).drop("file")
    begin = (ev.where(F.col("ev") == "move_begin")
             .select("run", "mid", "client", "src", "dst", "movement",
                     ((F.col("t") - t0map[F.col("run")]) / 1e9).alias("begin")))
    end = (ev.where(F.col("ev") == "move_end")
           .groupBy("run", "mid").agg(F.first("outcome").alias("outcome"), F.first("dur_ms").alias("dur_ms"),
                                      F.first("path_len").alias("path_len")))
    traffic = ev.where(F.col("ev") == "move_traffic").groupBy("run", "mid").agg(F.sum("msgs").alias("msgs"))
    df = begin.join(end, ["run", "mid"], "left").join(traffic, ["run", "mid"], "left").toPandas()
    if df.empty:
        return pd.DataFrame(columns=MOVE_COLUMNS)
    df["msgs"] = df["msgs"].fillna(0).astype(int)
    return df[MOVE_COLUMNS].sort_values(["run", "begin"]).reset_index(drop=True)


def clients_of(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """client -> its assignment (workload, template, route, moves, group), as the brokers compute it."""
    from testbed.protocols.mobility.nodes.workloads import assign

    brokers = [n for n, v in (plan.get("nodes") or {}).items() if (v or {}).get("kind", "node") == "node"
               and (v or {}).get("role", "broker") == "broker"]
    out = {}
    for g, spec in ((plan.get("params") or {}).get("mobile") or {}).items():
        for c in assign(dict(spec, name=g), sorted(brokers, key=_broker_key), int(plan.get("repeat_index") or 0)):
            out[c["client"]] = dict(c, group=g)
    return out


def _broker_key(name: str) -> tuple[int, str]:  # as the brokers sort them (protocols/mobility/nodes/broker.py)
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else 0, name)


def annotate(df: pd.DataFrame, plan: dict[str, Any]) -> pd.DataFrame:
    """Add workload, template and route ('1-13' style, from the move's two ends) to one run's moves."""
    cl = clients_of(plan)
    df = df.copy()
    df["workload"] = [cl.get(c, {}).get("workload") for c in df["client"]]
    df["template"] = [cl.get(c, {}).get("template") for c in df["client"]]
    df["route"] = ["-".join(sorted((str(a).lstrip("b"), str(b).lstrip("b")), key=lambda s: int(s) if s.isdigit()
                                   else 0)) for a, b in zip(df["src"], df["dst"])]
    return df


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


def stats(df: pd.DataFrame) -> dict[str, Any]:
    """Latency and message numbers of a set of counted moves."""
    lat = [float(x) for x in df["dur_ms"]]
    n = len(lat)
    return {"moves": n,
            "lat_mean_ms": statistics.fmean(lat) if n else math.nan,
            "lat_p50_ms": _pct(lat, 0.5), "lat_p99_ms": _pct(lat, 0.99),
            "lat_std_ms": statistics.stdev(lat) if n > 1 else (0.0 if n else math.nan),
            "msgs_per_move": float(df["msgs"].sum()) / n if n else math.nan,
            "msgs_total": int(df["msgs"].sum()),
            "msgs_max": int(df["msgs"].max()) if n else None,  # the costliest move (e.g. a covered root's)
            "movers": int(df["client"].nunique()) if n and "client" in df else 0,
            "path_len": (float(pd.to_numeric(df["path_len"], errors="coerce").mean())
                         if n and "path_len" in df else math.nan)}


def summary(df: pd.DataFrame, warmup_s: float) -> dict[str, Any]:
    """One run's numbers: over the counted moves (committed, begun at or after ``warmup_s``), per
    workload and per route; ``early``: committed moves begun before the warm-up; ``commits``:
    every commit of the run (Fig 9b's number of movements); ``outcomes``: count per outcome."""
    done = df[df["outcome"] == "commit"]
    counted = done[done["begin"] >= warmup_s]
    out: dict[str, Any] = {**stats(counted), "commits": int(len(done)),
                           "outcomes": {str(k): int(v) for k, v in df["outcome"].fillna("none").value_counts().items()},
                           "early": stats(done[done["begin"] < warmup_s])}
    if "workload" in counted:
        out["by_workload"] = {w: {**stats(g), "commits": int((done["workload"] == w).sum())}
                              for w, g in counted.groupby("workload")}
        out["by_route"] = {r: stats(g) for r, g in counted.groupby("route")}
    return out


# ------------------------------------------------------------------------------ the mechanism
# The paper credits covering's slowness to congestion ("a burst of messages that causes significant
# congestion") and early moves' slowness to joining clients: what the brokers measured about it
# (per broker and per second: service queue, CPU, received rate) is read by the generic
# testbed.analysis.congestion, re-exported here.


def msgs_over_time(df: pd.DataFrame, bin_s: float) -> pd.DataFrame:
    """Committed moves binned by their start time (``bin_s`` wide bins from 0): per bin its start,
    the moves, their mean messages and mean latency (Fig 8's mechanism: do the moves' messages
    change over the run, e.g. while clients join?)."""
    done = df[df["outcome"] == "commit"] if len(df) else df
    if not len(done):
        return pd.DataFrame(columns=["bin_s", "moves", "msgs_mean", "lat_mean_ms"])
    b = (done["begin"] // bin_s) * bin_s
    g = done.assign(bin_s=b).groupby("bin_s")
    return pd.DataFrame({"moves": g.size(), "msgs_mean": g["msgs"].mean(),
                         "lat_mean_ms": g["dur_ms"].mean()}).reset_index()
