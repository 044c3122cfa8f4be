"""Transactions runs read back for the paper's figures (Jergler et al. Figs 5-9).

Pure readers of run directories (their ``logs/*.jsonl``, ``plan.json``, ``manifest.json``):

* :func:`tx_rows`   one Spark job over many runs' ``tx_begin``/``tx_end``: per run the committed
                    count, mean/median latency, and the throughputs (spec section 2: sequential
                    runs 1 / mean latency; concurrent runs committed / (last end - first begin)).
* :func:`inbound`   Fig 9: the regular events delivered at the agents, binned per second, and
                    the dispatch windows (``tx_round`` start/end) of each run.
* :func:`rate_drop` Fig 9's numbers from one run's bins and windows.
* :func:`check_run` the protocol's history checks (P1-P9 + the pub/sub core's) on one run.
* :func:`pubsub_check_runs` P8 (the pub/sub core's checks) on many runs at once, batched.

``testbed.protocols.transactions.experiments`` judges the claims over the seeds.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any, Iterable

from testbed.analysis.congestion import congestion, congestion_summary, marked_lines, run_t0_ns


def _plan(run_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "plan.json").read_text())


def setup(run_dir: str | Path) -> dict[str, Any]:
    """The sweep point of a run, read from its plan: variant, brokers, threads, instances, ..."""
    plan = _plan(run_dir)
    p = plan.get("params") or {}
    brokers = sum(1 for n in plan["nodes"].values() if n.get("role") == "broker")
    return {"variant": p.get("variant"), "brokers": brokers, "threads": int(p.get("threads") or 1),
            "instances": int(p.get("instances") or 1), "transactions": int(p.get("transactions") or 0),
            "wait_ms": round(float(p.get("wait") or 0) * 1000), "timeout_s": float(p.get("timeout") or 0),
            "repeat": int(plan.get("repeat_index") or 0), "run": Path(run_dir).name,
            "regular_rate": p.get("regular_rate")}


def read_events(spark, run_dirs: dict[str, str], ev: str):
    """Every ``ev`` line of the given runs' logs, typed, plus ``run`` (``analysis.batch.read_events``)."""
    from testbed.analysis.batch import read_events as read

    return read(spark, run_dirs, ev)


def throughput(row: dict[str, Any]) -> float:
    """Spec section 2: sequential runs (1 thread, 1 instance) 1 / mean latency; concurrent runs
    committed / (last end - first begin)."""
    if row["threads"] == 1 and row["instances"] == 1:
        lat = row.get("lat_mean_ms")
        return 1000.0 / lat if lat else math.nan
    return row.get("thr_wall", math.nan)


def tx_rows(spark, run_dirs: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Per run (key of ``run_dirs``): its setup + committed, aborted, lat_mean_ms, lat_median_ms,
    span_s (first tx_begin to last tx_end), thr_wall (committed / span), thr (see throughput)."""
    from pyspark.sql import functions as F

    out = {k: {**setup(d), "committed": 0, "aborted": 0, "begun": 0, "lat_mean_ms": math.nan,
               "lat_median_ms": math.nan, "span_s": math.nan, "thr_wall": math.nan} for k, d in run_dirs.items()}
    if not run_dirs:
        return out
    ends = read_events(spark, run_dirs, "tx_end")
    begins = read_events(spark, run_dirs, "tx_begin")
    # a conflict run's probe transactions are not the scenario's dispatches: not measured
    probe = F.coalesce(F.col("kind"), F.lit("dispatch")) == "probe"
    ends = ends.join(begins.where(probe).select("run", "tx"), ["run", "tx"], "left_anti")
    begins = begins.where(~probe)
    ok = F.col("outcome") == "committed"
    good = ok & (F.col("latency_ms") >= 0)
    agg = (ends.groupBy("run").agg(
        F.sum(ok.cast("int")).alias("committed"), F.sum((~ok).cast("int")).alias("aborted"),
        F.avg(F.when(good, F.col("latency_ms"))).alias("lat_mean_ms"),
        F.percentile_approx(F.when(good, F.col("latency_ms")), 0.5, 10000).alias("lat_median_ms"),
        F.max("t").alias("last_end")))
    b = begins.groupBy("run").agg(F.count("*").alias("begun"), F.min("t").alias("first_begin"))
    for r in agg.join(b, "run", "outer").collect():
        d = r.asDict()
        row = out[d["run"]]
        for k in ("committed", "aborted", "begun", "lat_mean_ms", "lat_median_ms"):
            if d.get(k) is not None:
                row[k] = d[k]
        if d.get("last_end") and d.get("first_begin"):
            row["span_s"] = (d["last_end"] - d["first_begin"]) / 1e9
            row["thr_wall"] = row["committed"] / row["span_s"] if row["span_s"] > 0 else math.nan
    for row in out.values():
        row["thr"] = throughput(row)
        row["thr_x_lat_s"] = row["thr_wall"] * row["lat_mean_ms"] / 1000.0
    return out


def inbound(spark, run_dirs: dict[str, str], bin_s: float = 1.0) -> dict[str, dict[str, Any]]:
    """Fig 9, per run: ``bins`` {second -> regular events delivered at the agents in it} (every
    bin of the workload, empty ones 0) and ``windows`` [(start_s, end_s)] of the dispatch rounds,
    seconds from the run's t0; ``end_s`` the workload's end."""
    from pyspark.sql import functions as F

    out: dict[str, dict[str, Any]] = {}
    t0 = {}
    agents: dict[str, list[str]] = {}
    for k, d in run_dirs.items():
        m = json.loads((Path(d) / "manifest.json").read_text())
        t0[k] = int(m.get("t0_wall_ns") or 0)
        plan = _plan(d)
        agents[k] = [n for n, v in plan["nodes"].items() if v.get("role") == "agent"]
        out[k] = {"bins": {}, "windows": [], "end_s": float(m.get("duration_s") or plan["duration_s"]),
                  "bin_s": bin_s}
    if not run_dirs:
        return out
    t0map = F.create_map(*[x for k, v in t0.items() for x in (F.lit(k), F.lit(v))])
    rel = (F.col("t") - t0map[F.col("run")]) / 1e9
    dl = read_events(spark, run_dirs, "deliver").withColumn("rel", rel)
    is_agent = F.lit(False)
    for k, names in agents.items():
        is_agent = is_agent | ((F.col("run") == k) & F.col("node").isin(names))
    for r in (dl.where(is_agent).groupBy("run", F.floor(F.col("rel") / bin_s).alias("b"))
              .count().collect()):
        out[r["run"]]["bins"][int(r["b"])] = int(r["count"])
    rounds = read_events(spark, run_dirs, "tx_round").withColumn("rel", rel)
    opened: dict[tuple[str, str, int], float] = {}
    for r in rounds.orderBy("run", "t").collect():
        key = (r["run"], r["client"], r["round"])
        if r["phase"] == "start":
            opened[key] = r["rel"]
        elif key in opened:
            out[r["run"]]["windows"].append((opened.pop(key), r["rel"]))
    for k, v in out.items():
        n = int(math.ceil(v["end_s"] / bin_s))
        v["bins"] = {b: v["bins"].get(b, 0) / bin_s for b in range(0, n)}
    return out


def rate_drop(bins: dict[int, float], windows: Iterable[tuple[float, float]], bin_s: float = 1.0,
              skip_s: float = 2.0) -> dict[str, Any]:
    """Mean inbound rate in the bins inside a dispatch window (a bin is inside when any part of it
    overlaps a window) against the bins outside, over the part of the run where regular events
    flow (from the first non-empty bin + ``skip_s`` to the last non-empty bin - 1: the start-up
    and the tail are neither); plus the coefficient of variation of the rate over that part."""
    ws = list(windows)
    flowing = [b for b, v in bins.items() if v > 0]
    if not flowing:
        return {"in_rate": math.nan, "out_rate": math.nan, "ratio": math.nan, "cv": math.nan, "bins_in": 0,
                "bins_out": 0}
    lo, hi = min(flowing) + skip_s / bin_s, max(flowing) - 1
    inside, outside = [], []
    for b, v in sorted(bins.items()):
        if b < lo or b > hi:
            continue
        s, e = b * bin_s, (b + 1) * bin_s
        (inside if any(ws_ < e and we > s for ws_, we in ws) else outside).append(v)
    allv = inside + outside
    mi = statistics.fmean(inside) if inside else math.nan
    mo = statistics.fmean(outside) if outside else math.nan
    cv = (statistics.stdev(allv) / statistics.fmean(allv)) if len(allv) > 1 and statistics.fmean(allv) else math.nan
    return {"in_rate": mi, "out_rate": mo, "ratio": mi / mo if mo else math.nan, "cv": cv,
            "bins_in": len(inside), "bins_out": len(outside)}


PHASES = ("up_s", "settle_s", "workload_s", "drain_collect_s", "down_s")


def run_phases(run_dir: str | Path) -> dict[str, float]:
    """Where one run's wall time went, from its manifest: bring-up (``up_s``), the settle before
    the workload, the workload (until every node reported its work done, else the planned
    duration), the drain and log collection (to ``end_wall_ns``), the stop (``down_s``)."""
    m = json.loads((Path(run_dir) / "manifest.json").read_text())
    p = (_plan(run_dir).get("params") or {})
    work = float(m.get("workload_end_s") if m.get("workload_end_s") is not None else m.get("duration_s") or 0)
    out = {"up_s": float(m.get("up_s") or 0), "settle_s": float(p.get("settle") or 0), "workload_s": work,
           "drain_collect_s": 0.0, "down_s": float(m.get("down_s") or 0)}
    if m.get("end_wall_ns") and m.get("t0_wall_ns"):
        out["drain_collect_s"] = max(0.0, (m["end_wall_ns"] - m["t0_wall_ns"]) / 1e9 - work)
    return out


def phase_totals(run_dirs: Iterable[str | Path]) -> dict[str, float]:
    """:func:`run_phases` summed over runs (+ ``runs``: how many); unreadable runs are skipped."""
    tot = dict.fromkeys(PHASES, 0.0)
    n = 0
    for d in run_dirs:
        try:
            ph = run_phases(d)
        except (OSError, ValueError):
            continue
        n += 1
        for k in PHASES:
            tot[k] += ph[k]
    return {"runs": n, **{k: round(v, 1) for k, v in tot.items()}}


# ------------------------------------------------------------------------------ the brokers' queues
# What the brokers' per-message service time (costs.j2) did to them while the transactions ran:
# their ``service`` lines (testbed.analysis.congestion) over the transactions' span, from the first
# ``tx_begin`` + ``QUEUE_SKIP_S`` (the settle's routing flood is over by then) to the last ``tx_end``.
QUEUE_SKIP_S = 5.0
_TX_EDGES = ('"tx_begin"', '"tx_end"')


def tx_span(run_dir: str | Path) -> tuple[float, float] | None:
    """(first ``tx_begin``, last ``tx_end``) of one run, seconds since its t0; None without both."""
    t0 = run_t0_ns(run_dir)
    first = last = None
    for f in sorted((Path(run_dir) / "logs").glob("*.jsonl")):
        for d in marked_lines(f, _TX_EDGES):
            t = int(d.get("t") or 0)
            if d.get("ev") == "tx_begin":
                first = t if first is None else min(first, t)
            elif d.get("ev") == "tx_end":
                last = t if last is None else max(last, t)
    if first is None or last is None:
        return None
    return (first - t0) / 1e9, (last - t0) / 1e9


def broker_queues(run_dir: str | Path) -> dict[str, Any]:
    """The brokers' service queues over one run's transactions (``congestion_summary`` of the span
    above): the busiest broker, its mean busy fraction (``busy_mean_max``: 1.0 = never idle) and
    the mean wait of a message in its queue (``wait_ms``, over every broker's served messages
    weighted by them, ``wait_ms_busiest`` the busiest one's). NaN where the run has no span or no
    service time."""
    out: dict[str, Any] = {"busy_broker": None, "busy_mean_max": math.nan, "wait_ms": math.nan,
                           "wait_ms_busiest": math.nan}
    span = tx_span(run_dir)
    if span is None or span[1] - span[0] <= QUEUE_SKIP_S:
        return out
    cg = congestion(run_dir)
    window = (span[0] + QUEUE_SKIP_S, span[1])
    s = congestion_summary(cg, *window)
    if not s["service"]:
        return out
    b = s["busy_broker"]
    out.update(busy_broker=b, busy_mean_max=s["busy_mean_max"], wait_ms=s["wait_ms_mean"],
               wait_ms_busiest=congestion_summary(cg[cg["node"] == b], *window)["wait_ms_mean"])
    return out


def broker_work(run_dir: str | Path) -> dict[str, Any]:
    """What one transaction cost the brokers in one run, over the window of :func:`broker_queues`
    (the first ``tx_begin`` + ``QUEUE_SKIP_S`` to the last ``tx_end``): the messages they served
    (``served_per_tx``, summed over every broker) and the service time they spent
    (``service_ms_per_tx``: each ``service`` line's busy fraction x its interval, summed), per
    committed transaction that ended in the window; ``ms_per_msg`` is the one over the other, and
    ``tx`` the transactions counted. A sequential run's transaction waits for every message on its
    path, so this is the broker cost the latency carries as the overlay grows (Fig 6). NaN where
    the run has no span, no service time or no transaction ended in the window."""
    out: dict[str, Any] = {"served_per_tx": math.nan, "service_ms_per_tx": math.nan, "ms_per_msg": math.nan,
                           "tx": 0}
    span = tx_span(run_dir)
    if span is None or span[1] - span[0] <= QUEUE_SKIP_S:
        return out
    lo, hi = span[0] + QUEUE_SKIP_S, span[1]
    t0 = run_t0_ns(run_dir)
    ended = 0
    for f in sorted((Path(run_dir) / "logs").glob("*.jsonl")):
        for d in marked_lines(f, ('"tx_end"',)):
            if d.get("ev") == "tx_end" and d.get("outcome", "committed") == "committed":
                t = (int(d.get("t") or 0) - t0) / 1e9
                ended += lo <= t <= hi
    cg = congestion(run_dir)
    s = cg.dropna(subset=["busy"]) if len(cg) else cg
    if not ended or not len(s):
        return out
    served = busy_s = 0.0
    for _, g in s.groupby("node"):
        g = g.sort_values("t")
        dt = g["t"].diff()
        dt = dt.fillna(dt.median() if dt.notna().any() else 1.0)  # a line covers the interval before it
        w = (g["t"] >= lo) & (g["t"] < hi)
        served += float(g.loc[w, "served"].fillna(0).sum())
        busy_s += float((g.loc[w, "busy"] * dt[w]).sum())
    out.update(tx=ended, served_per_tx=served / ended, service_ms_per_tx=1000 * busy_s / ended,
               ms_per_msg=1000 * busy_s / served if served else math.nan)
    return out


def _row(r) -> dict[str, Any]:
    return {"check": r.name, "passed": bool(r.passed), "violations": int(r.violations),
            "applies": (r.details or {}).get("applies", True),
            "examples": [str(x) for x in (r.examples or [])[:3]]}


def pubsub_check_runs(spark, run_dirs: dict[str, str | Path], progress=lambda s: None) -> dict[str, list[dict[str, Any]]]:
    """P8 on many runs: the pub/sub core's checks over all the runs at once (one batched pass,
    ``analysis/batch_checks.Batch``, the pub/sub core's batch part: each run's verdicts, counts and examples as its own alone);
    {key: [{check, passed, violations, applies, examples}]} as :func:`check_run` gives per run. A
    batch that fails falls back to :func:`check_run` per run (and says so)."""
    from testbed.analysis.batch_checks import Batch
    from testbed.protocols.pubsub.analysis.batch import BATCH_PART, PUBSUB
    from testbed.analysis.context import AnalysisContext
    from testbed.analysis.ingest import ingest

    names = {fn.__name__ for fn in PUBSUB}
    ctxs: dict[str, AnalysisContext] = {}
    key_of: dict[str, str] = {}
    for key, d in run_dirs.items():
        run = Path(d)
        ing = ingest(spark, run)
        ctxs[run.name] = AnalysisContext.build(spark, run, _plan(run), json.loads((run / "manifest.json").read_text()),
                                               dict(ing))
        key_of[run.name] = key
    batch = Batch(spark, ctxs, progress)
    try:
        batch.run((BATCH_PART.name,))
        out = {}
        for rid, key in key_of.items():
            got = batch.results[rid]
            if any(n not in got for n in PUBSUB.values()):  # the batch failed (it said so): alone
                out[key] = check_run(spark, run_dirs[key], names)
            else:
                out[key] = [_row(got[n]) for n in PUBSUB.values()]
        return out
    finally:
        batch.release()
        for c in ctxs.values():
            c.release()


def check_run(spark, run_dir: str | Path, functions: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The transactions checks (P1-P9 and the pub/sub core's) on one run's logs; ``functions``
    (check function names) restricts them (the BL-WAIT search needs only P2 and P9).
    -> [{check, passed, violations, applies, examples}]."""
    from testbed.analysis.context import AnalysisContext
    from testbed.analysis.ingest import ingest
    from testbed.registry import checks_for

    run = Path(run_dir)
    ing = ingest(spark, run)  # stored as Parquet in the run directory: every check reads that, not the JSON
    ctx = AnalysisContext.build(spark, run, _plan(run), json.loads((run / "manifest.json").read_text()), dict(ing))
    want = set(functions) if functions is not None else None
    out = []
    for c in checks_for("transactions"):
        if want is not None and c.__name__ not in want:
            continue
        out.append(_row(c(ctx)))
    return out
