"""The mobility history checks (P1-P9, ``checks.py``) over many runs at once: a few Spark jobs per
group of runs, with a verdict per run.

A quick reproduction is ~68 runs; analysing them one by one costs an ingest and dozens of Spark
jobs per run. Here the runs' events are read as one DataFrame per event type
(``analysis.batch.read_runs``: one scan over the runs' stored Parquet) and every id the checks join
on (client, node, move, publication, subscription, advertisement, publisher, broker, a routing
entry's owner, and the brokers of a move's path) is prefixed with the run's id (``<run_id>|``): the
runs' histories are disjoint, so the checks' own transforms (``deliveries_outside_started``,
``atomicity_violations``, ``tentative_violations``, ...) run unchanged over all of them and each
violation row names its run (the prefix of its client, node or move).

What is not a pure function of the namespaced events is done per run, from each run's own plan and
manifest (an :class:`AnalysisContext` without events):

* P4's content matching (``filters.match_pairs``) pairs publications with filter *texts*, which
  would pair runs with each other: the publications are matched against every filter text once,
  then each matched pair's filter is prefixed with its publication's run, and a subscription's
  with its client's run, so a subscription only meets publications of its own run. The settle
  time and the workload's end (``expected_deliveries``) are per-run values (literal maps keyed by
  run), and so are the fault windows (joined on the run as well as the time).
* The covering moves cut by a fault, and the clients lost with a crashed broker, are decided per
  run in Python from the run's fault windows (as ``checks.py`` does), on rows collected once.
* P9 (routing consistency) is plain Python on the small end-of-run tables in ``checks.py`` too:
  the tables of every run are collected once and checked run by run.

A check's violations and attributed rows of all runs are counted in one job (``_tally``). The runs
are grouped by what changes a check's rule: the movement (reconfiguration | covering).
``tests/unit/mobility/test_batch.py`` shows the verdicts, counts and attributions equal the per-run
checks' on real histories, clean and broken.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.batch import prefix_ids
from testbed.analysis.context import AnalysisContext, AnalysisOptions
from testbed.analysis.filters import match_pairs
from testbed.protocols.mobility.analysis import checks as K
from testbed.protocols.pubsub.analysis.checks import (
    duplicate_deliveries,
    fifo_inversions,
    missing_deliveries,
    publications,
)

SEP = "|"
KEYS = ("client", "node", "mid", "pub_id", "sub_id", "adv_id", "publisher", "broker", "owner", "src", "dst")
N_EXAMPLES = 3
# event types read by several checks: namespaced once, kept in memory for the group's checks
CACHED = ("deliver", "client_state", "move_begin", "move_end", "node_start")

# the descriptions (the per-run checks' own words, shortened)
DESCRIPTIONS = {
    "P1_one_running_instance": "a mobile client's deliveries happen only at a started copy; the source stops "
                               "before sending (4), the target starts after receiving it",
    "P2_move_atomicity": "each move ends once; commit => source clean and target started; abort => target never "
                         "started; one started copy per client at the end (crashes / covering faults attributed)",
    "P3_exactly_once": "no client receives a publication twice, across its copies",
    "P4_completeness": "every matching publication is delivered to the client (either copy); covering: misses in "
                       "the client's own move windows are attributed to the move",
    "P5_others_unaffected": "clients that never move miss nothing and receive nothing twice",
    "P6_fifo": "per-publisher FIFO at every client, movers across their moves too (reconfiguration keeps it; "
               "covering: movers informational)",
    "P7_routing_isolation": "every routing change of a move touches the mover's entries at a broker on its path "
                            "(covering: only changes tagged with an unknown move)",
    "P8_routing_atomicity": "a committed move prepared and committed at every path broker, an aborted one rolled "
                            "back; no tentative entry remains at the end (crashes attributed)",
    "P9_routing_consistency": "at the end every broker on the path from an advertisement to an intersecting "
                              "subscription routes it toward the subscriber, and every broker routes the "
                              "advertisement toward the publisher",
}
NAMES = list(DESCRIPTIONS)


def run_of(col: str | Any) -> Any:
    """The run id of a namespaced id column (the part before the first ``|``)."""
    return F.substring_index(F.col(col) if isinstance(col, str) else col, SEP, 1)


def namespaced(df: DataFrame) -> DataFrame:
    """``read_runs`` rows with every id column (and a move's ``path``) prefixed by ``<run_id>|``
    (null / empty ids kept as they are)."""
    run = F.col("run_id")
    df = prefix_ids(df, KEYS, SEP)
    if "path" in df.columns:
        df = df.withColumn("path", F.transform("path", lambda x: F.concat(run, F.lit(SEP), x)))
    return df


class BatchContext(AnalysisContext):
    """An AnalysisContext over many runs' namespaced events; ``runs`` = {run_id: that run's own
    AnalysisContext without events (plan, manifest, fault windows, settle, end)}."""

    run_dirs: list[str]
    runs: dict[str, AnalysisContext]

    @classmethod
    def over(cls, spark, run_dirs: list[str], options: AnalysisOptions) -> "BatchContext":
        runs = {Path(d).resolve().name: run_context(spark, d, options) for d in run_dirs}
        first = next(iter(runs.values()))
        ctx = cls(spark, first.run_dir, first.plan, first.manifest, {}, options, [])
        ctx.run_dirs, ctx.runs = list(run_dirs), runs
        return ctx

    def df(self, ev: str) -> DataFrame:
        if ev not in self.events:
            from testbed.analysis.batch import read_runs

            df = namespaced(read_runs(self.spark, self.run_dirs, ev)).drop("run_id")
            self.events[ev] = df.cache() if ev in CACHED else df
        return self.events[ev]

    def release(self) -> None:
        super().release()
        for df in self.events.values():
            if df.is_cached:
                df.unpersist()

    def raw(self, ev: str) -> DataFrame:
        """Event type ``ev`` of the group's runs as stored, with ``run_id`` (ids not prefixed)."""
        from testbed.analysis.batch import read_runs

        return read_runs(self.spark, self.run_dirs, ev)

    def by_run(self, values: dict[str, float], col: Any, cast: str = "double") -> Any:
        """A per-run value as a column: ``values[run_of(col)]``."""
        parts = [x for k, v in sorted(values.items()) for x in (F.lit(k), F.lit(v))]
        return F.create_map(*parts)[run_of(col)].cast(cast)


def run_context(spark, run_dir: str | Path, options: AnalysisOptions) -> AnalysisContext:
    d = Path(run_dir)
    man = d / "manifest.json"
    return AnalysisContext.build(spark, d, json.loads((d / "plan.json").read_text()),
                                 json.loads(man.read_text()) if man.exists() else {}, {}, options)


# -- tallies --------------------------------------------------------------------------------
def _rows(df: DataFrame, run_col: str, kind: str) -> DataFrame:
    """[_run, _kind, _ex] of a violation (``kind`` "v") or attributed ("a") DataFrame."""
    return df.select(run_of(run_col).alias("_run"), F.lit(kind).alias("_kind"),
                     F.to_json(F.struct(*[F.col(c) for c in df.columns])).alias("_ex"))


def _tally(parts: list[tuple[DataFrame, str, str]]) -> dict[str, dict[str, tuple[int, list[str]]]]:
    """One Spark job: {run: {kind: (rows, up to N_EXAMPLES examples)}} over (df, run column, kind)."""
    u = None
    for df, col, kind in parts:
        r = _rows(df, col, kind)
        u = r if u is None else u.unionByName(r)
    out: dict[str, dict[str, tuple[int, list[str]]]] = {}
    for r in (u.groupBy("_run", "_kind")
              .agg(F.count("*").alias("n"), F.slice(F.collect_list("_ex"), 1, N_EXAMPLES).alias("ex")).collect()):
        out.setdefault(r["_run"], {})[r["_kind"]] = (int(r["n"]), [_unprefix(e, r["_run"]) for e in r["ex"]])
    return out


def _unprefix(x: Any, run_id: str) -> Any:
    return x.replace(run_id + SEP, "") if isinstance(x, str) else x


Verdicts = dict[str, dict[str, Any]]  # run -> {passed, violations, attributed, examples, ...}


def _verdicts(ctx: BatchContext, t: dict[str, dict[str, tuple[int, list[str]]]]) -> Verdicts:
    out = {}
    for rid in ctx.runs:
        n, ex = t.get(rid, {}).get("v", (0, []))
        a = t.get(rid, {}).get("a", (0, []))[0]
        out[rid] = {"passed": n == 0, "violations": n, "attributed": a, "examples": ex}
    return out


# -- the checks, batched ------------------------------------------------------------------------
def p1(ctx: BatchContext) -> Verdicts:
    cs = ctx.df("client_state")
    mobile = cs.select("client").distinct()
    d = ctx.df("deliver").join(mobile, on="client", how="left_semi")
    return _verdicts(ctx, _tally([(K.deliveries_outside_started(cs, d), "node", "v"),
                                  (K.transfer_order_violations(cs, ctx.df("move_step")), "node", "v")]))


def _cut_by_faults(ctx: BatchContext, moves: DataFrame) -> DataFrame:
    """``checks.moves_cut_by_faults`` run by run (each run's own fault windows), on the moves without
    an end collected once (only when some run has a lossy fault window)."""
    wins: dict[str, list] = {}
    for rid, rc in ctx.runs.items():
        for w in rc.windows:
            if w.attributable and set(w.ops) & set(K.LOSSY_OPS):
                lo, hi = w.attribution_window(ctx.options.fault_margin_s)
                wins.setdefault(rid, []).append((w.fault, float(lo), float(hi), set(w.targets), "cut" in w.ops))
    rows = []
    if wins:
        for r in moves.where((F.col("ends") == 0) & F.col("begin_s").isNotNull()) \
                .select("mid", "client", "begin_s", "path").collect():
            rid = r["mid"].split(SEP, 1)[0]
            path = {p.split(SEP, 1)[1] for p in (r["path"] or [])}
            for fault, lo, hi, targets, link in wins.get(rid, []):
                on_path = (targets <= path) if link else bool(targets & path)
                if lo <= r["begin_s"] <= hi and (not targets or on_path):
                    rows.append((r["mid"], r["client"], fault))
                    break
    return ctx.spark.createDataFrame(rows, "mid string, client string, fault int")


def p2(ctx: BatchContext, movement: str) -> Verdicts:
    moves = K._moves(ctx)
    cs = ctx.df("client_state")
    crashed = K.crashed_moves(moves, ctx.df("node_start"), ctx.df("node_stop"))
    covering = movement == "covering"
    by_fault = _cut_by_faults(ctx, moves).join(crashed, on="mid", how="left_anti").cache() if covering else None
    excused = crashed if by_fault is None else crashed.unionByName(by_fault.select("mid"))
    excused = excused.distinct()
    v_all = K.atomicity_violations(moves, cs).cache()
    parts = [(v_all.join(excused, on="mid", how="left_anti"), "mid", "v"),
             (v_all.join(crashed, on="mid", how="left_semi"), "mid", "a")]
    if by_fault is not None:
        parts.append((v_all.join(by_fault.select("mid"), on="mid", how="left_semi"), "mid", "a"))
    bad_ends = K.started_copies_at_end(cs, ctx.df("node_start")).cache()
    lost = bad_ends.where((F.col("started") == 0) & (F.col("crashed") > 0))
    ends = bad_ends.join(lost.select("client"), on="client", how="left_anti")
    parts.append((lost, "client", "a"))
    if by_fault is not None:
        w = Window.partitionBy("client").orderBy(F.col("begin_s").desc())
        last = moves.withColumn("r", F.row_number().over(w)).where(F.col("r") == 1).select("client", "mid")
        gone = ends.where(F.col("started") == 0).join(last, on="client").join(by_fault.select("mid"), on="mid",
                                                                                how="left_semi")
        parts.append((gone.drop("mid"), "client", "a"))
        ends = ends.join(gone.select("client"), on="client", how="left_anti")
    parts.append((ends.withColumn("nodes", F.concat_ws(",", "nodes")), "client", "v"))
    return _verdicts(ctx, _tally(parts))


def p3(ctx: BatchContext) -> Verdicts:
    return _verdicts(ctx, _tally([(duplicate_deliveries(ctx.df("deliver")), "client", "v")]))


def _attribute(ctx: BatchContext, missing: DataFrame) -> DataFrame:
    """``checks._attribute`` run by run (each run's own routes and windows), on the (client,
    publisher) pairs, copies and re-syncs collected once (namespaced ids split by run)."""
    from testbed.protocols.pubsub.analysis.checks import APPLIED_EVENT, RESYNC_EVENTS, needs_resync

    missing = missing.cache()
    pairs: dict[str, list[tuple[str, str]]] = {}
    for r in missing.select("client", "publisher").distinct().collect():
        rid, c = r[0].split(SEP, 1)
        pairs.setdefault(rid, []).append((c, (r[1] or "").split(SEP, 1)[-1]))
    copies: dict[str, list[tuple[str, str]]] = {}
    for r in ctx.df("client_state").select("client", "node").distinct().collect():
        rid, c = r[0].split(SEP, 1)
        copies.setdefault(rid, []).append((c, r[1].split(SEP, 1)[1]))
    resync: dict[str, list[tuple]] = {}
    if any(needs_resync(rc) for rc in ctx.runs.values()):
        for ev, peer in RESYNC_EVENTS:
            for r in ctx.df(ev).select("node", peer, "t_rel_s").collect():
                rid, node = r[0].split(SEP, 1)
                resync.setdefault(rid, []).append((node, (r[1] or "").split(SEP, 1)[-1], float(r[2])))
        for r in ctx.df(APPLIED_EVENT).select("node", "peer", "t_rel_s", "wave", "fwd", "full").collect():
            rid, node = r[0].split(SEP, 1)
            resync.setdefault(rid, []).append((node, (r[1] or "").split(SEP, 1)[-1], float(r[2]),
                                               (r[3] or "").split(SEP, 1)[-1], int(r[4] or 0), bool(r[5])))
    rrows, wrows = [], []
    for rid, rc in ctx.runs.items():
        rr, wr = K.route_tables(rc, copies.get(rid, []), resync.get(rid, []), pairs.get(rid, []))
        rrows += [(f"{rid}{SEP}{c}", f"{rid}{SEP}{p}", codes) for c, p, codes in rr]
        wrows += [(rid, *w) for w in wr]
    return K.attribute_by_route(missing, ctx.spark.createDataFrame(rrows, K.ROUTE_OF),
                                ctx.spark.createDataFrame(wrows, "_wrun string, " + K.ROUTE_WINDOWS),
                                run=run_of("client"))


def _dead_clients(ctx: BatchContext) -> DataFrame:
    """``checks._dead_clients`` run by run: [client, fault, lo, hi, why] (namespaced client)."""
    crashes: dict[str, list] = {}
    for rid, rc in ctx.runs.items():
        for w in rc.windows:
            if w.attributable and "crash" in w.ops:
                crashes.setdefault(rid, []).append((w.fault, w.attribution_window(ctx.options.fault_margin_s)[0],
                                                    set(w.targets)))
    rows = []
    if crashes:
        for r in K.dead_copies(ctx.df("client_state"), ctx.df("node_start")).collect():
            rid, node = r["node"].split(SEP, 1)
            hit = next(((f, lo) for f, lo, t in crashes.get(rid, []) if node in t), None)
            if hit is not None:
                rows.append((r["client"], hit[0], float(hit[1]), None, K.LOST_WITH_BROKER))
        by_run: dict[str, list] = {}
        for r in ctx.df("move_step").where(F.col("step") == "xfer_adopt").select("node", "client", "t_rel_s").collect():
            rid, node = r["node"].split(SEP, 1)
            by_run.setdefault(rid, []).append((node, r["client"], r["t_rel_s"]))
        for rid, adopts in by_run.items():
            rows += K.adopted_rows(adopts, crashes.get(rid, []), ctx.options.fault_margin_s)
    return ctx.spark.createDataFrame(rows, K.DEAD_CLIENTS)


def _missing(ctx: BatchContext) -> tuple[DataFrame, dict[str, dict[str, str]]]:
    """``checks._missing`` over the group: (missing [client, pub_id, publisher, pub_s, fault,
    fault_source, mid], {run: unparsable filters})."""
    key = "mobility.batch.missing"
    if key not in ctx.results:
        subs = K.client_subscriptions(ctx.df("subscribe"), ctx.df("unsubscribe"), ctx.df("client_state")).cache()
        pubs = publications(ctx.df("publish")).cache()
        matches, errors = match_pairs(ctx.spark, subs, pubs)
        bad: dict[str, dict[str, str]] = {}
        if errors:
            for r in subs.where(F.col("filter").isin(list(errors))).select(run_of("client").alias("r"), "filter") \
                    .distinct().collect():
                bad.setdefault(r["r"], {})[r["filter"]] = errors[r["filter"]]
        # a subscription meets only the publications of its own run: the filter text, prefixed by the run
        matches = matches.select(F.concat(run_of("pub_id"), F.lit(SEP), F.col("filter")).alias("filter"), "pub_id")
        subs_n = subs.withColumn("filter", F.concat(run_of("client"), F.lit(SEP), F.col("filter")))
        margin = ctx.options.travel_margin_s
        end = ctx.by_run({rid: K.publications_end_s(rc) for rid, rc in ctx.runs.items()}, "pub_id")
        settle = ctx.by_run({rid: rc.settle_s for rid, rc in ctx.runs.items()}, "client")
        p = pubs.select("pub_id", "publisher", "pub_s").where(F.col("pub_s") + F.lit(margin) <= end)
        expected = (
            subs_n.select("client", "filter", "sub_s", "unsub_s")
            .join(matches, on="filter", how="inner")
            .join(p, on="pub_id", how="inner")
            .where((F.col("sub_s") + settle <= F.col("pub_s"))
                   & (F.col("unsub_s").isNull() | (F.col("unsub_s") >= F.col("pub_s") + F.lit(margin))))
            .select("client", "pub_id", "publisher", "pub_s")
            .distinct()
        )
        # each run's own move margin (its longest in-flight time, checks.inflight)
        margins = {r["_by0"]: K.move_margin_s(r["inflight_s"])
                   for r in K.inflight(ctx.df("deliver"), pubs, (run_of("pub_id"),)).collect()}
        margins.update({rid: K.MOVE_MARGIN_S for rid in ctx.runs if rid not in margins})  # no delivery
        ctx.results["mobility.batch.move_margin_s"] = margins
        missing = K.attribute_to_moves(
            K.attribute_to_dead_clients(
                _attribute(ctx, missing_deliveries(expected, ctx.df("deliver"))),
                _dead_clients(ctx)),
            K._moves(ctx), ctx.by_run(margins, "client")).cache()
        ctx.results[key] = (missing, bad)
    return ctx.results[key]


def p4(ctx: BatchContext, movement: str) -> Verdicts:
    missing, bad = _missing(ctx)
    unattributed = missing.where(F.col("fault").isNull())
    parts = [(missing.where(F.col("fault").isNotNull()), "client", "a")]
    if movement == "covering":
        parts += [(unattributed.where(F.col("mid").isNull()), "client", "v"),
                  (unattributed.where(F.col("mid").isNotNull()), "client", "a")]
    else:
        parts.append((unattributed, "client", "v"))
    out = _verdicts(ctx, _tally(parts))
    for rid, m in ctx.results["mobility.batch.move_margin_s"].items():
        out[rid]["move_margin_s"] = round(m, 3)
    for rid, errs in bad.items():
        out[rid]["passed"] = False
        out[rid]["unparsable_filters"] = errs
    return out


def p5(ctx: BatchContext) -> Verdicts:
    missing, _ = _missing(ctx)
    movers = ctx.df("move_begin").select("client").distinct()
    lost = missing.join(movers, on="client", how="left_anti").where(F.col("fault").isNull()) \
        .select("client", "pub_id", F.col("pub_s").alias("t_s"), F.lit("missed").alias("what"))
    dup = duplicate_deliveries(ctx.df("deliver")).join(movers, on="client", how="left_anti") \
        .select("client", "pub_id", F.col("first_s").alias("t_s"), F.lit("duplicate").alias("what"))
    return _verdicts(ctx, _tally([(lost.unionByName(dup), "client", "v")]))


def p6(ctx: BatchContext, movement: str) -> Verdicts:
    inv = fifo_inversions(ctx.df("deliver"))
    if movement != "reconfiguration":  # covering: movers informational
        inv = inv.join(ctx.df("move_begin").select("client").distinct(), on="client", how="left_anti")
    return _verdicts(ctx, _tally([(inv, "client", "v")]))


def p7(ctx: BatchContext, movement: str) -> Verdicts:
    v = K.isolation_violations(ctx.df("rt_change"), K._moves(ctx))
    if movement == "covering":
        v = v.where(F.col("what") == "unknown move")
    return _verdicts(ctx, _tally([(v, "node", "v")]))


def p8(ctx: BatchContext, movement: str) -> Verdicts:
    moves = K._moves(ctx)
    left = (
        ctx.df("rt_dump")
        .select("node", F.explode(F.from_json("tentative", "array<array<string>>")).alias("e"))
        .select(F.concat(run_of("node"), F.lit(SEP), F.col("e")[0]).alias("mid"), "node",
                F.concat(F.lit("tentative entry left: "), F.concat_ws(" ", "e")).alias("what"))
    )
    parts = []
    if movement == "reconfiguration":
        v = K.tentative_violations(ctx.df("rt_change"), moves, ctx.df("node_start")).cache()
        parts.append((v.where(F.col("by_crash")).drop("by_crash"), "node", "a"))
        left = v.where(~F.col("by_crash")).drop("by_crash").unionByName(left)
    crashed = K.crashed_moves(moves, ctx.df("node_start"), ctx.df("node_stop"))
    parts += [(left.join(crashed, on="mid", how="left_semi"), "node", "a"),
              (left.join(crashed, on="mid", how="left_anti"), "node", "v")]
    return _verdicts(ctx, _tally(parts))


def p9(ctx: BatchContext) -> Verdicts:
    """``checks.check_routing_consistency`` run by run on the end-of-run tables, collected once."""
    dumps: dict[str, dict[str, dict[str, Any]]] = {}
    for r in ctx.raw("rt_dump").orderBy("run_id", "m").select("run_id", "node", "prt", "srt").collect():
        dumps.setdefault(r["run_id"], {})[r["node"]] = {"prt": json.loads(r["prt"] or "[]"),
                                                        "srt": json.loads(r["srt"] or "[]")}
    advs: dict[str, list] = {}
    for r in ctx.raw("advertise").select("run_id", "adv_id", "filter", "broker").distinct().collect():
        advs.setdefault(r["run_id"], []).append((r["adv_id"], r["filter"], r["broker"]))
    unsub = {(r["run_id"], r["sub_id"]) for r in ctx.raw("unsubscribe").select("run_id", "sub_id").collect()}
    cs = ctx.raw("client_state")
    w = Window.partitionBy("run_id", "client", "node").orderBy(F.col("m").desc())
    restarts = ctx.raw("node_start").where(F.col("restarted")).groupBy("run_id", "node") \
        .agg(F.max("t").alias("t_restart"))
    last = (cs.withColumn("r", F.row_number().over(w)).where((F.col("r") == 1) & (F.col("state") == "started"))
            .join(restarts, on=["run_id", "node"], how="left")
            .withColumn("dead", F.col("t_restart").isNotNull() & (F.col("t_restart") > F.col("t")))
            .select("run_id", "client", "node", "dead").collect())
    mobile = {(r["run_id"], r["client"]) for r in cs.select("run_id", "client").distinct().collect()}
    subscribe: dict[str, list] = {}
    for r in ctx.raw("subscribe").select("run_id", "sub_id", "client", "filter", "broker").distinct().collect():
        subscribe.setdefault(r["run_id"], []).append(r)
    out: Verdicts = {}
    for rid, rc in ctx.runs.items():
        plan = rc.plan
        neighbors = {n: list(v.get("neighbors") or []) for n, v in (plan.get("nodes") or {}).items()
                     if v.get("kind") == "node"}
        here = {(r["client"], r["node"]) for r in last if r["run_id"] == rid and not r["dead"]}
        dead = sorted({r["client"] for r in last if r["run_id"] == rid and r["dead"]} - {c for c, _ in here})
        subs = []
        for r in subscribe.get(rid, []):
            if (rid, r["sub_id"]) in unsub:
                continue
            if (rid, r["client"]) in mobile:
                subs += [(r["sub_id"], c, r["filter"], node) for (c, node) in here if c == r["client"]]
            else:
                subs.append((r["sub_id"], r["client"], r["filter"], r["broker"]))
        if not dumps.get(rid):
            out[rid] = {"passed": False, "violations": 1, "attributed": 0,
                        "examples": [json.dumps({"what": "no rt_dump events"})]}
            continue
        covering = str((plan.get("params") or {}).get("covering") or "off")
        v, counts = K.consistency_violations(dumps[rid], advs.get(rid, []), subs, neighbors, covering)
        out[rid] = {"passed": not v, "violations": len(v), "attributed": len(dead),
                    "examples": [json.dumps(x, default=str) for x in v[:N_EXAMPLES]],
                    "pairs": counts["pairs"]}
    return out


def _group_checks(movement: str) -> list[tuple[str, Callable[[BatchContext], Verdicts]]]:
    return [
        ("P1_one_running_instance", p1),
        ("P2_move_atomicity", lambda c: p2(c, movement)),
        ("P3_exactly_once", p3),
        ("P4_completeness", lambda c: p4(c, movement)),
        ("P5_others_unaffected", p5),
        ("P6_fifo", lambda c: p6(c, movement)),
        ("P7_routing_isolation", lambda c: p7(c, movement)),
        ("P8_routing_atomicity", lambda c: p8(c, movement)),
        ("P9_routing_consistency", p9),
    ]


def check_runs(spark, run_dirs: dict[str, str], progress: Callable[[str], None] = lambda s: None,
               options: AnalysisOptions | None = None) -> dict[str, list[dict[str, Any]]]:
    """P1-P9 on every run of ``run_dirs`` ({key: run directory}), batched (module doc).

    -> {key: [{check, passed, violations, attributed, description, examples}]} in P1..P9 order."""
    from testbed.analysis.batch import ensure_ingested
    from testbed.analysis.session import tune_for_input

    options = options or AnalysisOptions()
    ensure_ingested(spark, list(run_dirs.values()))
    tune_for_input(spark, sum(p.stat().st_size for d in run_dirs.values() for p in (Path(d) / "logs").glob("*.jsonl")))
    groups: dict[str, list[str]] = {}
    for k, d in run_dirs.items():
        plan = json.loads((Path(d) / "plan.json").read_text())
        groups.setdefault(str((plan.get("params") or {}).get("movement", "reconfiguration")), []).append(k)
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in run_dirs}
    for movement, keys in sorted(groups.items()):
        ctx = BatchContext.over(spark, [run_dirs[k] for k in keys], options)
        ids = {k: Path(run_dirs[k]).resolve().name for k in keys}
        progress(f"mobility: checks P1-P9 on {len(keys)} {movement} run(s) at once")
        # a run none of whose events were read would pass every check: fail it instead
        seen = {r[0] for r in ctx.df("node_start").select(run_of("node")).distinct().collect()}
        unread = {k for k in keys if ids[k] not in seen}
        for name, fn in _group_checks(movement):
            t = time.monotonic()
            found = fn(ctx)
            progress(f"mobility: {name} on {len(keys)} {movement} run(s): {time.monotonic() - t:.1f} s")
            for k in keys:
                r = found.get(ids[k]) or {"passed": True, "violations": 0, "attributed": 0, "examples": []}
                if k in unread:
                    r = {"passed": False, "violations": 1, "attributed": 0,
                         "examples": [f"no events of run {ids[k]} were read (no node_start)"]}
                out[k].append({"check": name, "description": DESCRIPTIONS[name], **r})
        ctx.release()
    return out
