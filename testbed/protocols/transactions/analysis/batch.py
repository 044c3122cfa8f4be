"""The transactions history checks (P1-P7, P9) over many runs at once: one Spark job per check
over a group of runs, with a verdict per run.

A reproduction is ~100 runs; checking them one by one costs an ingest and ~11 Spark jobs per run.
Here the runs' events are read as one DataFrame per event type (``analysis.batch.read_runs``,
one scan over the runs' stored Parquet) and every id the checks join on (transaction, operation,
trigger, node, client, agent, dispatcher, subscription, and the subscription ids in a broker's
``tx_tables`` PRT) is prefixed with the run's id (``<run_id>|``): the runs' histories are then
disjoint, so the checks' own violation queries (``checks.py``: ``required_order``,
``routing_violations``, ...) run unchanged over all of them, and each violation row names its run
(the prefix of its transaction or node). The runs of a batch are grouped by what changes a
check's rule (the variant; whether P9 applies): one job per check per group.

The pub/sub core's checks (P8, regular traffic) are not batched: they match every publication
against every subscription by content, which would pair runs with each other; they run per run
(``measure.check_run``), on the runs that have regular events (Fig 9).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from testbed.analysis.batch import prefix_ids
from testbed.analysis.context import AnalysisContext
from testbed.protocols.transactions.analysis import checks as K

SEP = "|"
KEYS = ("tx", "op_id", "trigger", "node", "client", "agent", "dispatcher", "sub_id", "pub_id", "publisher",
        "broker")
TX_EVENTS = ("tx_begin", "tx_op", "tx_proc", "tx_phase", "tx_recv", "tx_deliver", "tx_discard", "tx_outcome",
             "tx_end", "tx_tables")


def namespaced(df: DataFrame) -> DataFrame:
    """``read_runs`` rows with every id column prefixed by ``<run_id>|`` (empty / null ids kept:
    the checks test ``trigger != ''``); a ``tx_tables`` PRT's and SRT's keys (subscription and
    advertisement ids: P5 compares both) too."""
    run = F.col("run_id")
    df = prefix_ids(df, KEYS, SEP)
    for col in ("prt", "srt"):
        if col in df.columns:
            m = F.from_json(F.col(col).cast("string"), "map<string,string>")
            df = df.withColumn(col, F.to_json(F.transform_keys(m, lambda k, v: F.concat(run, F.lit(SEP), k))))
    return df


class BatchContext(AnalysisContext):
    """An AnalysisContext over many runs' namespaced events (``plan`` = the group's first run's:
    the group shares what the checks read from it, the variant and the abort / fault settings)."""

    run_dirs: list[str]

    @classmethod
    def over(cls, spark, run_dirs: list[str]) -> "BatchContext":
        first = Path(run_dirs[0])
        man = first / "manifest.json"
        ctx = cls(spark, first, _plan(first), json.loads(man.read_text()) if man.exists() else {}, {})
        ctx.run_dirs = list(run_dirs)
        return ctx

    def df(self, ev: str) -> DataFrame:
        if ev not in self.events:
            from testbed.analysis.batch import read_runs

            self.events[ev] = namespaced(read_runs(self.spark, self.run_dirs, ev)).drop("run_id")
        return self.events[ev]


def _plan(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "plan.json").read_text())


def group_key(plan: dict[str, Any]) -> tuple[str, bool]:
    """What changes a check's rule between runs: the variant; whether P9 applies (no explicit
    aborts, no faults, no conflict workload)."""
    p = plan.get("params") or {}
    return (str(p.get("variant") or ""),
            not (int(p.get("abort_every") or 0) > 0 or plan.get("actions") or p.get("conflict")))


# (name, description, applies(variant, p9), required(variant), violations(ctx, variant) -> DataFrame, run column)
Check = tuple[str, str, Callable[[str, bool], bool], Callable[[str], bool], Callable[[Any, str], DataFrame], str]


def _p1(ctx, v):
    return K.order_violations(K.required_order(ctx.df("tx_op")), ctx.df("tx_proc"), ctx.df("node_start"))


def _p2(ctx, v):
    return K.routing_violations(ctx.df("tx_begin"), ctx.df("tx_deliver"), K.outcomes(ctx), v not in K.TX_VARIANTS)


def _p3(ctx, v):
    return K.atomicity_violations(ctx.df("tx_recv"), ctx.df("tx_deliver"), ctx.df("tx_discard"),
                                  ctx.df("tx_outcome"), K.outcomes(ctx))


def _p4(ctx, v):
    if v not in K.TX_VARIANTS:
        begin, end = ctx.df("tx_begin"), ctx.df("tx_end")
        return (begin.select("tx").distinct().join(end.groupBy("tx").agg(F.count("*").alias("n")), "tx", "left")
                .where(F.col("n").isNull() | (F.col("n") != 1)).select("tx", F.coalesce("n", F.lit(0)).alias("n_end")))
    return K.agreement_violations(ctx.df("tx_begin"), ctx.df("tx_end"), ctx.df("tx_phase"), ctx.df("tx_proc"),
                                  ctx.df("tx_outcome"), ctx.df("tx_recv"), ctx.df("tx_op"))


def _p5(ctx, v):
    return K.replay_violations(ctx.df("tx_op"), ctx.df("tx_proc"), ctx.df("tx_phase"), ctx.df("tx_tables"),
                               K.outcomes(ctx))


def _p6(ctx, v):
    return K.p6_violations(ctx.df("tx_phase"), ctx.df("tx_begin"), ctx.df("tx_deliver"), K.outcomes(ctx))


def _p3e(ctx, v):
    return K.expected_violations(ctx.df("tx_begin"), ctx.df("tx_outcome"), ctx.df("tx_deliver"))


def _serial(ctx, v):
    return K.serial_order_violations(ctx.df("tx_begin"), ctx.df("tx_outcome"), ctx.df("tx_deliver"))


def _p9(ctx, v):
    return ctx.df("tx_end").where(F.col("outcome") != "committed").select("tx", "outcome", "reason")


_tx = lambda v, p9: v in K.TX_VARIANTS  # noqa: E731
_all = lambda v: True  # noqa: E731
CHECKS: list[Check] = [
    ("transactions.p1_order", "every broker processes a before b for every pair a <SO b (P1)", _tx, _all, _p1, "tx"),
    ("transactions.p2_routing", "op1 reaches only D, op2 and op5 only the assigned agent (P2)",
     lambda v, p9: True, _all, _p2, "tx"),
    ("transactions.p3_atomicity", "all or nothing: committed publications delivered once after the commit, aborted "
     "ones discarded (P3)", _tx, _all, _p3, "tx"),
    ("transactions.p3_expected", "every publication of a committed transaction reaches the clients it must reach "
     "(P3 on the expected recipients)", _tx, _all, _p3e, "tx"),
    ("transactions.p4_agreement", "one outcome per transaction at the TXC, the same at every broker and client that "
     "took part (P4)", lambda v, p9: True, _all, _p4, "tx"),
    ("transactions.p5_tables", "each broker's final PRT equals the replay of committed operations only (P5; for S-TX "
     "also P7, convergence)", _tx, _all, _p5, "node"),
    ("transactions.p6_commit_order", "every broker commits transactions in the same order, and (a conflict run) no "
     "committed publication reaches both the old and the new subscriber (P6, required for D-TX)",
     _tx, lambda v: v == "dtx", _p6, "tx"),
    ("transactions.p6_serial_order", "a conflict run's committed probe reaches the subscriber the TXC's commit order "
     "gives it (§3.3, required for D-TX)", _tx, lambda v: v == "dtx", _serial, "tx"),
    ("transactions.p9_no_aborts", "no transaction aborts (or, BL-WAIT, times out) in a run without explicit aborts or "
     "faults (P9)", lambda v, p9: p9, _all, _p9, "tx"),
]


def _unprefix(x: Any, run_id: str) -> Any:
    return x.replace(run_id + SEP, "") if isinstance(x, str) else x


def per_run(viol: DataFrame, col: str, n_examples: int = 3) -> dict[str, tuple[int, list[str]]]:
    """One Spark job: {run_id: (violations, up to n examples as JSON, ids without the run prefix)}."""
    rows = (viol.withColumn("_run", F.substring_index(F.col(col), SEP, 1))
            .groupBy("_run").agg(F.count("*").alias("n"),
                                 F.slice(F.collect_list(F.to_json(F.struct(*viol.columns))), 1, n_examples).alias("ex"))
            .collect())
    return {r["_run"]: (int(r["n"]), [_unprefix(e, r["_run"]) for e in r["ex"]]) for r in rows}


def check_runs(spark, run_dirs: dict[str, str], progress: Callable[[str], None] = lambda s: None
               ) -> dict[str, list[dict[str, Any]]]:
    """P1-P7 and P9 on every run of ``run_dirs`` ({key: run directory}), batched (module doc).

    -> {key: [{check, passed, violations, applies, required, examples, [finding]}]} in CHECKS order
    (``finding``: ``checks.no_recovery_finding``, BL-WAIT's P2 in a run with faults; still failed)."""
    from testbed.analysis.batch import ensure_ingested
    from testbed.analysis.session import tune_for_input

    ensure_ingested(spark, list(run_dirs.values()))
    # shuffle partitions, adaptive planning, codegen for the batch's whole input (a small one: one
    # partition, no re-planning; the session may still be tuned for the last run it ingested)
    tune_for_input(spark, sum(p.stat().st_size for d in run_dirs.values() for p in (Path(d) / "logs").glob("*.jsonl")))
    groups: dict[tuple[str, bool], list[str]] = {}
    for k, d in run_dirs.items():
        groups.setdefault(group_key(_plan(Path(d))), []).append(k)
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in run_dirs}
    for (v, p9), keys in sorted(groups.items()):
        dirs = [run_dirs[k] for k in keys]
        ids = {k: Path(run_dirs[k]).resolve().name for k in keys}
        ctx = BatchContext.over(spark, dirs)
        progress(f"transactions: checks on {len(keys)} {v} run(s) at once")
        for name, desc, applies, required, viol, col in CHECKS:
            if not applies(v, p9):
                for k in keys:
                    out[k].append({"check": name, "passed": True, "violations": 0, "applies": False,
                                   "required": False, "description": desc, "examples": []})
                continue
            found = per_run(viol(ctx, v), col)
            req = required(v)
            for k in keys:
                n, ex = found.get(ids[k], (0, []))
                finding = K.no_recovery_finding(v, _plan(Path(run_dirs[k])), name, n if req else 0)
                out[k].append({"check": name, "passed": n == 0 or not req, "violations": n if req else 0,
                               "applies": True, "required": req, "description": desc, "examples": ex,
                               **({} if req else {"reported": n}), **({"finding": finding} if finding else {})})
    return out
