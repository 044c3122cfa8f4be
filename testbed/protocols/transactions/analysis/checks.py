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
from pyspark.sql import Window
from pyspark.sql import functions as F

from testbed.analysis.checks import CheckResult, summarize, tally
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
            .agg(F.min_by("outcome", "t_rel_s").alias("outcome"), F.min_by("client", "t_rel_s").alias("txc"),
                 F.min("t_rel_s").alias("decided_s")))


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


def lifetimes(tx_proc: DataFrame, starts: DataFrame | None = None) -> DataFrame:
    """tx_proc + ``life``: the broker process lifetime each row comes from (0, 1, ... per node).
    From the runtime's ``node_start`` (one per process start, ``starts``) where the node logged
    any: the number of its starts before the row. Else (a history without them, e.g. the
    in-memory harness): the counter ``k`` starts at 1 in each process, so each row with ``k`` = 1
    (in time order) begins a lifetime."""
    if starts is not None:
        st = starts.select("node", F.col("t_rel_s").alias("_st"))
        with_starts = tx_proc.join(st.select("node").distinct(), "node")
        if with_starts.limit(1).count():
            cols = tx_proc.columns
            counted = (with_starts.join(st, "node")
                       .groupBy(*cols).agg(F.sum(F.when(F.col("_st") <= F.col("t_rel_s"), 1).otherwise(0))
                                            .alias("life")))
            rest = tx_proc.join(st.select("node").distinct(), "node", "left_anti")
            return counted.unionByName(lifetimes(rest))
    w = Window.partitionBy("node").orderBy("t_rel_s", "k")
    new = F.when(F.col("k") == 1, 1).otherwise(0)
    return (tx_proc.withColumn("_new", new)
            .withColumn("life", F.sum("_new").over(w.rowsBetween(Window.unboundedPreceding, 0)))
            .drop("_new"))


def order_violations(pairs: DataFrame, tx_proc: DataFrame, starts: DataFrame | None = None) -> DataFrame:
    """-> [node, tx, a, b, k_a, k_b]: a <SO b both processed at node in one process lifetime, b
    first (counters of two lifetimes are not comparable: a restarted broker counts from 1)."""
    p = lifetimes(tx_proc.select("node", "tx", "op_id", "k", "t_rel_s"), starts)
    pa = p.select("node", "life", "tx", F.col("op_id").alias("a"), F.col("k").alias("k_a"))
    pb = p.select("node", "life", "tx", F.col("op_id").alias("b"), F.col("k").alias("k_b"))
    return (pairs.join(pa, ["tx", "a"]).join(pb, ["node", "life", "tx", "b"])
            .where(F.col("k_a") > F.col("k_b")).select("node", "tx", "a", "b", "k_a", "k_b"))


def check_sequential_consistency(ctx: AnalysisContext) -> CheckResult:
    name, desc = "transactions.p1_order", "every broker processes a before b for every pair a <SO b (P1)"
    v = variant(ctx)
    if v not in TX_VARIANTS:
        return _na(name, desc, f"{v}: plain brokers log no tx_proc (reported, not required)")
    pairs = required_order(ctx.df("tx_op")).cache()
    viol = order_violations(pairs, ctx.df("tx_proc"), ctx.df("node_start"))
    n = tally({"pairs": pairs, "v": viol})
    return summarize(name, desc, viol, order=["tx", "node", "a"], count=n["v"], details={"pairs": n["pairs"]})


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


NO_RECOVERY = ("BL-WAIT has no recovery: it is the plain pub/sub broker, without transaction messages (the "
               "paper's baseline, §7, \"not a viable, competing solution\"; neither the paper nor the spec gives it "
               "one: durability is out of scope, §3.1, App. A.2), so a publication lost with a crashed broker, or "
               "sent on a route the crash cut, is never sent again (docs/transactions.md, \"BL-WAIT and faults\")")


def no_recovery_finding(v: str, plan: dict, check: str, violations: int) -> str | None:
    """The finding a failed check carries when it is BL-WAIT's missing recovery: P2 of a BL-WAIT
    run with faults (crash, restart, cut, ...). The check still fails: this names why, in the
    report's findings and in the sweep's summary, per variant; it never turns a failure into a pass."""
    if v != "blwait" or not plan.get("actions") or check != "transactions.p2_routing" or not violations:
        return None
    return (f"{NO_RECOVERY}: {violations} scenario publication(s) not routed as the scenario needs "
            f"in a run with faults; P2 fails")


def check_scenario_routing(ctx: AnalysisContext) -> CheckResult:
    v = variant(ctx)
    every = v not in TX_VARIANTS
    name = "transactions.p2_routing"
    viol = routing_violations(ctx.df("tx_begin"), ctx.df("tx_deliver"), outcomes(ctx), every).cache()
    # every count of this check in one Spark job (tally)
    c = tally({"v": viol, "transactions": ctx.df("tx_begin"), "lost": viol.where(F.size("got") == 0),
               "failed": viol.select("tx").distinct()})
    n = c["v"]
    details: dict = {"transactions": c["transactions"]}
    finding = no_recovery_finding(v, ctx.plan, name, n)
    if finding:
        lost = c["lost"]
        details.update(finding=finding, lost=lost, misrouted=n - lost, transactions_failed=c["failed"])
    return summarize(name,
                     "op1 reaches only D, op2 and op5 only the assigned agent, in every "
                     + ("transaction (BL-WAIT)" if every else "committed transaction") + " (P2)",
                     viol, order=["tx", "n"], details=details, count=n)


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


# ------------------------------------------------------------------- P3 on the expected recipients
def decisions(begin: DataFrame, outcome: DataFrame) -> DataFrame:
    """-> [tx, client, thread, kind, agent, dispatcher, node, begin_m, decided, decided_m]: each
    transaction with its TXC's decision (its own tx_outcome, logged on the TXC's process:
    ``decided_m`` orders the decisions of one TXC)."""
    b = begin.groupBy("tx").agg(*[F.min_by(c, "t_rel_s").alias(c) for c in
                                  ("client", "thread", "kind", "agent", "dispatcher", "node", "m")])
    b = b.withColumnRenamed("m", "begin_m").withColumn("kind", F.coalesce("kind", F.lit("dispatch")))
    d = (outcome.alias("o").join(b.select("tx", "client").alias("x"),
                                 (F.col("o.tx") == F.col("x.tx")) & (F.col("o.client") == F.col("x.client")))
         .groupBy(F.col("o.tx").alias("tx"))
         .agg(F.min_by("o.outcome", "o.m").alias("decided"), F.min("o.m").alias("decided_m")))
    return b.join(d, "tx", "left")


def probe_dispatch(dec: DataFrame) -> DataFrame:
    """-> [tx (the probe), disp, disp_decided, disp_decided_m, ...probe columns]: a conflict run's
    probe with the dispatch it publishes into: the TXC thread's last dispatch begun before it."""
    probes = dec.where(F.col("kind") == "probe")
    disp = dec.where(F.col("kind") == "dispatch").select(
        F.col("tx").alias("disp"), F.col("client").alias("dc"), F.col("thread").alias("dt"),
        F.col("begin_m").alias("db"), F.col("decided").alias("disp_decided"),
        F.col("decided_m").alias("disp_decided_m"))
    j = probes.join(disp, (F.col("client") == F.col("dc")) & (F.col("thread") == F.col("dt"))
                    & (F.col("db") <= F.col("begin_m")))
    w = Window.partitionBy("tx").orderBy(F.col("db").desc())
    return j.withColumn("_r", F.row_number().over(w)).where(F.col("_r") == 1).drop("_r", "dc", "dt", "db")


def expected_violations(begin: DataFrame, outcome: DataFrame, deliver: DataFrame) -> DataFrame:
    """-> [tx, op_id, expected, got]: a publication of a transaction its TXC committed that did
    not reach a client it must reach: the dispatch's op1 D, op2 and op5 the agent; advpub's op1
    and op4 its subscriber; a probe's op6 the dispatcher or the agent (one of them)."""
    dec = decisions(begin, outcome).where(F.col("decided") == "committed")
    spark = begin.sparkSession
    pubs = spark.createDataFrame([("dispatch", 1, "d"), ("dispatch", 2, "a"), ("dispatch", 5, "a"),
                                  ("advpub", 1, "a"), ("advpub", 4, "a"), ("probe", 6, "either")],
                                 "kind string, n int, who string")
    exp = dec.join(F.broadcast(pubs), "kind").withColumn(
        "op_id", F.concat("tx", F.lit("/"), F.col("n").cast("string"))).withColumn(
        "expected", F.when(F.col("who") == "d", F.array("dispatcher"))
        .when(F.col("who") == "a", F.array("agent")).otherwise(F.array("dispatcher", "agent")))
    got = deliver.groupBy("tx", "op_id").agg(F.sort_array(F.collect_set("client")).alias("got"))
    rows = (exp.join(got, ["tx", "op_id"], "left")
            .withColumn("got", F.coalesce("got", F.array().cast("array<string>"))))
    hit = F.size(F.array_intersect("expected", "got"))
    bad = F.when(F.col("who") == "either", hit == 0).otherwise(hit < F.size("expected"))
    return rows.where(bad).select("tx", "op_id", "expected", "got")


def check_expected_delivery(ctx: AnalysisContext) -> CheckResult:
    name = "transactions.p3_expected"
    desc = ("every publication of a committed transaction (the TXC's decision) reaches the clients it "
            "must reach, whatever they received (P3 on the expected recipients)")
    v = variant(ctx)
    if v not in TX_VARIANTS:
        return _na(name, desc, f"{v}: no transactions")
    viol = expected_violations(ctx.df("tx_begin"), ctx.df("tx_outcome"), ctx.df("tx_deliver"))
    return summarize(name, desc, viol, order=["tx", "op_id"])


# ------------------------------------------------------------------ serial order (§3.3, D-TX)
def serial_order_violations(begin: DataFrame, outcome: DataFrame, deliver: DataFrame) -> DataFrame:
    """-> [tx, disp, after_dispatch, expected, got]: a committed probe whose delivery does not
    follow the serial order of the TXC's decisions (§3.3: if t1 commits before t2, t2 reads t1's
    writes): decided after its dispatch committed, it must reach the agent (the dispatch's sub)
    and not the dispatcher; decided before (or the dispatch aborted), the dispatcher and not the
    agent."""
    pd = probe_dispatch(decisions(begin, outcome)).where(F.col("decided") == "committed")
    after = (F.col("disp_decided") == "committed") & (F.col("disp_decided_m") < F.col("decided_m"))
    pd = pd.withColumn("after_dispatch", F.coalesce(after, F.lit(False))).withColumn(
        "expected", F.when(F.col("after_dispatch"), F.col("agent")).otherwise(F.col("dispatcher")))
    got = (deliver.join(pd.select("tx", "agent", "dispatcher"), "tx")
           .where(F.col("client").isin(F.col("agent"), F.col("dispatcher")))
           .groupBy("tx").agg(F.sort_array(F.collect_set("client")).alias("got")))
    return (pd.join(got, "tx", "left").withColumn("got", F.coalesce("got", F.array().cast("array<string>")))
            .where(F.col("got") != F.array("expected"))
            .select("tx", "disp", "after_dispatch", "expected", "got"))


def check_serial_order(ctx: AnalysisContext) -> CheckResult:
    name = "transactions.p6_serial_order"
    desc = ("a conflict run's committed probe reaches the subscriber the TXC's commit order gives it: the "
            "agent if decided after its dispatch committed, the dispatcher if before (§3.3; required for D-TX)")
    v = variant(ctx)
    probes = ctx.df("tx_begin").where(F.col("kind") == "probe").count()
    if v not in TX_VARIANTS or not probes:
        return _na(name, desc, f"{v}: no conflict workload" if v in TX_VARIANTS else f"{v}: no commits")
    viol = serial_order_violations(ctx.df("tx_begin"), ctx.df("tx_outcome"), ctx.df("tx_deliver")).cache()
    n = viol.count()
    required = v == "dtx"
    return CheckResult(name=name, passed=n == 0 or not required, violations=n if required else 0,
                       examples=summarize("x", "", viol, order=["tx"], count=n).examples if n else [],
                       description=desc, details={"required": required, "violations_found": n, "probes": probes})


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
    n = tally({"v": viol, "outcomes": (ctx.df("tx_end"), "outcome")})
    return summarize(name, desc, viol, order=["tx", "where"], count=n["v"], details={"outcomes": n["outcomes"]})


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
    won = outs.where(F.col("outcome") == "committed")
    committed = (at.join(won.select("tx"), "tx")
                 .join(commit_s, ["node", "tx"], "left")
                 .groupBy("node", "table", "sub_id")
                 .agg(F.max_by("add", F.struct(F.coalesce("commit_s", F.lit(1e18)), "proc_s")).alias("last_add")))
    # from the decisions: an entry whose last committed operation (in the TXCs' decision order)
    # removed it is expected nowhere, also at a broker that operation never reached
    # (client operations only: a usub a broker triggered, Alg 2, withdraws a subscription from
    # upstream brokers, while the subscriber's own broker rightly keeps it)
    by_client = (op.where(F.col("client") != F.col("node")).select("tx", "op_id").distinct()
                 .join(ops, ["tx", "op_id"]))
    removed = (by_client.join(won.select("tx", "decided_s"), "tx").groupBy("table", "sub_id")
               .agg(F.max_by("add", "decided_s").alias("global_add"))
               .where(~F.col("global_add")).select("table", "sub_id", F.lit(True).alias("removed")))
    exp = (first.join(committed, ["node", "table", "sub_id"], "left")
           .join(removed, ["table", "sub_id"], "left")
           .withColumn("expected", F.when(F.col("removed").isNotNull(), F.lit(False))
                       .when(F.col("last_add").isNotNull(), F.col("last_add"))
                       .otherwise(~F.col("first_add")))
           .select("node", "table", "sub_id", "expected"))
    last = tables.groupBy("node").agg(F.max_by("prt", "t_rel_s").alias("prt"), F.max_by("srt", "t_rel_s").alias("srt"))
    last_tables = (last.select("node", F.lit("prt").alias("table"),
                               F.explode(F.map_keys(F.from_json("prt", "map<string,string>"))).alias("sub_id"))
                   .union(last.select("node", F.lit("srt").alias("table"),
                                      F.explode(F.map_keys(F.from_json("srt", "map<string,string>"))).alias("sub_id")))
                   .withColumn("actual", F.lit(True)))
    # where such an entry is still in a final table without any operation of it here
    nowhere = (last_tables.select("node", "table", "sub_id").join(removed.select("table", "sub_id"), ["table", "sub_id"])
               .join(exp, ["node", "table", "sub_id"], "left_anti").withColumn("expected", F.lit(False)))
    exp = exp.unionByName(nowhere.select("node", "table", "sub_id", "expected"))
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
    n = tally({"v": viol, "brokers": ctx.df("tx_tables").select("node").distinct()})
    return summarize(name, desc, viol, order=["node", "table", "sub_id"], count=n["v"],
                     details={"brokers_with_tables": n["brokers"]})


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
    required = v == "dtx"
    probe_txs = ctx.df("tx_begin").where(F.col("kind") == "probe")
    # every count of this check in one Spark job (tally)
    c = tally({"v": viol, "probes": probe_txs,
               "probe_outcomes": (outcomes(ctx).join(probe_txs.select("tx"), "tx"), "outcome"),
               "conflicts": ctx.df("tx_phase").where(F.col("conflict")).select("tx").distinct()})
    n, probes = c["v"], c["probes"]
    details = {"required": required, "violations_found": n, "probes": probes}
    if probes:
        details["probe_outcomes"] = c["probe_outcomes"]
        details["conflicts_flagged"] = c["conflicts"]
    return CheckResult(name="transactions.p6_commit_order", passed=n == 0 or not required, violations=n if required else 0,
                       examples=summarize("x", "", viol, order=["tx", "what"], count=n).examples if n else [],
                       description=desc, details=details)


# ---------------------------------------------------------------------------------- P9
def check_no_aborts(ctx: AnalysisContext) -> CheckResult:
    name, desc = "transactions.p9_no_aborts", "no transaction aborts (or, BL-WAIT, times out) in a run without explicit aborts or faults (P9)"
    params = ctx.plan.get("params") or {}
    end = ctx.df("tx_end")
    # the TXCs' tx_end rows once (one Spark job): latencies, span and the violations' count from them
    rows = end.select("outcome", "latency_ms", "t_rel_s").collect()
    lat = [r["latency_ms"] for r in rows if r["outcome"] == "committed" and r["latency_ms"] is not None
           and r["latency_ms"] >= 0]
    ts = [r["t_rel_s"] for r in rows if r["t_rel_s"] is not None]
    span = {"lo": min(ts) if ts else None, "hi": max(ts) if ts else None}
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
    n = sum(1 for r in rows if r["outcome"] is not None and r["outcome"] != "committed")
    return summarize(name, desc, viol, order=["tx"], details=details, count=n)


CHECKS = [check_sequential_consistency, check_scenario_routing, check_delivery_atomicity,
          check_expected_delivery, check_agreement, check_routing_state, check_commit_order,
          check_serial_order, check_no_aborts, *PUBSUB]
