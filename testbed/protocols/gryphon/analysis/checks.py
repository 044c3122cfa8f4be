"""History checks of Gryphon exactly-once delivery (Bhola et al.).

Read only the history: ``g_logged`` (what the PHB made stable = published),
``g_subscribe`` and ``g_deliver`` (what each subscriber got, in receive order).
A subscriber "stays connected" unless its SHB (or its own client process) was
crashed or restarted by the fault schedule; the properties are checked for
every subscriber that stays connected, across every injected failure.

* exactly_once   no (subscriber, pubend, tick) is delivered twice
* published      every delivered message was logged (published) at its pubend
* tick_order     per (subscriber, pubend), ticks arrive strictly increasing
* gapless        per (subscriber, pubend), every published message matching the
                 subscription with a tick below the latest delivered one was delivered
* complete       every matching message published at least ``settle`` after the
                 subscription and ``travel_margin`` before the workload end was delivered

Filters: the empty filter and ``[k,eq,v]`` (the workloads' keyed attribute, logged
as ``keys``) are checked exactly; a subscriber with another filter is counted as
unverifiable in the details of gapless/complete (and is not judged there).
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.checks import CheckResult, summarize
from testbed.analysis.context import AnalysisContext


# -- transforms ------------------------------------------------------------------------
def published(logged: DataFrame) -> DataFrame:
    """g_logged -> [pubend, tick, seq, key, logged_s]: one row per published (stable) message."""
    z = F.arrays_zip(F.col("ticks").alias("tick"), F.col("seqs").alias("seq"), F.col("keys").alias("key"))
    return (
        logged.select("pubend", "t_rel_s", F.explode(z).alias("x"))
        .select("pubend", F.col("x.tick").alias("tick"), F.col("x.seq").alias("seq"),
                F.col("x.key").alias("key"), "t_rel_s")
        .groupBy("pubend", "tick")
        .agg(F.min("seq").alias("seq"), F.min("key").alias("key"), F.min("t_rel_s").alias("logged_s"))
        .select("pubend", "tick", "seq", "key", "logged_s")
    )


def duplicates(deliver: DataFrame) -> DataFrame:
    """-> [client, pubend, tick, deliveries]"""
    return (
        deliver.groupBy("client", "pubend", "tick").agg(F.count("*").alias("deliveries"))
        .where(F.col("deliveries") > 1).select("client", "pubend", "tick", "deliveries")
    )


def unpublished(deliver: DataFrame, pubs: DataFrame) -> DataFrame:
    """-> [client, pubend, tick, deliver_s]: deliveries of messages never logged."""
    return (
        deliver.select("client", "pubend", "tick", F.col("t_rel_s").alias("deliver_s"))
        .join(pubs.select("pubend", "tick"), on=["pubend", "tick"], how="left_anti")
        .select("client", "pubend", "tick", "deliver_s")
    )


def order_violations(deliver: DataFrame) -> DataFrame:
    """-> [client, pubend, tick, prev_tick, deliver_s]: a tick not above the one delivered before it."""
    w = Window.partitionBy("client", "pubend").orderBy("t", "m")
    return (
        deliver.select("client", "pubend", "tick", "t", "m", "t_rel_s")
        .withColumn("prev_tick", F.lag("tick").over(w))
        .where(F.col("prev_tick").isNotNull() & (F.col("tick") <= F.col("prev_tick")))
        .select("client", "pubend", "tick", "prev_tick", F.col("t_rel_s").alias("deliver_s"))
    )


def expected(subs: DataFrame, pubs: DataFrame) -> DataFrame:
    """[client, all, key_eq, sub_s] x published -> [client, pubend, tick, logged_s, sub_s]: every
    (subscriber, message) pair its filter selects."""
    p = pubs.select("pubend", "tick", "key", "logged_s")
    s = subs.select("client", "all", "key_eq", "sub_s")
    every = s.where(F.col("all")).drop("all", "key_eq").crossJoin(p)
    keyed = (s.where(~F.col("all") & F.col("key_eq").isNotNull())
             .join(p, on=F.col("key") == F.col("key_eq"), how="inner"))  # an equi-join
    cols = ["client", "pubend", "tick", "logged_s", "sub_s"]
    return every.select(*cols).unionByName(keyed.select(*cols))


def gaps(exp: DataFrame, deliver: DataFrame) -> DataFrame:
    """-> [client, pubend, tick, logged_s]: expected messages below the latest delivered tick of
    that (subscriber, pubend) that were never delivered."""
    top = deliver.groupBy("client", "pubend").agg(F.max("tick").alias("top"))
    return (
        exp.join(top, on=["client", "pubend"], how="inner").where(F.col("tick") < F.col("top"))
        .join(deliver.select("client", "pubend", "tick"), on=["client", "pubend", "tick"], how="left_anti")
        .select("client", "pubend", "tick", "logged_s")
    )


def missing(exp: DataFrame, deliver: DataFrame, *, settle_s: float, margin_s: float, end_s: float) -> DataFrame:
    """-> [client, pubend, tick, logged_s]: expected messages (published settle_s after the
    subscription and margin_s before the end) never delivered."""
    return (
        exp.where((F.col("logged_s") >= F.col("sub_s") + F.lit(settle_s))
                  & (F.col("logged_s") + F.lit(margin_s) <= F.lit(end_s)))
        .join(deliver.select("client", "pubend", "tick"), on=["client", "pubend", "tick"], how="left_anti")
        .select("client", "pubend", "tick", "logged_s")
    )


# -- subscribers ------------------------------------------------------------------------
def classify_filter(text: str | None) -> tuple[bool, int | None, bool]:
    """(everything, k equality value, verifiable) of a logged subscription filter (JSON)."""
    try:
        spec = json.loads(text) if text else []
    except (TypeError, ValueError):
        return False, None, False
    if not spec:
        return True, None, True
    if len(spec) == 1 and list(spec[0][:2]) == ["k", "eq"] and isinstance(spec[0][2], int):
        return False, int(spec[0][2]), True
    return False, None, False


def disconnected_nodes(plan: dict[str, Any]) -> set[str]:
    """Nodes the schedule crashes or restarts: their subscribers do not stay connected."""
    out: set[str] = set()
    for a in plan.get("actions") or ():
        if a.get("op") in ("crash", "restart"):
            out.update(a.get("target") or ())
    return out


def subscribers(ctx: AnalysisContext) -> tuple[DataFrame, dict[str, Any]]:
    """-> ([client, all, key_eq, sub_s] of verifiable subscribers that stay connected, details)."""
    key = "gryphon.subscribers"
    if key in ctx.results:
        return ctx.results[key]
    gone = disconnected_nodes(ctx.plan)
    rows = (ctx.df("g_subscribe").groupBy("client")
            .agg(F.min_by("filter", "t_rel_s").alias("filter"), F.min_by("broker", "t_rel_s").alias("broker"),
                 F.min("t_rel_s").alias("sub_s")).collect())
    out, unverifiable, excluded = [], 0, 0
    for r in rows:
        if r["broker"] in gone:
            excluded += 1
            continue
        every, k, ok = classify_filter(r["filter"])
        if not ok:
            unverifiable += 1
            continue
        out.append((r["client"], every, k, float(r["sub_s"])))
    df = ctx.spark.createDataFrame(out, "client string, all boolean, key_eq long, sub_s double")
    details = {"subscribers": len(rows), "checked": len(out), "unverifiable_filters": unverifiable,
               "not_connected_throughout": excluded, "disconnected_nodes": sorted(gone)}
    ctx.results[key] = (df, details)
    return ctx.results[key]


def _pubs(ctx: AnalysisContext) -> DataFrame:
    if "gryphon.pubs" not in ctx.results:
        ctx.results["gryphon.pubs"] = published(ctx.df("g_logged")).cache()
    return ctx.results["gryphon.pubs"]


def _checked_deliveries(ctx: AnalysisContext) -> DataFrame:
    subs, _ = subscribers(ctx)
    return ctx.df("g_deliver").join(subs.select("client"), on="client", how="left_semi")


# -- checks ---------------------------------------------------------------------------
def check_exactly_once(ctx: AnalysisContext) -> CheckResult:
    v = duplicates(_checked_deliveries(ctx))
    return summarize("exactly_once", "no subscriber gets the same (pubend, tick) twice", v,
                     order=["client", "pubend", "tick"], details=subscribers(ctx)[1])


def check_published(ctx: AnalysisContext) -> CheckResult:
    v = unpublished(ctx.df("g_deliver"), _pubs(ctx))
    return summarize("published", "every delivered message was logged (published) at its PHB", v,
                     order=["deliver_s", "client"])


def check_tick_order(ctx: AnalysisContext) -> CheckResult:
    v = order_violations(_checked_deliveries(ctx))
    return summarize("tick_order", "per (subscriber, pubend) ticks are delivered in increasing order", v,
                     order=["deliver_s", "client"])


def check_gapless(ctx: AnalysisContext) -> CheckResult:
    subs, details = subscribers(ctx)
    v = gaps(expected(subs, _pubs(ctx)), _checked_deliveries(ctx))
    return summarize("gapless", "no matching published message is skipped below the latest delivered tick",
                     v, order=["logged_s", "client"], details=details)


def check_complete(ctx: AnalysisContext) -> CheckResult:
    subs, details = subscribers(ctx)
    exp = expected(subs, _pubs(ctx))
    v = missing(exp, _checked_deliveries(ctx), settle_s=ctx.settle_s, margin_s=ctx.options.travel_margin_s,
                end_s=ctx.end_s)
    return summarize("complete", "every matching message published while the subscriber was connected "
                     "(settle .. end - margin) was delivered", v, order=["logged_s", "client"],
                     details=details)


CHECKS = [check_exactly_once, check_published, check_tick_order, check_gapless, check_complete]
