"""History checks of the transactions protocol: the spec's P1-P9 (section 3), in Spark.

Each check reads only the logged events (docs/transactions.md lists them) and can
fail; tests/unit/transactions/test_checks.py shows each failing on a broken history.

* P1 sequential consistency  <SO from tx_op (Thread, Trigger, Trigger*, closure, per
                             transaction); every broker processed a before b (tx_proc k)
* P2 scenario routing        committed (BL-WAIT: every) transaction: op1 reached {D},
                             op2 and op5 reached {the assigned agent}
* P3 delivery atomicity      committed: every received publication delivered exactly once,
                             after the client's committed outcome; aborted: nothing
                             delivered, every received publication discarded
* P4 agreement               one tx_end per tx_begin; every broker and client that took
                             part logged exactly that outcome (a restarted broker re-learns
                             outcomes and may log one again: one distinct value per broker)
* P5 routing-state atomicity each broker's final PRT (SRT) holds a subscription (an
                             advertisement) touched by a transaction iff the replay of the
                             committed operations (in commit order; with the sub/usub a
                             broker triggered) leaves it there (for S-TX this is P7)
* P6 commit order            D-TX: no two brokers commit two transactions in opposite order
                             (D-TXNI, S-TX: reported, not required)
* P8 regular traffic         the pub/sub core's checks (added from checks.pubsub)
* P9 no aborts               none in a run without explicit aborts and faults (Figs 5-9)

P6's second half is the §3.3 example, in a conflict run (``params.conflict``: probe
transactions publish into the event space a dispatch moves from D to A): no committed probe
publication is delivered to both the old subscriber (D) and the new one (A).
"""

from __future__ import annotations

import math

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from testbed.analysis.checks import CheckResult, summarize
from testbed.protocols.pubsub.analysis.checks import CHECKS as PUBSUB
from testbed.analysis.context import AnalysisContext

TX_VARIANTS = ("dtx", "dtxni", "stx")


def variant(ctx: AnalysisContext) -> str:
    return str((ctx.plan.get("params") or {}).get("variant") or "")


def _na(name: str, description: str, why: str) -> CheckResult:
    return CheckResult(name=name, passed=True, violations=0, description=description,
                       details={"applies": False, "why": why})


def outcomes(ctx: AnalysisContext) -> DataFrame:
    """-> [tx, outcome, txc]: the TXC's tx_end per transaction (first one if several)."""
    return (ctx.df("tx_end").groupBy("tx")
            .agg(F.min_by("outcome", "t_rel_s").alias("outcome"), F.min_by("client", "t_rel_s").alias("txc")))


def dispatches(begin: DataFrame) -> DataFrame:
    """The scenario's dispatch transactions among tx_begin (a conflict run's probes left out;
    runs from before ``kind`` was logged have only dispatches)."""
    return begin.where(F.coalesce(F.col("kind"), F.lit("dispatch")) != "probe")


def op_num(col: str = "op_id"):
    return F.element_at(F.split(F.col(col), "/"), -1).cast("int")


# ---------------------------------------------------------------------------------- P1
def required_order(tx_op: DataFrame) -> DataFrame:
    """tx_op -> [tx, a, b]: the pairs a <SO b of each transaction (Def 3.4, closed transitively)."""
    ops = tx_op.select("tx", "op_id", "client", "trigger", "node", "m").dropDuplicates(["tx", "op_id"])
    a, b = ops.alias("a"), ops.alias("b")
    thread = (a.join(b, (F.col("a.tx") == F.col("b.tx")) & (F.col("a.client") == F.col("b.client"))
                     & (F.col("a.node") == F.col("b.node")) & (F.col("a.m") < F.col("b.m")))
              .select(F.col("a.tx").alias("tx"), F.col("a.op_id").alias("a"), F.col("b.op_id").alias("b")))
    trig = ops.where(F.col("trigger") != "").select("tx", F.col("trigger").alias("a"), F.col("op_id").alias("b"))
    # paths are at most (operations per transaction - 1) long: square the relations that often
    rounds = _rounds(ops)
    desc = _close(trig, rounds)  # triggered-by, closed: (a, t) where t descends from a
    # Trigger*: anything triggered by a precedes every later operation of a's client
    star = (desc.alias("d").join(thread.alias("t"), (F.col("d.tx") == F.col("t.tx")) & (F.col("d.a") == F.col("t.a")))
            .select(F.col("d.tx").alias("tx"), F.col("d.b").alias("a"), F.col("t.b").alias("b")))
    closure = _close(thread.union(trig).union(star).distinct(), rounds)
    return closure.where(F.col("a") != F.col("b"))


def _rounds(ops: DataFrame) -> int:
    """Squarings that close paths of up to (largest transaction's operation count - 1) edges."""
    biggest = ops.groupBy("tx").count().agg(F.max("count")).first()[0] or 1
    return max(1, math.ceil(math.log2(max(2, biggest - 1))))


def _close(edges: DataFrame, rounds: int) -> DataFrame:
    """Transitive closure of [tx, a, b] by repeated squaring (lineage cut every round)."""
    c = edges.distinct().localCheckpoint()
    for _ in range(rounds):
        sq = (c.alias("x").join(c.alias("y"), (F.col("x.tx") == F.col("y.tx")) & (F.col("x.b") == F.col("y.a")))
              .select(F.col("x.tx").alias("tx"), F.col("x.a").alias("a"), F.col("y.b").alias("b")))
        c = c.union(sq).distinct().localCheckpoint()
    return c


def order_violations(pairs: DataFrame, tx_proc: DataFrame) -> DataFrame:
    """-> [node, tx, a, b, k_a, k_b]: a <SO b both processed at node, b first."""
    p = tx_proc.select("node", "tx", "op_id", "k")
    pa = p.select("node", "tx", F.col("op_id").alias("a"), F.col("k").alias("k_a"))
    pb = p.select("node", "tx", F.col("op_id").alias("b"), F.col("k").alias("k_b"))
    return (pairs.join(pa, ["tx", "a"]).join(pb, ["node", "tx", "b"])
            .where(F.col("k_a") > F.col("k_b")).select("node", "tx", "a", "b", "k_a", "k_b"))


def check_sequential_consistency(ctx: AnalysisContext) -> CheckResult:
    name, desc = "transactions.p1_order", "every broker processes a before b for every pair a <SO b (P1)"
    v = variant(ctx)
    if v not in TX_VARIANTS:
        return _na(name, desc, f"{v}: plain brokers log no tx_proc (reported, not required)")
    pairs = required_order(ctx.df("tx_op")).cache()
    viol = order_violations(pairs, ctx.df("tx_proc"))
    return summarize(name, desc, viol, order=["tx", "node", "a"], details={"pairs": pairs.count()})


# ---------------------------------------------------------------------------------- P2
def routing_violations(begin: DataFrame, deliver: DataFrame, outs: DataFrame, every: bool) -> DataFrame:
    """-> [tx, n, expected, got] where op n of a (committed) transaction reached other clients."""
    txs = dispatches(begin).select("tx", "agent", "dispatcher",
                                   F.coalesce(F.col("kind"), F.lit("dispatch")).alias("kind"))
    if not every:
        txs = txs.join(outs.where(F.col("outcome") == "committed").select("tx"), "tx")
    # the publications each scenario routes: Fig 1b op1 -> D, op2 and op5 -> A; advpub (the
    # TXManager scenario, protocols/transactions/nodes/advpub.py) op1 (tcm) and op4 -> its subscriber C1
    pubs = begin.sparkSession.createDataFrame(
        [("dispatch", 1), ("dispatch", 2), ("dispatch", 5), ("advpub", 1), ("advpub", 4)], "kind string, n int")
    ns = txs.join(F.broadcast(pubs), "kind")
    got = (deliver.select("tx", F.col("n").cast("int").alias("n"), "client").distinct()
           .groupBy("tx", "n").agg(F.sort_array(F.collect_set("client")).alias("got")))
    exp = F.when((F.col("n") == 1) & (F.col("kind") == "dispatch"), F.array("dispatcher")).otherwise(F.array("agent"))
    return (ns.join(got, ["tx", "n"], "left")
            .withColumn("expected", exp)
            .withColumn("got", F.coalesce("got", F.array().cast("array<string>")))
            .where(F.col("got") != F.col("expected"))
            .select("tx", "n", "expected", "got"))


def check_scenario_routing(ctx: AnalysisContext) -> CheckResult:
    v = variant(ctx)
    every = v not in TX_VARIANTS
    viol = routing_violations(ctx.df("tx_begin"), ctx.df("tx_deliver"), outcomes(ctx), every)
    return summarize("transactions.p2_routing",
                     "op1 reaches only D, op2 and op5 only the assigned agent, in every "
                     + ("transaction (BL-WAIT)" if every else "committed transaction") + " (P2)",
                     viol, order=["tx", "n"], details={"transactions": ctx.df("tx_begin").count()})


# ---------------------------------------------------------------------------------- P3
def atomicity_violations(recv: DataFrame, deliver: DataFrame, discard: DataFrame, outcome: DataFrame,
                         outs: DataFrame) -> DataFrame:
    """-> [tx, client, op_id, outcome, delivered, discarded, problem]."""
    pubs = recv.where(F.col("kind").isin("pub", "tcm")).select("tx", "client", "op_id").distinct()
    dl = deliver.groupBy("tx", "client", "op_id").agg(F.count("*").alias("delivered"),
                                                      F.min("t_rel_s").alias("deliver_s"))
    dc = discard.groupBy("tx", "client", "op_id").agg(F.count("*").alias("discarded"))
    oc = (outcome.where(F.col("outcome") == "committed").groupBy("tx", "client")
          .agg(F.min("t_rel_s").alias("commit_s")))
    rows = (pubs.join(dl, ["tx", "client", "op_id"], "full").join(dc, ["tx", "client", "op_id"], "left")
            .join(oc, ["tx", "client"], "left").join(outs.select("tx", "outcome"), "tx", "left")
            .fillna(0, ["delivered", "discarded"]))
    problem = (F.when(F.col("outcome").isNull(), F.lit("no outcome at the TXC"))
               .when((F.col("outcome") == "committed") & (F.col("delivered") != 1), F.lit("not delivered exactly once"))
               .when((F.col("outcome") == "committed") & (F.col("commit_s").isNull() | (F.col("deliver_s") < F.col("commit_s"))),
                     F.lit("delivered before the client's commit"))
               .when((F.col("outcome") == "aborted") & (F.col("delivered") > 0), F.lit("delivered although aborted"))
               .when((F.col("outcome") == "aborted") & (F.col("discarded") == 0), F.lit("received but not discarded")))
    return (rows.withColumn("problem", problem).where(F.col("problem").isNotNull())
            .select("tx", "client", "op_id", "outcome", "delivered", "discarded", "problem"))


def check_delivery_atomicity(ctx: AnalysisContext) -> CheckResult:
    name, desc = "transactions.p3_atomicity", "all or nothing: committed publications delivered once after the commit, aborted ones discarded (P3)"
    v = variant(ctx)
    if v not in TX_VARIANTS:
        return _na(name, desc, f"{v}: no transactions (publications delivered on receipt)")
    viol = atomicity_violations(ctx.df("tx_recv"), ctx.df("tx_deliver"), ctx.df("tx_discard"),
                                ctx.df("tx_outcome"), outcomes(ctx))
    return summarize(name, desc, viol, order=["tx", "client", "op_id"])


# ---------------------------------------------------------------------------------- P4
def agreement_violations(begin: DataFrame, end: DataFrame, phase: DataFrame, proc: DataFrame,
                         outcome: DataFrame, recv: DataFrame, op: DataFrame) -> DataFrame:
    """-> [tx, where, logged, expected]."""
    ends = end.groupBy("tx").agg(F.count("*").alias("n_end"), F.min_by("outcome", "t_rel_s").alias("outcome"),
                                 F.min_by("client", "t_rel_s").alias("txc"))
    b = begin.select("tx").distinct().join(ends, "tx", "left")
    single = (b.where(F.col("n_end").isNull() | (F.col("n_end") != 1))
              .select("tx", F.lit("txc").alias("where"),
                      F.concat(F.coalesce(F.col("n_end"), F.lit(0)).cast("string"), F.lit(" tx_end")).alias("logged"),
                      F.lit("exactly one tx_end").alias("expected")))
    term = (phase.where(F.col("phase").isin("commit", "abort"))
            .select("tx", "node", F.when(F.col("phase") == "commit", "committed").otherwise("aborted").alias("o")))
    brokers = (proc.select("tx", "node").union(phase.select("tx", "node")).distinct()
               .join(term.groupBy("tx", "node").agg(F.sort_array(F.collect_set("o")).alias("os")), ["tx", "node"], "left"))
    bv = (brokers.join(ends.select("tx", "outcome"), "tx")
          .where(F.col("os").isNull() | (F.size("os") != 1) | (F.col("os")[0] != F.col("outcome")))
          .select("tx", F.concat(F.lit("broker "), F.col("node")).alias("where"),
                  F.coalesce(F.array_join("os", ","), F.lit("nothing")).alias("logged"), F.col("outcome").alias("expected")))
    # (operations a broker triggered, Alg 2, are logged with client = that broker: not a client)
    clients = (recv.select("tx", "client").union(op.where(F.col("client") != F.col("node")).select("tx", "client"))
               .distinct()
               .join(ends.select("tx", "txc", "outcome"), "tx").where(F.col("client") != F.col("txc")))
    co = outcome.groupBy("tx", "client").agg(F.sort_array(F.collect_list("outcome")).alias("os"))
    cv = (clients.join(co, ["tx", "client"], "left")
          .where(F.col("os").isNull() | (F.size("os") != 1) | (F.col("os")[0] != F.col("outcome")))
          .select("tx", F.concat(F.lit("client "), F.col("client")).alias("where"),
                  F.coalesce(F.array_join("os", ","), F.lit("nothing")).alias("logged"), F.col("outcome").alias("expected")))
    return single.union(bv).union(cv)


def check_agreement(ctx: AnalysisContext) -> CheckResult:
    name, desc = "transactions.p4_agreement", "one outcome per transaction at the TXC, the same at every broker and client that took part (P4)"
    v = variant(ctx)
    if v not in TX_VARIANTS:
        begin, end = ctx.df("tx_begin"), ctx.df("tx_end")
        viol = (begin.select("tx").distinct().join(end.groupBy("tx").agg(F.count("*").alias("n")), "tx", "left")
                .where(F.col("n").isNull() | (F.col("n") != 1)).select("tx", F.coalesce("n", F.lit(0)).alias("n_end")))
        return summarize(name, desc, viol, order=["tx"])
    viol = agreement_violations(ctx.df("tx_begin"), ctx.df("tx_end"), ctx.df("tx_phase"), ctx.df("tx_proc"),
                                ctx.df("tx_outcome"), ctx.df("tx_recv"), ctx.df("tx_op"))
    ends = ctx.df("tx_end").groupBy("outcome").count().collect()
    return summarize(name, desc, viol, order=["tx", "where"],
                     details={"outcomes": {r["outcome"]: r["count"] for r in ends}})


# ---------------------------------------------------------------------------------- P5 / P7
def replay_violations(op: DataFrame, proc: DataFrame, phase: DataFrame, tables: DataFrame, outs: DataFrame) -> DataFrame:
    """-> [node, table, sub_id (the entry id), expected, actual]: final PRT (sub/usub) and SRT
    (adv/uadv) vs the replay of committed operations, including those a broker triggered (Alg 2: an adv's released
    sub, a uadv's usub). An id no committed operation touched is expected where it was before the
    run's transactions (its first operation here removed it) and nowhere else."""
    write = F.col("kind").isin("sub", "adv")
    ops = (op.where(F.col("kind").isin("sub", "usub", "adv", "uadv"))
           .select("tx", "op_id", F.when(F.col("kind").isin("adv", "uadv"), "srt").otherwise("prt").alias("table"),
                   write.alias("add"), "sub_id").distinct())
    at = proc.select("node", "tx", "op_id", F.col("t_rel_s").alias("proc_s")).join(ops, ["tx", "op_id"])
    commit_s = (phase.where(F.col("phase") == "commit").groupBy("node", "tx").agg(F.min("t_rel_s").alias("commit_s")))
    first = at.groupBy("node", "table", "sub_id").agg(F.min_by("add", "proc_s").alias("first_add"))
    committed = (at.join(outs.where(F.col("outcome") == "committed").select("tx"), "tx")
                 .join(commit_s, ["node", "tx"], "left")
                 .groupBy("node", "table", "sub_id")
                 .agg(F.max_by("add", F.struct(F.coalesce("commit_s", F.lit(1e18)), "proc_s")).alias("last_add")))
    exp = (first.join(committed, ["node", "table", "sub_id"], "left")
           .withColumn("expected", F.when(F.col("last_add").isNotNull(), F.col("last_add"))
                       .otherwise(~F.col("first_add"))))
    last = tables.groupBy("node").agg(F.max_by("prt", "t_rel_s").alias("prt"), F.max_by("srt", "t_rel_s").alias("srt"))
    last_tables = (last.select("node", F.lit("prt").alias("table"),
                               F.explode(F.map_keys(F.from_json("prt", "map<string,string>"))).alias("sub_id"))
                   .union(last.select("node", F.lit("srt").alias("table"),
                                      F.explode(F.map_keys(F.from_json("srt", "map<string,string>"))).alias("sub_id")))
                   .withColumn("actual", F.lit(True)))
    nodes = tables.select("node").distinct()
    return (exp.join(nodes, "node").join(last_tables, ["node", "table", "sub_id"], "left")
            .withColumn("actual", F.coalesce("actual", F.lit(False)))
            .where(F.col("expected") != F.col("actual"))
            .select("node", "table", "sub_id", "expected", "actual"))


def check_routing_state(ctx: AnalysisContext) -> CheckResult:
    name = "transactions.p5_tables"
    desc = ("each broker's final PRT and SRT equal the replay of committed operations only "
            "(P5; for S-TX also P7, convergence)")
    v = variant(ctx)
    if v not in TX_VARIANTS:
        return _na(name, desc, f"{v}: no transactional routing state")
    viol = replay_violations(ctx.df("tx_op"), ctx.df("tx_proc"), ctx.df("tx_phase"), ctx.df("tx_tables"), outcomes(ctx))
    return summarize(name, desc, viol, order=["node", "table", "sub_id"],
                     details={"brokers_with_tables": ctx.df("tx_tables").select("node").distinct().count()})


# ---------------------------------------------------------------------------------- P6
def commit_order_violations(phase: DataFrame) -> DataFrame:
    """-> [tx1, tx2, node_12, node_21]: two brokers committed tx1, tx2 in opposite orders.

    A broker's first commit of a transaction counts (a restarted broker re-learns outcomes)."""
    c = (phase.where(F.col("phase") == "commit").groupBy("node", "tx")
         .agg(F.min_by("m", "t_rel_s").alias("m"), F.min("t_rel_s").alias("t_rel_s")))
    a, b = c.alias("a"), c.alias("b")
    before = (a.join(b, (F.col("a.node") == F.col("b.node")) & (F.col("a.tx") != F.col("b.tx"))
                     & (F.struct("a.t_rel_s", "a.m") < F.struct("b.t_rel_s", "b.m")))
              .select(F.col("a.node").alias("node"), F.col("a.tx").alias("tx1"), F.col("b.tx").alias("tx2")))
    x, y = before.alias("x"), before.alias("y")
    return (x.join(y, (F.col("x.tx1") == F.col("y.tx2")) & (F.col("x.tx2") == F.col("y.tx1")))
            .where(F.col("x.tx1") < F.col("x.tx2"))
            .select(F.col("x.tx1").alias("tx1"), F.col("x.tx2").alias("tx2"),
                    F.col("x.node").alias("node_12"), F.col("y.node").alias("node_21")))


def both_subscribers(begin: DataFrame, deliver: DataFrame, outs: DataFrame) -> DataFrame:
    """-> [tx, op_id, dispatcher, agent]: a committed probe publication (a conflict run) delivered
    to both the dispatch's old subscriber D and its new one A (§3.3: sub, pub, usub interleaved)."""
    probes = (begin.where(F.col("kind") == "probe").select("tx", "dispatcher", "agent")
              .join(outs.where(F.col("outcome") == "committed").select("tx"), "tx"))
    got = deliver.groupBy("tx", "op_id").agg(F.collect_set("client").alias("got"))
    return (probes.join(got, "tx")
            .where(F.array_contains("got", F.col("dispatcher")) & F.array_contains("got", F.col("agent")))
            .select("tx", "op_id", "dispatcher", "agent"))


def p6_violations(phase: DataFrame, begin: DataFrame, deliver: DataFrame, outs: DataFrame) -> DataFrame:
    """-> [tx, what]: both halves of P6 (commits in opposite orders: ``tx`` = the first of the pair)."""
    order = commit_order_violations(phase).select(
        F.col("tx1").alias("tx"), F.concat(F.lit("committed in opposite orders with "), F.col("tx2"), F.lit(" at "),
                                           F.col("node_12"), F.lit(" and "), F.col("node_21")).alias("what"))
    both = both_subscribers(begin, deliver, outs).select(
        "tx", F.concat(F.col("op_id"), F.lit(" delivered to both the old subscriber "), F.col("dispatcher"),
                       F.lit(" and the new one "), F.col("agent")).alias("what"))
    return order.union(both)


def check_commit_order(ctx: AnalysisContext) -> CheckResult:
    v = variant(ctx)
    desc = ("every broker commits transactions in the same order, and (a conflict run) no committed publication "
            "reaches both the old and the new subscriber (P6, required for D-TX)")
    if v not in TX_VARIANTS:
        return _na("transactions.p6_commit_order", desc, f"{v}: no commits")
    viol = p6_violations(ctx.df("tx_phase"), ctx.df("tx_begin"), ctx.df("tx_deliver"), outcomes(ctx)).cache()
    n = viol.count()
    required = v == "dtx"
    probes = ctx.df("tx_begin").where(F.col("kind") == "probe").count()
    details = {"required": required, "violations_found": n, "probes": probes}
    if probes:
        details["probe_outcomes"] = {r["outcome"]: r["count"] for r in outcomes(ctx).join(
            ctx.df("tx_begin").where(F.col("kind") == "probe").select("tx"), "tx").groupBy("outcome").count().collect()}
        details["conflicts_flagged"] = ctx.df("tx_phase").where(F.col("conflict")).select("tx").distinct().count()
    return CheckResult(name="transactions.p6_commit_order", passed=n == 0 or not required, violations=n if required else 0,
                       examples=summarize("x", "", viol, order=["tx", "what"], count=n).examples if n else [],
                       description=desc, details=details)


# ---------------------------------------------------------------------------------- P9
def check_no_aborts(ctx: AnalysisContext) -> CheckResult:
    name, desc = "transactions.p9_no_aborts", "no transaction aborts (or, BL-WAIT, times out) in a run without explicit aborts or faults (P9)"
    params = ctx.plan.get("params") or {}
    end = ctx.df("tx_end")
    lat = [r["latency_ms"] for r in end.where((F.col("outcome") == "committed") & (F.col("latency_ms") >= 0))
           .select("latency_ms").collect()]
    span = end.agg(F.min("t_rel_s").alias("lo"), F.max("t_rel_s").alias("hi")).first()
    details = {"committed": len(lat), "mean_latency_ms": round(sum(lat) / len(lat), 3) if lat else None,
               "p50_latency_ms": sorted(lat)[len(lat) // 2] if lat else None}
    if lat and span["hi"] is not None and span["hi"] > span["lo"]:
        details["throughput_tx_s"] = round(len(lat) / (span["hi"] - span["lo"]), 3)
    ctx.results["transactions.summary"] = details
    if int(params.get("abort_every") or 0) > 0 or ctx.plan.get("actions") or params.get("conflict"):
        return CheckResult(name=name, passed=True, violations=0, description=desc,
                           details={**details, "applies": False,
                                    "why": "explicit aborts, faults or a conflict workload in the plan"})
    viol = end.where(F.col("outcome") != "committed").select("tx", "outcome", "reason")
    return summarize(name, desc, viol, order=["tx"], details=details)


CHECKS = [check_sequential_consistency, check_scenario_routing, check_delivery_atomicity, check_agreement,
          check_routing_state, check_commit_order, check_no_aborts, *PUBSUB]
