"""The pub/sub core's checks over many runs at once: this protocol's batch part.

``no_duplicates``, ``filter_match``, ``fifo`` and ``completeness`` -- shared by every protocol
built on the core -- computed once over every run of a batch (:mod:`testbed.analysis.batch_checks`
runs it, for the runs whose protocol lists each check). Filters are evaluated once per distinct
text over every run's publications (publication ids carry their run), then joined to the
subscriptions of the same run. Each run's verdicts, counts and examples equal its analysis alone
(``tests/unit/analysis/test_batch_checks.py``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from testbed.analysis.batch_checks import BY, Batch, BatchPart, by_run, per_run
from testbed.analysis.checks import CheckResult
from testbed.analysis.context import AnalysisContext
from testbed.analysis.filters import match_pairs
from testbed.protocols.pubsub.analysis import checks as P

SEP = "\u0001"  # joins a run id and a publication id for the filter evaluation (never in a directory name)
PUBSUB = {P.check_no_duplicates: "no_duplicates", P.check_filter_match: "filter_match", P.check_fifo: "fifo",
          P.check_completeness: "completeness"}


def _resync_rows(batch: Batch, runs: list[str]) -> dict[str, list[tuple]]:
    """{run: ``pubsub.checks.resync_rows``} of the runs whose faults need them, read in one job per event."""
    out: dict[str, list[tuple]] = {r: [] for r in runs}
    if runs:
        for ev, peer in P.RESYNC_EVENTS:
            for r in batch.df(ev, runs).select("run_id", "node", peer, "t_rel_s").collect():
                out[r[0]].append((r[1], r[2], float(r[3])))
        for r in batch.df(P.APPLIED_EVENT, runs).select("run_id", "node", "peer", "t_rel_s", "wave", "fwd",
                                                        "full").collect():
            out[r[0]].append((r[1], r[2], float(r[3]), r[4], int(r[5] or 0), bool(r[6])))
    return out


def _route_columns(batch: Batch, ctxs: dict[str, AnalysisContext]):
    """(route, fault, fault_source): each row's route code and fault under its own run's routes and
    fault windows (``pubsub.checks.run_route_windows``); route None when no run has a window to
    attribute by route."""
    rows = _resync_rows(batch, sorted(rid for rid, c in ctxs.items() if P.needs_resync(c)))
    per = {rid: P.route_args(*P.run_route_windows(c, rows.get(rid, []))) for rid, c in sorted(ctxs.items())}
    route = None
    if any(r is not None for r, _ in per.values()):
        route = F.lit(None).cast("int")
        for rid, (r, _) in per.items():
            if r is not None:
                route = F.when(F.col("run_id") == F.lit(rid), r).otherwise(route)
    fault, source = F.lit(None).cast("int"), F.lit(None).cast("string")
    for rid, (_, wins) in per.items():
        if wins:
            f, s = P.route_fault_columns(F.col("pub_s"), F.col("route"), wins)
            hit = F.col("run_id") == F.lit(rid)
            fault, source = F.when(hit, f).otherwise(fault), F.when(hit, s).otherwise(source)
    return route, fault, source


def run_part(batch: Batch, runs_of: dict[str, list[str]]) -> None:
    """no_duplicates, filter_match and completeness from one :func:`pubsub.checks.judged_pairs`
    over every run (one tally job), fifo in one job; examples per run only where there are
    violations."""
    runs = sorted(set().union(*runs_of.values()))
    if not runs:
        return
    if runs_of["fifo"]:
        rs = runs_of["fifo"]
        # the exact inversions only of runs where the hashed ones say there may be some
        maybe = sorted(r["run_id"] for r in P.fifo_inversions(batch.df("deliver", rs), BY, hashed=True)
                       .select("run_id").distinct().collect())
        got = per_run(P.fifo_inversions(batch.df("deliver", maybe), BY), P.ORDERS["fifo"]) if maybe else {}
        for rid in rs:
            n, ex = got.get(rid, (0, []))
            batch.results[rid]["fifo"] = CheckResult("fifo", n == 0, n, examples=ex,
                                                    description=P.DESCRIPTIONS["fifo"])
    shared = [n for n in ("no_duplicates", "filter_match", "completeness") if runs_of[n]]
    if not shared:
        return
    runs = sorted(set().union(*(runs_of[n] for n in shared)))
    subs = P.subscriptions(batch.df("subscribe", runs), batch.df("unsubscribe", runs), BY).cache()
    # publications and matches are read once when every check passes (examples read them again):
    # not cached, which measured cheaper than building the cache
    pubs = P.publications(batch.df("publish", runs), BY)
    batch.cached.append(subs)
    texts: dict[str, set[str]] = {}
    for r in subs.select("run_id", "filter").distinct().collect():
        texts.setdefault(r["run_id"], set()).add(r["filter"] or "")
    # each distinct filter text evaluated once over every run's publications (ids carry their run)
    keyed = pubs.select(F.concat("run_id", F.lit(SEP), "pub_id").alias("pub_id"), "attrs", "pub_s")
    m, errors = match_pairs(batch.spark, sorted(set().union(*texts.values())) if texts else [], keyed,
                            keep=("pub_s",))
    matches = m.select(F.substring_index("pub_id", SEP, 1).alias("run_id"), "filter",
                       F.expr(f"substring(pub_id, length(substring_index(pub_id, '{SEP}', 1)) + 2)")
                       .alias("pub_id"), "pub_s")
    errs = {rid: {f: e for f, e in errors.items() if f in texts.get(rid, set())} for rid in runs}
    cs = {rid: batch.ctxs[rid] for rid in runs}
    opts = next(iter(cs.values())).options
    route, fault, source = _route_columns(batch, cs)
    kw = dict(settle_s=by_run({r: c.settle_s for r, c in cs.items()}), margin_s=opts.travel_margin_s,
              end_s=by_run({r: c.end_s for r, c in cs.items()}), by=BY, route=route)
    # counted on the hashed pairs; the exact ones read only for examples
    j = P.judged_pairs(batch.df("deliver", runs), subs, pubs, matches, **kw)
    j = j.withColumn("fault", fault)
    jh = P.judged_pairs(batch.df("deliver", runs), subs, pubs, matches, hashed=True, **kw)
    tally = {k[0]: v for k, v in P.pubsub_tally(jh, pubs, fault, source, BY, exact=j).items()}
    empty = {"dup": 0, "fm": 0, "unknown": 0, "expected": 0, "miss": {}}

    def examples(name: str, df: DataFrame, key: str) -> dict[str, list]:
        if not any(tally.get(r, empty)[key] for r in runs_of[name]):
            return {}
        return {r: ex for r, (_, ex) in per_run(df.where(F.col("run_id").isin(runs_of[name])),
                                                P.ORDERS[name]).items()}

    ex = examples("no_duplicates", P.duplicates_of(j, BY), "dup")
    for rid in runs_of["no_duplicates"]:
        n = tally.get(rid, empty)["dup"]
        batch.results[rid]["no_duplicates"] = CheckResult(
            "no_duplicates", n == 0, n, examples=ex.get(rid, []), description=P.DESCRIPTIONS["no_duplicates"])
    ex = examples("filter_match", P._judged_pairs(P.delivery_pairs(batch.df("deliver", runs), BY), subs, pubs,
                                                  matches, BY)
                  .where(F.col("_known") & ~F.col("_ok"))
                  .select("run_id", "client", "pub_id", "deliver_s", "filters"), "fm")
    for rid in runs_of["filter_match"]:
        t = tally.get(rid, empty)
        batch.results[rid]["filter_match"] = CheckResult(
            "filter_match", t["fm"] == 0 and not errs[rid], t["fm"], examples=ex.get(rid, []),
            description=P.DESCRIPTIONS["filter_match"],
            details={"unverifiable_deliveries": t["unknown"], "unparsable_filters": errs[rid]})
    unattributed = P.with_publisher(j.where(F.col("expected") & (F.col("deliveries") == 0)
                                            & F.col("fault").isNull()).select("run_id", "client", "pub_id", "pub_s"),
                                    pubs, BY)
    miss_un = {r: sum(n for (f, _), n in tally.get(r, empty)["miss"].items() if f is None) for r in runs}
    ex = ({r: e for r, (_, e) in per_run(unattributed, P.ORDERS["completeness"]).items()}
          if any(miss_un.values()) else {})
    for rid in runs_of["completeness"]:
        c = cs[rid]
        details, n_un, attributed = P.completeness_details(
            tally.get(rid, empty), errs[rid], settle_s=c.settle_s, travel_margin_s=c.options.travel_margin_s,
            fault_margin_s=c.options.fault_margin_s, end_s=c.end_s, windows=P.run_route_windows(c)[1])
        batch.shared[rid]["completeness"] = details
        batch.results[rid]["completeness"] = CheckResult(
            "completeness", n_un == 0 and not errs[rid], n_un, attributed=attributed,
            examples=ex.get(rid, []), description=P.DESCRIPTIONS["completeness"], details=details)


BATCH_PART = BatchPart("pub/sub checks", PUBSUB, run_part)
