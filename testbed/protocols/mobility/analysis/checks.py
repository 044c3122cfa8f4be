"""History checks of the mobility protocol: the spec's predicates P1-P9 (docs/mobility.md).

Transforms are DataFrame -> DataFrame (``select`` at entry and exit); the ``check_*``
functions wrap them into :class:`CheckResult`. Times are ``t_rel_s``; order within a node
is its monotonic clock ``m``; across nodes the checks use only causal pairs (the source's
stop before its send of (4), the target's receipt of (4) before its start).

* P1 one_running_instance  deliveries of a client on a node only while that node's copy is
                           started; stopped before (4) is sent, started after (4) arrived
* P2 move_atomicity        one move_end per move_begin; commit => source clean and target
                           started; abort/reject => target never started; one started copy
                           per client at the end (crashed clients attributed; covering: moves
                           cut by a fault on their path attributed to it)
* P3 exactly_once          no client receives a publication twice (any node)
* P4 completeness          every expected (client, publication) delivered; a mobile client's
                           subscription counts from its first subscribe (moves do not end it).
                           Reconfiguration: every miss is a violation unless a fault explains it
                           (a client lost with its broker: every miss from the crash on);
                           covering: misses inside the client's own move windows are attributed
* P5 others_unaffected     clients that never move: no duplicate, no miss (faults aside)
* P6 fifo                  per (client, publisher) order; violations for every client under
                           reconfiguration (it keeps FIFO across a move), informational for
                           movers under covering
* P7 routing_isolation     every rt_change of a move is on the mover's entries at a broker on
                           its path (reconfiguration); covering counts changes to other clients'
                           entries (``others_changes``; the mover's own off-path ones apart)
* P8 routing_atomicity     a committed move prepared and committed at every path broker; an
                           aborted one rolled back every prepare; no tentative entry at the end
                           (per incarnation: what died with a crashed broker is attributed)
* P9 routing_consistency   at the end, for every advertisement A at P and intersecting
                           subscription S at Q, every broker on path(P, Q) routes S toward Q,
                           and every broker has A toward P (section 3.5 (i), (ii))
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.checks import CheckResult, summarize, tally
from testbed.protocols.pubsub.analysis.checks import (
    duplicate_deliveries,
    expected_deliveries,
    fifo_inversions,
    missing_deliveries,
    publications,
    subscriptions,
)
from testbed.analysis.context import AnalysisContext
from testbed.analysis.filters import match_pairs
from testbed.analysis.filters import parse as parse_filter

MOVE_MARGIN_S = 0.5  # a move window is [begin - margin, end + margin] (publications in flight)
# ... at least: the margin is the larger of MOVE_MARGIN_S and the run's longest measured in-flight
# time (delivery - publication over every delivery of the run): under congestion (brokers with a
# service time, docs/mobility.md) a publication is in flight far longer than 0.5 s. The longest,
# not a quantile: with the p99 a wide-area run kept 1 miss published 0.688 s before its client's
# move began and delivered 0.693 s after publication, 5 ms after the copy stopped (p99 0.621 s)


def _movement(ctx: AnalysisContext) -> str:
    return str((ctx.plan.get("params") or {}).get("movement", "reconfiguration"))


# -- transforms ------------------------------------------------------------------------
def deliveries_outside_started(client_state: DataFrame, deliver: DataFrame) -> DataFrame:
    """-> [client, node, pub_id, deliver_s, state]: deliveries on a node whose last client_state
    for that client before them (by ``m``) is not ``started`` (null: no copy ever there)."""
    st = client_state.select("client", "node", "m", F.col("state"), F.lit(None).cast("string").alias("pub_id"),
                             F.lit(0).alias("o"), "t_rel_s")
    dv = deliver.select("client", "node", "m", F.lit(None).cast("string").alias("state"), "pub_id",
                        F.lit(1).alias("o"), "t_rel_s")
    w = Window.partitionBy("client", "node").orderBy("m", "o").rowsBetween(Window.unboundedPreceding, 0)
    return (
        st.unionByName(dv)
        .withColumn("cur", F.last("state", ignorenulls=True).over(w))
        .where((F.col("o") == 1) & (F.col("cur").isNull() | (F.col("cur") != "started")))
        .select("client", "node", "pub_id", F.col("t_rel_s").alias("deliver_s"), F.col("cur").alias("state"))
    )


def transfer_order_violations(client_state: DataFrame, move_step: DataFrame) -> DataFrame:
    """-> [mid, node, what]: the source's ``stopped`` not before its ``xfer_sent``, or the target's
    ``started`` not after its ``xfer_recv`` (same node, monotonic clock)."""
    stopped = client_state.where((F.col("copy") == "src") & (F.col("state") == "stopped")) \
        .select("mid", "node", F.col("m").alias("m_state"))
    started = client_state.where((F.col("copy") == "tgt") & (F.col("state") == "started")) \
        .select("mid", "node", F.col("m").alias("m_state"))
    sent = move_step.where(F.col("step") == "xfer_sent").select("mid", "node", F.col("m").alias("m_step"))
    recv = move_step.where(F.col("step") == "xfer_recv").select("mid", "node", F.col("m").alias("m_step"))
    a = sent.join(stopped, on=["mid", "node"], how="left") \
        .where(F.col("m_state").isNull() | (F.col("m_state") > F.col("m_step"))) \
        .select("mid", "node", F.lit("source did not stop before sending (4)").alias("what"))
    b = recv.join(started, on=["mid", "node"], how="left") \
        .where(F.col("m_state").isNotNull() & (F.col("m_state") < F.col("m_step"))) \
        .select("mid", "node", F.lit("target started before receiving (4)").alias("what"))
    return a.unionByName(b).select("mid", "node", "what")


def move_outcomes(move_begin: DataFrame, move_end: DataFrame) -> DataFrame:
    """-> [mid, client, src, dst, path, begin_s, end_s, outcome, ends]: one row per begun or ended move."""
    b = move_begin.select("mid", "client", "src", "dst", "path", F.col("t_rel_s").alias("begin_s"))
    e = (move_end.groupBy("mid").agg(F.count("*").alias("ends"), F.min("t_rel_s").alias("end_s"),
                                     F.first("outcome").alias("outcome"), F.first("client").alias("e_client")))
    return (
        b.join(e, on="mid", how="full")
        .select("mid", F.coalesce("client", "e_client").alias("client"), "src", "dst", "path", "begin_s",
                "end_s", "outcome", F.coalesce("ends", F.lit(0)).alias("ends"))
    )


def atomicity_violations(moves: DataFrame, client_state: DataFrame) -> DataFrame:
    """-> [mid, client, what]: a move without exactly one end (or an end without a begin), a commit
    whose source is not clean or target not started, an abort/reject whose target started."""
    st = client_state.groupBy("mid").agg(
        F.max(F.when((F.col("copy") == "src") & (F.col("state") == "clean"), 1).otherwise(0)).alias("src_clean"),
        F.max(F.when((F.col("copy") == "tgt") & (F.col("state") == "started"), 1).otherwise(0)).alias("tgt_started"),
    )
    m = moves.join(st, on="mid", how="left").fillna(0, ["src_clean", "tgt_started"])
    what = (
        F.when(F.col("begin_s").isNull(), F.lit("move_end without move_begin"))
        .when(F.col("ends") != 1, F.concat(F.lit("move_begin with "), F.col("ends").cast("string"),
                                           F.lit(" move_end")))
        .when((F.col("outcome") == "commit") & (F.col("src_clean") == 0), F.lit("commit but the source copy is not clean"))
        .when((F.col("outcome") == "commit") & (F.col("tgt_started") == 0), F.lit("commit but the target copy never started"))
        .when((F.col("outcome") != "commit") & (F.col("tgt_started") == 1), F.lit("abort/reject but the target copy started"))
    )
    return m.withColumn("what", what).where(F.col("what").isNotNull()).select("mid", "client", "what")


def started_copies_at_end(client_state: DataFrame, node_start: DataFrame) -> DataFrame:
    """-> [client, started, crashed, nodes]: clients whose number of started copies at the end is
    not 1. A copy whose node restarted after its last state died in the crash (``crashed`` counts
    those: a client with no started copy and a crashed one was lost to the crash, section 4.1)."""
    restarts = node_start.where(F.col("restarted")).groupBy("node").agg(F.max("t").alias("t_restart"))
    w = Window.partitionBy("client", "node").orderBy(F.col("m").desc())
    last = (
        client_state.withColumn("r", F.row_number().over(w)).where(F.col("r") == 1)
        .join(restarts, on="node", how="left")
        .withColumn("dead", F.col("t_restart").isNotNull() & (F.col("t_restart") > F.col("t")))
    )
    live = (F.col("state") == "started") & ~F.col("dead")
    return (
        last.groupBy("client")
        .agg(F.sum(F.when(live, 1).otherwise(0)).alias("started"),
             F.sum(F.when((F.col("state") == "started") & F.col("dead"), 1).otherwise(0)).alias("crashed"),
             F.sort_array(F.collect_list(F.when(live, F.col("node")))).alias("nodes"))
        .where(F.col("started") != 1)
        .select("client", "started", "crashed", "nodes")
    )


def crashed_moves(moves: DataFrame, node_start: DataFrame, node_stop: DataFrame) -> DataFrame:
    """-> [mid]: moves without an end whose source crashed after they began (it restarted later, or
    its log has no graceful ``node_stop``): the coordinator died with its clients (section 4.1)."""
    restarts = node_start.where(F.col("restarted")).select("node", F.col("t_rel_s").alias("r_s"))
    stopped = node_stop.select("node").distinct()
    m = moves.where(F.col("ends") == 0).select("mid", F.col("src").alias("node"), "begin_s")
    by_restart = m.join(restarts, on="node").where(F.col("r_s") > F.col("begin_s")).select("mid")
    no_stop = m.join(stopped, on="node", how="left_anti").select("mid")
    return by_restart.unionByName(no_stop).distinct()


def client_subscriptions(subscribe: DataFrame, unsubscribe: DataFrame, mobile: DataFrame) -> DataFrame:
    """[client, sub_id, filter, sub_s, unsub_s] with each mobile client's subscriptions collapsed into
    one per filter, from its first subscribe, never withdrawn (a move re-subscribes, not the client)."""
    subs = subscriptions(subscribe, unsubscribe)
    mob = mobile.select("client").distinct()
    fixed = subs.join(mob, on="client", how="left_anti")
    moving = (
        subs.join(mob, on="client", how="left_semi")
        .groupBy("client", "filter")
        .agg(F.min("sub_id").alias("sub_id"), F.min("sub_s").alias("sub_s"))
        .select("client", "sub_id", "filter", "sub_s", F.lit(None).cast("double").alias("unsub_s"))
    )
    return fixed.select("client", "sub_id", "filter", "sub_s", "unsub_s").unionByName(moving)


def inflight(deliver: DataFrame, pubs: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """deliver x publications -> [*by, inflight_s]: the longest delivery - publication time over the
    deliveries (per ``by`` column, e.g. the run)."""
    lat = (deliver.select("pub_id", F.col("t_rel_s").alias("_d"))
           .join(pubs.select("pub_id", "pub_s"), on="pub_id", how="inner")
           .select((F.col("_d") - F.col("pub_s")).alias("_lat"), *[b.alias(f"_by{i}") for i, b in enumerate(by)]))
    return lat.groupBy(*[f"_by{i}" for i in range(len(by))]).agg(F.max("_lat").alias("inflight_s"))


def move_margin_s(inflight_s: float | None) -> float:
    """A move window's margin: publications in flight (MOVE_MARGIN_S, or longer when measured so)."""
    return max(MOVE_MARGIN_S, float(inflight_s or 0.0))


def attribute_to_moves(missing: DataFrame, moves: DataFrame, margin_s: Any) -> DataFrame:
    """[client, pub_id, publisher, pub_s, fault, ...] x moves -> + [mid] (the client's own move whose
    window [begin - margin, end + margin] contains pub_s; null = none). ``margin_s``: seconds, or a
    column (a per-run margin over a batch of runs)."""
    mv = moves.select(F.col("client").alias("m_client"), "mid", "begin_s",
                      F.coalesce("end_s", F.lit(float("inf"))).alias("end_s"))
    m = margin_s if isinstance(margin_s, Column) else F.lit(margin_s)
    return (
        missing.join(mv, on=(F.col("client") == F.col("m_client"))
                     & (F.col("pub_s") >= F.col("begin_s") - m)
                     & (F.col("pub_s") <= F.col("end_s") + m), how="left")
        .groupBy("client", "pub_id", "publisher", "pub_s", "fault")
        .agg(F.min("mid").alias("mid"))
        .select("client", "pub_id", "publisher", "pub_s", "fault", "mid")
    )


def isolation_violations(rt_change: DataFrame, moves: DataFrame) -> DataFrame:
    """-> [mid, node, id, owner, op, what]: reconfiguration changes on another client's entry or at
    a broker off the move's path, or tagged with an unknown move."""
    mv = moves.select("mid", F.col("client").alias("mover"), "path")
    return (
        rt_change.select("mid", "node", "id", "owner", "op").join(mv, on="mid", how="left")
        .withColumn("what", F.when(F.col("mover").isNull(), F.lit("unknown move"))
                    .when(F.col("owner") != F.col("mover"), F.lit("another client's entry"))
                    .when(~F.array_contains("path", F.col("node")), F.lit("broker off the path")))
        .where(F.col("what").isNotNull())
        .select("mid", "node", "id", "owner", "op", "what")
    )


def incarnations(rt_change: DataFrame, node_start: DataFrame) -> DataFrame:
    """rt_change + [inc, dead]: ``inc`` counts the node's restarts before the change; ``dead`` is true
    when the node restarted after it (that process crashed: its tentative entries died with it)."""
    restarts = node_start.where(F.col("restarted")).select("node", "t")
    ch = rt_change.withColumn("_r", F.lit(0))
    rs = restarts.select("node", "t", F.lit(1).alias("_r"))
    cols = [c for c in ch.columns if c not in ("node", "t", "_r")]
    for c in cols:
        rs = rs.withColumn(c, F.lit(None).cast(ch.schema[c].dataType))
    w = Window.partitionBy("node").orderBy("t", F.col("_r").desc()).rowsBetween(Window.unboundedPreceding, 0)
    n = restarts.groupBy("node").agg(F.count("*").alias("_n"))
    return (
        ch.unionByName(rs.select(*ch.columns))
        .withColumn("inc", F.sum("_r").over(w)).where(F.col("_r") == 0)
        .join(n, on="node", how="left").fillna(0, ["_n"])
        .withColumn("dead", F.col("inc") < F.col("_n"))
        .drop("_r", "_n")
    )


def tentative_violations(rt_change: DataFrame, moves: DataFrame, node_start: DataFrame | None = None) -> DataFrame:
    """-> [mid, node, what, by_crash]: a committed move missing prepare + commit at a path broker; an
    aborted one with a prepare not rolled back (or a commit). Per incarnation of the broker (with
    ``node_start``): a broker that crashed lost its tentative entries with its process, so a prepare of
    an incarnation that ended in a crash and was neither committed nor rolled back is ``by_crash``
    (attributed to the crash); a committed move needs one incarnation that prepared and committed
    (the first, or the restarted one that installed the entry from the re-sent (4))."""
    ch = rt_change.where(F.col("op").isin("prepare", "commit", "abort"))
    ch = incarnations(ch, node_start) if node_start is not None else \
        ch.withColumn("inc", F.lit(0)).withColumn("dead", F.lit(False))
    ops = ch.groupBy("mid", "node", "inc", "dead").agg(
        F.sum(F.when(F.col("op") == "prepare", 1).otherwise(0)).alias("prepares"),
        F.sum(F.when(F.col("op") == "commit", 1).otherwise(0)).alias("commits"),
        F.sum(F.when(F.col("op") == "abort", 1).otherwise(0)).alias("aborts"))
    good = (F.col("prepares") > 0) & (F.col("commits") >= F.col("prepares"))
    open_ = F.col("commits") < F.col("prepares")
    committed = (
        moves.where(F.col("outcome") == "commit")
        .select("mid", F.explode("path").alias("node"))
        .join(ops, on=["mid", "node"], how="left").fillna(0, ["prepares", "commits", "aborts"]).fillna(False, ["dead"])
        .groupBy("mid", "node")
        .agg(F.max(F.when(good, 1).otherwise(0)).alias("good"),
             F.max(F.when(open_ & ~F.col("dead"), 1).otherwise(0)).alias("live_open"),
             F.max(F.when(open_ & F.col("dead"), 1).otherwise(0)).alias("dead_open"))
        .where((F.col("good") == 0) | (F.col("live_open") == 1) | (F.col("dead_open") == 1))
        .select("mid", "node",
                F.when((F.col("good") == 1) & (F.col("live_open") == 0),
                       F.lit("prepare lost in a crash of this broker (installed again from (4))"))
                .otherwise(F.lit("committed move without prepare + commit here")).alias("what"),
                ((F.col("good") == 1) & (F.col("live_open") == 0)).alias("by_crash"))
    )
    bad = (F.col("commits") > 0) | (F.col("aborts") < F.col("prepares"))
    aborted = (
        ops.join(moves.where(F.col("outcome").isin("abort", "reject")).select("mid"), on="mid", how="left_semi")
        .where(bad)
        .groupBy("mid", "node").agg(F.min(F.col("dead").cast("int")).alias("all_dead"))
        .select("mid", "node",
                F.when(F.col("all_dead") == 1, F.lit("tentative entry lost in a crash of this broker"))
                .otherwise(F.lit("aborted move not rolled back here")).alias("what"),
                (F.col("all_dead") == 1).alias("by_crash"))
    )
    return committed.unionByName(aborted).select("mid", "node", "what", "by_crash")


# -- routing consistency (plain Python on the small end-of-run tables) -----------------------
def _bounds(preds) -> dict[str, Any] | None:
    """attr -> constraint summary for intersection: ('num', lo, lo_incl, hi, hi_incl) or ('str', value|None).
    None if the filter is unsatisfiable on its own. neq and str-prefix are ignored (over-approximates)."""
    out: dict[str, Any] = {}
    for p in preds:
        if p.op in ("neq", "str-prefix"):
            continue
        if p.op == "isPresent":
            if p.kind is not None:
                out.setdefault(p.attr, (p.kind, None) if p.kind == "str" else ("num", float("-inf"), True,
                                                                              float("inf"), True))
            continue
        if p.kind == "str":
            cur = out.get(p.attr, ("str", None))
            if cur[0] != "str" or (p.op == "eq" and cur[1] is not None and cur[1] != p.value):
                return None
            if p.op == "eq":
                out[p.attr] = ("str", p.value)
            continue
        cur = out.get(p.attr, ("num", float("-inf"), True, float("inf"), True))
        if cur[0] != "num":
            return None
        _, lo, li, hi, hi_i = cur
        v = float(p.value)
        if p.op in ("eq", ">=", ">") and (v > lo or (v == lo and p.op == ">")):
            lo, li = v, p.op != ">"
        if p.op in ("eq", "<=", "<") and (v < hi or (v == hi and p.op == "<")):
            hi, hi_i = v, p.op != "<"
        if lo > hi or (lo == hi and not (li and hi_i)):
            return None
        out[p.attr] = ("num", lo, li, hi, hi_i)
    return out


def intersects(a: str, b: str) -> bool:
    """Whether filters a and b can match a common publication (exact for eq and ranges)."""
    ba, bb = _bounds(parse_filter(a)), _bounds(parse_filter(b))
    if ba is None or bb is None:
        return False
    for attr in set(ba) & set(bb):
        x, y = ba[attr], bb[attr]
        if x[0] != y[0]:
            return False
        if x[0] == "str":
            if x[1] is not None and y[1] is not None and x[1] != y[1]:
                return False
            continue
        lo, li = max((x[1], not x[2]), (y[1], not y[2]))
        hi, hi_neg = min((x[3], x[4]), (y[3], y[4]))
        if lo > hi or (lo == hi and (li or not hi_neg)):
            return False
    return True


def tree_paths(neighbors: dict[str, list[str]]):
    """A function path(a, b) -> [a, ..., b] over an undirected forest."""
    cache: dict[str, dict[str, str | None]] = {}

    def prev_from(a: str) -> dict[str, str | None]:
        if a not in cache:
            prev: dict[str, str | None] = {a: None}
            q = deque([a])
            while q:
                x = q.popleft()
                for y in neighbors.get(x, ()):
                    if y not in prev:
                        prev[y] = x
                        q.append(y)
            cache[a] = prev
        return cache[a]

    def path(a: str, b: str) -> list[str]:
        prev = prev_from(b)
        if a not in prev:
            return []
        out = [a]
        while out[-1] != b:
            out.append(prev[out[-1]])  # type: ignore[arg-type]
        return out

    return path


def consistency_violations(dumps: dict[str, dict[str, Any]], advs: list[tuple[str, str, str]],
                           subs: list[tuple[str, str, str, str]], neighbors: dict[str, list[str]],
                           covering: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Section 3.5 (i), (ii) on end-of-run tables. ``dumps`` broker -> {prt, srt}; ``advs``
    (adv_id, filter, broker P); ``subs`` (sub_id, client, filter, broker Q). With covering other than
    ``off`` a path broker may hold a covering subscription instead of S: only Q's local entry is checked.
    Returns (violations, counts)."""
    path = tree_paths(neighbors)
    prt = {b: {e[0]: e[1] for e in d.get("prt") or []} for b, d in dumps.items()}
    srt = {b: {e[0]: e[1] for e in d.get("srt") or []} for b, d in dumps.items()}
    out: list[dict[str, Any]] = []
    pairs = 0
    for aid, af, p in advs:
        for b in dumps:
            if b == p:
                continue
            pb = path(b, p)
            if len(pb) < 2:
                continue
            if srt[b].get(aid) != pb[1]:
                out.append({"rule": "ii", "broker": b, "id": aid, "want": pb[1], "got": srt[b].get(aid)})
    for sid, client, sf, q in subs:
        if q not in prt:
            continue
        if not any(h.startswith("@") or h.endswith("/" + client) for k, h in prt[q].items() if k == sid):
            out.append({"rule": "i", "broker": q, "id": sid, "want": "local", "got": prt[q].get(sid)})
        if covering != "off":
            continue
        for aid, af, p in advs:
            if p == q or not intersects(af, sf):
                continue
            pairs += 1
            pq = path(p, q)
            for i, b in enumerate(pq[:-1]):
                if b not in prt:
                    continue
                if prt[b].get(sid) != pq[i + 1]:
                    out.append({"rule": "i", "broker": b, "id": sid, "want": pq[i + 1], "got": prt[b].get(sid),
                                "adv": aid})
    return out, {"pairs": pairs, "brokers": len(dumps)}


# -- checks ---------------------------------------------------------------------------
def _moves(ctx: AnalysisContext) -> DataFrame:
    key = "mobility.moves"
    if key not in ctx.results:
        ctx.results[key] = move_outcomes(ctx.df("move_begin"), ctx.df("move_end")).cache()
    return ctx.results[key]


def check_one_running_instance(ctx: AnalysisContext) -> CheckResult:
    cs = ctx.df("client_state")
    mobile = cs.select("client").distinct()
    d = ctx.df("deliver").join(mobile, on="client", how="left_semi")
    v1 = deliveries_outside_started(cs, d).cache()
    v2 = transfer_order_violations(cs, ctx.df("move_step")).cache()
    n = tally({"v1": v1, "v2": v2})
    n1, n2 = n["v1"], n["v2"]
    r = summarize("P1_one_running_instance",
                  "a mobile client's deliveries happen only at a started copy; the source stops before "
                  "sending (4), the target starts after receiving it", v1,
                  order=["deliver_s", "client"], count=n1 + n2,
                  details={"deliveries_outside_started": n1, "transfer_order": n2})
    if n2:
        r.examples += [{k: x for k, x in row.asDict().items()} for row in v2.limit(5).collect()]
    return r


#: fault operations that lose messages on a move's path (a crash or stall of a path broker, a cut or
#: partition of a path link); a covering move without an end that began in such a window is theirs
LOSSY_OPS = ("crash", "cut", "partition", "stall", "pause")


def moves_cut_by_faults(ctx: AnalysisContext, moves: DataFrame) -> DataFrame:
    """-> [mid, client, fault]: moves without an end that began inside the attribution window of a
    fault that loses messages on their path (a cut of one of its links, a crash of one of its
    brokers; a partition: any). Used for covering, which has no timeout or retransmission: such a
    move never ends and its client may be lost (docs/mobility.md, "Moves under faults")."""
    wins = []
    for w in ctx.windows:
        if w.attributable and set(w.ops) & set(LOSSY_OPS):
            lo, hi = w.attribution_window(ctx.options.fault_margin_s)
            wins.append((w.fault, float(lo), float(hi), set(w.targets), "cut" in w.ops))
    rows = []
    if wins:
        for r in moves.where((F.col("ends") == 0) & F.col("begin_s").isNotNull()) \
                .select("mid", "client", "begin_s", "path").collect():
            path = list(r["path"] or [])
            for fault, lo, hi, targets, link in wins:
                # a cut: both ends on the path (one of its links); a crash/stall: its node on the path;
                # a partition (no targets): any move
                on_path = (targets <= set(path)) if link else bool(targets & set(path))
                if lo <= r["begin_s"] <= hi and (not targets or on_path):
                    rows.append((r["mid"], r["client"], fault))
                    break
    return ctx.spark.createDataFrame(rows, "mid string, client string, fault int")


def check_move_atomicity(ctx: AnalysisContext) -> CheckResult:
    moves = _moves(ctx)
    cs = ctx.df("client_state")
    crashed = crashed_moves(moves, ctx.df("node_start"), ctx.df("node_stop"))
    covering = _movement(ctx) == "covering"
    by_fault = moves_cut_by_faults(ctx, moves).join(crashed, on="mid", how="left_anti").cache() if covering \
        else None
    excused = crashed if by_fault is None else crashed.unionByName(by_fault.select("mid"))
    excused = excused.distinct().cache()
    v_all = atomicity_violations(moves, cs)
    v = v_all.join(excused, on="mid", how="left_anti").cache()
    bad_ends = started_copies_at_end(cs, ctx.df("node_start")).cache()
    lost = bad_ends.where((F.col("started") == 0) & (F.col("crashed") > 0))
    ends = bad_ends.join(lost.select("client"), on="client", how="left_anti")
    # every count of this check in one Spark job (tally)
    counts: dict[str, Any] = {"v_crash": v_all.join(crashed, on="mid", how="left_semi"), "n_lost": lost, "v": v,
                              "outcomes": (moves, "outcome"), **lost_client_counts(moves, bad_ends, cs)}
    if by_fault is not None:
        # covering: a client with no started copy whose last move was cut by a fault is that fault's loss
        last = moves.withColumn("r", F.row_number().over(Window.partitionBy("client").orderBy(F.col("begin_s").desc())))\
            .where(F.col("r") == 1).select("client", "mid")
        gone = ends.where(F.col("started") == 0).join(last, on="client").join(by_fault.select("mid"), on="mid",
                                                                                how="left_semi")
        ends = ends.join(gone.select("client"), on="client", how="left_anti")
        counts.update(v_fault=v_all.join(by_fault.select("mid"), on="mid", how="left_semi"), n_lost_fault=gone,
                      cut=(by_fault, "mid"))
    counts["ends"] = ends
    n = tally(counts)
    v_crash, n_lost, n1, n2 = n["v_crash"], n["n_lost"], n["v"], n["ends"]
    v_fault, n_lost_fault = n.get("v_fault", 0), n.get("n_lost_fault", 0)
    outcomes = {k or "none": c for k, c in n["outcomes"].items()}
    details = {"outcomes": outcomes, "bad_moves": n1, "clients_without_one_copy": n2,
               "clients_lost_in_crashes": n_lost, "moves_cut_by_source_crash": v_crash}
    if by_fault is not None:
        details.update(moves_cut_by_faults=v_fault, clients_lost_by_faults=n_lost_fault,
                       cut_moves=sorted(m for m, c in n["cut"].items() for _ in range(c))[:20])
    details["clients_lost"] = lost_clients_of(n, _movement(ctx))
    if details["clients_lost"]["finding"]:
        details["finding"] = details["clients_lost"]["finding"]
    r = summarize("P2_move_atomicity",
                  "each move ends once; commit => source clean and target started; abort => target never "
                  "started; one started copy per client at the end (clients whose broker crashed are "
                  "attributed to the crash; covering: moves that never ended because a fault on their path "
                  "dropped their messages, and the clients they lost, are attributed to that fault)", v,
                  order=["mid"], count=n1 + n2, attributed=n_lost + v_crash + v_fault + n_lost_fault,
                  details=details)
    if n2:
        r.examples += [{k: x for k, x in row.asDict().items()} for row in ends.limit(5).collect()]
    return r


def lost_clients(moves: DataFrame, ends: DataFrame, client_state: DataFrame, movement: str) -> dict[str, Any]:
    """Clients a protocol lost, whatever excused them: moves that began and never ended, and mobile
    clients with no started copy anywhere at the end (``ends``: :func:`started_copies_at_end`).
    ``finding``: the one line the report shows at its top when some were lost (None otherwise)."""
    return lost_clients_of(tally(lost_client_counts(moves, ends, client_state)), movement)


def lost_client_counts(moves: DataFrame, ends: DataFrame, client_state: DataFrame) -> dict[str, DataFrame]:
    """The frames :func:`lost_clients` counts (for :func:`tally`, with others of the same check)."""
    return {"lost.never": moves.where((F.col("ends") == 0) & F.col("begin_s").isNotNull()),
            "lost.nowhere": ends.where(F.col("started") == 0),
            "lost.mobile": client_state.select("client").distinct()}


def lost_clients_of(n: dict[str, Any], movement: str) -> dict[str, Any]:
    """:func:`lost_clients` from the counts of :func:`lost_client_counts` (``n``, by :func:`tally`)."""
    never, nowhere, mobile = n["lost.never"], n["lost.nowhere"], n["lost.mobile"]
    finding = None
    if never or nowhere:
        finding = (f"{movement}: {nowhere} of {mobile} mobile client(s) lost (running nowhere at the end), "
                   f"{never} move(s) never ended")
    return {"movement": movement, "mobile_clients": mobile, "clients_running_nowhere": nowhere,
            "moves_never_ended": never, "finding": finding}


def check_exactly_once(ctx: AnalysisContext) -> CheckResult:
    v = duplicate_deliveries(ctx.df("deliver"))
    return summarize("P3_exactly_once", "no client receives a publication twice, across its copies", v,
                     order=["first_s", "client", "pub_id"])


def dead_copies(client_state: DataFrame, node_start: DataFrame) -> DataFrame:
    """-> [client, node]: clients with no live started copy at the end whose last started copy was on
    ``node`` when it crashed (the node restarted after the client's last state there: section 4.1)."""
    restarts = node_start.where(F.col("restarted")).groupBy("node").agg(F.max("t").alias("t_restart"))
    w = Window.partitionBy("client", "node").orderBy(F.col("m").desc())
    last = (client_state.withColumn("r", F.row_number().over(w)).where(F.col("r") == 1)
            .join(restarts, on="node", how="left")
            .withColumn("dead", F.col("t_restart").isNotNull() & (F.col("t_restart") > F.col("t"))))
    live = last.where((F.col("state") == "started") & ~F.col("dead")).select("client").distinct()
    return (last.where((F.col("state") == "started") & F.col("dead")).select("client", "node")
            .join(live, on="client", how="left_anti").distinct())


DEAD_CLIENTS = "client string, fault int, lo double, hi double, why string"
LOST_WITH_BROKER = "client lost with its broker"
ADOPTED = "client started again from (4) by its restarted target"


def adopted_rows(adopts: list[tuple[str, str, float]], crashes: list[tuple[int, float, set]],
                 margin_s: float) -> list[tuple]:
    """Rows of :data:`DEAD_CLIENTS` for clients a restarted target started from (4) (``xfer_adopt``:
    its queued copy died with the crash). Until then the client existed nowhere: what reached the
    restarted broker for it was dropped, after the crash's window (which ends at the re-sync). From
    the crash's window to the adoption (+ ``margin_s``) its misses are the crash's. ``adopts``:
    [(node, client, adopt_s)]; ``crashes``: [(fault, lo, targets)]. Pure."""
    rows = []
    for node, client, t in adopts:
        hit = max(((f, lo) for f, lo, targets in crashes if node in targets and lo <= t), key=lambda x: x[1],
                  default=None)
        if hit is not None:
            rows.append((client, hit[0], float(hit[1]), float(t) + margin_s, ADOPTED))
    return rows


def _dead_clients(ctx: AnalysisContext) -> DataFrame:
    """[client, fault, lo, hi, why]: each client lost in a crash (hi null: to the end), with the
    crash's fault index and the start of its attribution window (crashes of the fault windows only:
    a crash seen only in the history attributes nothing here); and each client a restarted target
    started from (4), up to then (:func:`adopted_rows`)."""
    crashes = [(w.fault, w.attribution_window(ctx.options.fault_margin_s)[0], set(w.targets))
               for w in ctx.windows if w.attributable and "crash" in w.ops]
    rows = []
    if crashes:
        for r in dead_copies(ctx.df("client_state"), ctx.df("node_start")).collect():
            hit = next(((f, lo) for f, lo, t in crashes if r["node"] in t), None)
            if hit is not None:
                rows.append((r["client"], hit[0], float(hit[1]), None, LOST_WITH_BROKER))
        adopts = [(r["node"], r["client"], r["t_rel_s"]) for r in
                  ctx.df("move_step").where(F.col("step") == "xfer_adopt").select("node", "client", "t_rel_s").collect()]
        rows += adopted_rows(adopts, crashes, ctx.options.fault_margin_s)
    return ctx.spark.createDataFrame(rows, DEAD_CLIENTS)


def attribute_to_dead_clients(missing: DataFrame, dead: DataFrame) -> DataFrame:
    """A client that died with its broker (section 4.1) misses everything after the crash, not only
    inside the crash's window: its unattributed misses from the window's start on are the crash's
    (``hi`` null); a client started again from (4) by its restarted target, those up to ``hi``."""
    d = dead.select("client", F.col("fault").alias("d_fault"), F.col("lo").alias("d_lo"),
                    F.col("hi").alias("d_hi"), F.col("why").alias("d_why"))
    newly = (F.col("fault").isNull() & F.col("d_lo").isNotNull() & (F.col("pub_s") >= F.col("d_lo"))
             & (F.col("d_hi").isNull() | (F.col("pub_s") <= F.col("d_hi"))))
    return (
        missing.join(d, on="client", how="left")
        .withColumn("fault_source", F.when(newly, F.col("d_why")).otherwise(F.col("fault_source")))
        .withColumn("fault", F.when(newly, F.col("d_fault")).otherwise(F.col("fault")))
        .groupBy("client", "pub_id", "publisher", "pub_s")
        .agg(F.min("fault").alias("fault"), F.first("fault_source").alias("fault_source"))
        .select("client", "pub_id", "publisher", "pub_s", "fault", "fault_source")
    )


def route_tables(ctx: AnalysisContext, copies: list[tuple[str, str]], resync: list[tuple],
                 pairs: list[tuple[str, str]]) -> tuple[list[tuple], list[tuple]]:
    """(route_of rows [client, publisher, codes], window rows [fault, lo, hi, source, codes]) of one run
    for :func:`attribute_by_route`: a stationary client's route ends at its group's process and broker
    (the plan), a mobile client's at any broker where it ever had a copy (``copies`` [client, node]:
    which one at the publication's time is not resolved, so every such route counts). ``pairs``: the
    (subscriber, publisher) pairs to code. Codes and windows as ``analysis.routes``."""
    from testbed.analysis.routes import Routes, route_windows

    routes = Routes(ctx.plan, hosted=True)
    eps: dict[str, set[tuple[str, str]]] = {c: {ep} for c, ep in routes.clients.items()}
    for c, node in copies:
        eps.setdefault(c, set()).add((node, node))
    wins = route_windows(ctx.windows, routes, resync, margin_s=ctx.options.fault_margin_s, end_s=ctx.end_s)
    wrows = [(w.fault, w.lo, w.hi, w.source, None if w.codes is None else sorted(w.codes)) for w in wins]
    rrows = [(c, p, routes.pair_codes(eps.get(p, ()), eps.get(c, ()))) for c, p in pairs] if routes.known else []
    return rrows, wrows


def attribute_by_route(missing: DataFrame, route_of: DataFrame, windows: DataFrame, run=None) -> DataFrame:
    """[client, pub_id, publisher, pub_s] -> + [fault, fault_source]: the lowest-index fault whose window
    contains ``pub_s`` and that touches the pair's route (``route_of`` [client, publisher, codes];
    ``windows`` [fault, lo, hi, source, codes], codes null = every route; ``run``: a column of
    ``missing`` equal to ``windows._wrun``, for many runs at once)."""
    m = missing.select("client", "pub_id", "publisher", "pub_s").join(
        route_of.select("client", "publisher", F.col("codes").alias("_rc")), on=["client", "publisher"], how="left")
    on = ((F.col("pub_s") >= F.col("lo")) & (F.col("pub_s") <= F.col("hi"))
          & (F.col("codes").isNull() | F.coalesce(F.arrays_overlap("_rc", "codes"), F.lit(False))))
    if run is not None:
        on = on & (run == F.col("_wrun"))
    hit = (
        m.join(F.broadcast(windows), on=on, how="left")
        .groupBy("client", "pub_id", "publisher", "pub_s")
        .agg(F.min("fault").alias("fault"), F.min_by("source", "fault").alias("fault_source"))
    )
    return hit.select("client", "pub_id", "publisher", "pub_s", "fault", "fault_source")


ROUTE_OF = "client string, publisher string, codes array<int>"
ROUTE_WINDOWS = "fault int, lo double, hi double, source string, codes array<int>"


def _attribute(ctx: AnalysisContext, missing: DataFrame) -> DataFrame:
    """:func:`attribute_by_route` of one run (the re-syncs read only when a fault ends by one)."""
    from testbed.protocols.pubsub.analysis.checks import needs_resync, resync_rows

    missing = missing.cache()
    # the (client, publisher) pairs of the misses and the (client, node) copies: one Spark job
    both = (missing.select(F.lit(0).alias("_w"), "client", F.col("publisher").alias("_x")).distinct()
            .unionByName(ctx.df("client_state").select(F.lit(1).alias("_w"), "client", F.col("node").alias("_x"))
                         .distinct()).collect())
    pairs = [(r[1], r[2]) for r in both if r[0] == 0]
    copies = [(r[1], r[2]) for r in both if r[0] == 1]
    rrows, wrows = route_tables(ctx, copies, resync_rows(ctx) if needs_resync(ctx) else [], pairs)
    return attribute_by_route(missing, ctx.spark.createDataFrame(rrows, ROUTE_OF),
                              ctx.spark.createDataFrame(wrows, ROUTE_WINDOWS))


def publications_end_s(ctx: AnalysisContext) -> float:
    """When the run's publications ended: the workload's end, never past its planned duration (the
    publishers stop there; a run that waited past it for open moves, ``params.drain``, records
    that later time as its end)."""
    d = ctx.manifest.get("duration_s", ctx.plan.get("duration_s"))
    return min(ctx.end_s, float(d)) if isinstance(d, (int, float)) and not isinstance(d, bool) else ctx.end_s


def _missing(ctx: AnalysisContext) -> tuple[DataFrame, int]:
    key = "mobility.missing"
    if key not in ctx.results:
        subs = client_subscriptions(ctx.df("subscribe"), ctx.df("unsubscribe"), ctx.df("client_state")).cache()
        pubs = publications(ctx.df("publish")).cache()
        matches, errors = match_pairs(ctx.spark, subs, pubs)
        expected = expected_deliveries(subs, pubs, matches, settle_s=ctx.settle_s,
                                       margin_s=ctx.options.travel_margin_s, end_s=publications_end_s(ctx)).cache()
        margin = move_margin_s(inflight(ctx.df("deliver"), pubs).first()["inflight_s"])
        ctx.results["mobility.move_margin_s"] = margin
        missing = attribute_to_moves(
            attribute_to_dead_clients(
                _attribute(ctx, missing_deliveries(expected, ctx.df("deliver"))),
                _dead_clients(ctx)),
            _moves(ctx), margin).cache()
        ctx.results[key] = (missing, expected, errors)  # expected: counted by check_completeness
    return ctx.results[key]


def check_completeness(ctx: AnalysisContext) -> CheckResult:
    missing, expected, errors = _missing(ctx)
    movement = _movement(ctx)
    in_moves = missing.where(F.col("fault").isNull() & F.col("mid").isNotNull())
    if movement == "covering":
        v = missing.where(F.col("fault").isNull() & F.col("mid").isNull())
    else:
        v = missing.where(F.col("fault").isNull())
    # every count of this check in one Spark job (tally); in_moves by move: its rows, its moves, the worst
    n = tally({"expected": expected, "by_fault": missing.where(F.col("fault").isNotNull()),
               "in_moves": (in_moves, "mid"), "v": v})
    by_fault, per_move = n["by_fault"], n["in_moves"]
    n_moves = sum(per_move.values())
    attributed = by_fault + n_moves if movement == "covering" else by_fault
    top = dict(sorted(per_move.items(), key=lambda kv: (-kv[1], kv[0]))[:10])
    r = summarize("P4_completeness",
                  "every matching publication is delivered to the client (either copy); covering: misses in "
                  "the client's own move windows are attributed to the move", v,
                  order=["pub_s", "client", "pub_id"], attributed=attributed, count=n["v"],
                  details={"expected": n["expected"], "movement": movement, "attributed_to_faults": by_fault,
                           "missed_in_move_windows": n_moves, "moves_with_losses": len(per_move),
                           "worst_moves": top, "unparsable_filters": errors,
                           "move_margin_s": round(ctx.results["mobility.move_margin_s"], 3)})
    if errors:
        r.passed = False
    return r


def check_others_unaffected(ctx: AnalysisContext) -> CheckResult:
    missing, _, _ = _missing(ctx)
    movers = ctx.df("move_begin").select("client").distinct()
    lost = missing.join(movers, on="client", how="left_anti").where(F.col("fault").isNull()) \
        .select("client", "pub_id", F.col("pub_s").alias("t_s"), F.lit("missed").alias("what"))
    dup = duplicate_deliveries(ctx.df("deliver")).join(movers, on="client", how="left_anti") \
        .select("client", "pub_id", F.col("first_s").alias("t_s"), F.lit("duplicate").alias("what"))
    v = lost.unionByName(dup)
    return summarize("P5_others_unaffected", "clients that never move miss nothing and receive nothing twice",
                     v, order=["t_s", "client"])


def check_fifo(ctx: AnalysisContext) -> CheckResult:
    """Per-publisher FIFO. Reconfiguration keeps it across a move (the target merges the moved
    client's buffered notifications in order, section 3.4): a mover's inversion is a violation.
    Covering does not: a mover's inversions are counted, informational."""
    movers = ctx.df("move_begin").select("client").distinct()
    inv = fifo_inversions(ctx.df("deliver")).cache()
    judged = _movement(ctx) == "reconfiguration"
    v = inv if judged else inv.join(movers, on="client", how="left_anti")
    n = tally({"movers": inv.join(movers, on="client", how="left_semi"), "v": v})
    return summarize("P6_fifo", "per-publisher FIFO at every client, movers across their moves too "
                     "(reconfiguration keeps it; covering: movers informational)", v,
                     order=["deliver_s", "client"], count=n["v"],
                     details={"mover_inversions": n["movers"], "movers_judged": judged})


def check_routing_isolation(ctx: AnalysisContext) -> CheckResult:
    moves = _moves(ctx)
    v = isolation_violations(ctx.df("rt_change"), moves).cache()
    if _movement(ctx) == "covering":
        # other clients' entries only; the mover's own entries at brokers off its path are counted apart
        others = v.where(F.col("what") == "another client's entry")
        unknown = v.where(F.col("what") == "unknown move")
        n = tally({"others": (others, "op"), "own": v.where(F.col("what") == "broker off the path"),
                   "unknown": unknown})
        counts = n["others"]
        n_others, n_own = sum(counts.values()), n["own"]
        return summarize("P7_routing_isolation",
                         "covering: changes to other clients' entries are counted (no guarantee); only changes "
                         "tagged with an unknown move are violations",
                         unknown, order=["mid", "node"], count=n["unknown"],
                         details={"others_changes": n_others, "others_by_op": counts,
                                  "own_changes_off_path": n_own})
    return summarize("P7_routing_isolation", "every routing change of a move touches the mover's entries at a "
                     "broker on its path", v, order=["mid", "node"])


def check_routing_atomicity(ctx: AnalysisContext) -> CheckResult:
    moves = _moves(ctx)
    v = tentative_violations(ctx.df("rt_change"), moves, ctx.df("node_start")).cache() \
        if _movement(ctx) == "reconfiguration" else None
    left = (
        ctx.df("rt_dump")
        .select("node", F.explode(F.from_json("tentative", "array<array<string>>")).alias("e"))
        .select(F.col("e")[0].alias("mid"), "node", F.concat(F.lit("tentative entry left: "),
                                                             F.concat_ws(" ", "e")).alias("what"))
    )
    counts = {}
    if v is not None:
        counts["broker_crash"] = v.where(F.col("by_crash"))
        left = v.where(~F.col("by_crash")).drop("by_crash").unionByName(left)
    crashed = crashed_moves(moves, ctx.df("node_start"), ctx.df("node_stop"))
    bad = left.join(crashed, on="mid", how="left_anti")
    n = tally({**counts, "crash": left.join(crashed, on="mid", how="left_semi"), "dumps": ctx.df("rt_dump"),
               "v": bad})
    n_crash, n_broker_crash = n["crash"], n.get("broker_crash", 0)
    return summarize("P8_routing_atomicity", "a committed move prepared and committed at every path broker, an "
                     "aborted one rolled back; no tentative entry remains at the end (moves whose source "
                     "crashed, and tentative entries that died with a crashed broker, are attributed to the "
                     "crash)", bad,
                     order=["mid", "node"], attributed=n_crash + n_broker_crash, count=n["v"],
                     details={"dumps": n["dumps"], "left_by_source_crash": n_crash,
                              "lost_with_a_crashed_broker": n_broker_crash})


def check_routing_consistency(ctx: AnalysisContext) -> CheckResult:
    plan = ctx.plan
    neighbors = {n: list(v.get("neighbors") or []) for n, v in (plan.get("nodes") or {}).items()
                 if v.get("kind") == "node"}
    dumps: dict[str, dict[str, Any]] = {}
    for r in ctx.df("rt_dump").orderBy("m").collect():
        dumps[r["node"]] = {"prt": json.loads(r["prt"] or "[]"), "srt": json.loads(r["srt"] or "[]")}
    advs = [(r["adv_id"], r["filter"], r["broker"]) for r in ctx.df("advertise").select("adv_id", "filter", "broker")
            .distinct().collect()]
    unsub = {r["sub_id"] for r in ctx.df("unsubscribe").select("sub_id").collect()}
    # where each subscription lives at the end: stationary at its broker; a mobile client's at its started copy
    # (a copy whose broker restarted after its last state died in the crash, section 4.1: the dead
    # client's entries elsewhere are stale, attributed to the crash, not checked)
    cs = ctx.df("client_state")
    w = Window.partitionBy("client", "node").orderBy(F.col("m").desc())
    restarts = ctx.df("node_start").where(F.col("restarted")).groupBy("node").agg(F.max("t").alias("t_restart"))
    last = (cs.withColumn("r", F.row_number().over(w)).where((F.col("r") == 1) & (F.col("state") == "started"))
            .join(restarts, on="node", how="left")
            .withColumn("dead", F.col("t_restart").isNotNull() & (F.col("t_restart") > F.col("t"))).collect())
    here = {(r["client"], r["node"]) for r in last if not r["dead"]}
    dead = sorted({r["client"] for r in last if r["dead"]} - {c for c, _ in here})
    mobile = {r["client"] for r in cs.select("client").distinct().collect()}
    subs = []
    for r in ctx.df("subscribe").select("sub_id", "client", "filter", "broker").distinct().collect():
        if r["sub_id"] in unsub:
            continue
        if r["client"] in mobile:
            for (c, node) in here:
                if c == r["client"]:
                    subs.append((r["sub_id"], c, r["filter"], node))
        else:
            subs.append((r["sub_id"], r["client"], r["filter"], r["broker"]))
    covering = str((plan.get("params") or {}).get("covering") or "off")
    if not dumps:
        return CheckResult("P9_routing_consistency", False, 1, description="no rt_dump: brokers did not stop cleanly",
                           examples=[{"what": "no rt_dump events"}])
    v, counts = consistency_violations(dumps, advs, subs, neighbors, covering)
    return CheckResult("P9_routing_consistency", not v, len(v), examples=v[:5], attributed=len(dead),
                       description="at the end every broker on the path from an advertisement to an intersecting "
                       "subscription routes it toward the subscriber, and every broker routes the advertisement "
                       "toward the publisher (clients lost in a crash are not checked: attributed to the crash)",
                       details={**counts, "subscriptions": len(subs), "advertisements": len(advs),
                                "covering": covering, "clients_lost_in_crashes": dead[:20]})


CHECKS = [check_one_running_instance, check_move_atomicity, check_exactly_once, check_completeness,
          check_others_unaffected, check_fifo, check_routing_isolation, check_routing_atomicity,
          check_routing_consistency]
