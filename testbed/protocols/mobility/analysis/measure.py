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

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd

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


def run_t0_ns(run_dir: str | Path) -> int:
    return int(json.loads((Path(run_dir) / "manifest.json").read_text()).get("t0_wall_ns", 0))


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
# congestion") and early moves' slowness to joining clients. What the brokers measured about it, per
# broker and per second: their service queue (the ``service`` line of a node with a service time:
# docs/topology.md, "Service time"), their CPU (``cpu`` lines: user + system seconds, cumulative) and
# the messages they received (``stats.received``, cumulative). Plain Python over the JSONL logs (a
# quick run's are ~2 MB): only the lines of these three events are parsed.
CONGESTION_COLUMNS = ["node", "t", "queued", "max_queued", "busy", "wait_ms", "served", "cpu_share", "recv_per_s"]
_CONG_EVENTS = ('"service"', '"cpu"', '"stats"')  # a cheap pre-filter; ``ev`` decides


def congestion(run_dir: str | Path, brokers: set[str] | None = None) -> pd.DataFrame:
    """One row per (broker, sample) of one run, ``t`` in seconds since the run's t0: the service
    queue's fields (NaN where the node has no service time), the CPU share over the interval since
    the previous ``cpu`` line (CPU seconds / wall seconds, 1.0 = one core) and the messages received
    per second over that interval. ``brokers``: the nodes to read (default: every log's node)."""
    run_dir = Path(run_dir)
    t0 = run_t0_ns(run_dir)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for f in sorted((run_dir / "logs").glob("*.jsonl")):
        node = f.stem
        if brokers is not None and node not in brokers:
            continue
        prev_cpu: tuple[int, float] | None = None
        prev_recv: tuple[int, int] | None = None
        with open(f) as fh:
            for line in fh:
                if not any(k in line for k in _CONG_EVENTS):
                    continue
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                ev, t = d.get("ev"), int(d.get("t") or 0)
                sec = round((t - t0) / 1e9)  # the node's periodic lines of one tick share a second
                row = rows.setdefault((node, sec), {"node": node, "t": (t - t0) / 1e9})
                if ev == "service":
                    row.update(queued=d.get("queued"), max_queued=d.get("max_queued"), busy=d.get("busy"),
                               wait_ms=d.get("wait_ms"), served=d.get("served"))
                elif ev == "cpu":
                    c = float(d.get("user_s") or 0) + float(d.get("sys_s") or 0)
                    if prev_cpu is not None and t > prev_cpu[0]:
                        row["cpu_share"] = (c - prev_cpu[1]) / ((t - prev_cpu[0]) / 1e9)
                    prev_cpu = (t, c)
                elif ev == "stats":
                    n = int(d.get("received") or 0)
                    if prev_recv is not None and t > prev_recv[0]:
                        row["recv_per_s"] = (n - prev_recv[1]) / ((t - prev_recv[0]) / 1e9)
                    prev_recv = (t, n)
    if not rows:
        return pd.DataFrame(columns=CONGESTION_COLUMNS)
    df = pd.DataFrame(list(rows.values()))
    for c in CONGESTION_COLUMNS:
        if c not in df:
            df[c] = math.nan
    df = df[CONGESTION_COLUMNS].astype({c: float for c in CONGESTION_COLUMNS[1:]})
    df = df.dropna(how="all", subset=CONGESTION_COLUMNS[2:])  # a node's first cpu/stats line: no interval yet
    return df.sort_values(["node", "t"]).reset_index(drop=True)


def congestion_summary(cg: pd.DataFrame, start_s: float, end_s: float) -> dict[str, Any]:
    """The brokers' congestion over the window [start_s, end_s) of one run: the busiest broker (by
    mean ``busy``) and its mean busy fraction, the highest per-broker mean busy, the longest queue any
    broker had (``max_queued``), the mean wait in the queue over every served message, the highest
    per-second CPU share of any broker and the highest per-broker mean CPU share; ``service``: whether
    the run had service lines at all (without a service time there is no queue to measure)."""
    w = cg[(cg["t"] >= start_s) & (cg["t"] < end_s)]
    has = bool(len(w)) and bool(w["busy"].notna().any())
    out: dict[str, Any] = {"service": has, "busy_broker": None, "busy_mean_max": math.nan, "queue_max": math.nan,
                           "wait_ms_mean": math.nan, "cpu_max": math.nan, "cpu_mean_max": math.nan,
                           "recv_per_s_max": math.nan}
    if not len(w):
        return out
    cpu = w.dropna(subset=["cpu_share"])
    if len(cpu):
        out["cpu_max"] = float(cpu["cpu_share"].max())
        out["cpu_mean_max"] = float(cpu.groupby("node")["cpu_share"].mean().max())
    recv = w.dropna(subset=["recv_per_s"])
    if len(recv):
        out["recv_per_s_max"] = float(recv.groupby("node")["recv_per_s"].mean().max())
    if has:
        s = w.dropna(subset=["busy"])
        by = s.groupby("node")["busy"].mean()
        out["busy_broker"] = str(by.idxmax())
        out["busy_mean_max"] = float(by.max())
        out["queue_max"] = float(s["max_queued"].max())
        served = s["served"].fillna(0)
        out["wait_ms_mean"] = (float((s["wait_ms"].fillna(0) * served).sum() / served.sum())
                               if served.sum() > 0 else 0.0)
    return out


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
