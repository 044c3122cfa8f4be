"""History checks of the content-based pub/sub core.

Transforms (DataFrame -> DataFrame, ``select`` at entry and exit) compute the
violation rows; the ``check_*`` functions wrap them into a :class:`CheckResult`.
Times are ``t_rel_s`` (seconds from the workload start, clock-corrected).

* no_duplicates     a client receives a publication at most once
* filter_match      every delivery matches a subscription the client issued before it
* fifo              per (subscriber, publisher), deliveries arrive in publication order
* completeness      every publication that matched a subscription active throughout its
                    travel was delivered; a miss inside a fault window is *attributed*
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.checks import CheckResult, summarize
from testbed.analysis.context import AnalysisContext
from testbed.analysis.filters import match_pairs


# -- transforms ------------------------------------------------------------------------
def delivery_pairs(deliver: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """deliver -> [client, pub_id, deliveries, first_s, last_s]: one row per (client, publication)
    received. no_duplicates, filter_match and completeness all read this one aggregation.

    ``by``: extra key columns (``("run_id",)`` for many runs at once, ``batch_checks``) that every
    transform here groups, joins and partitions on too, and keeps first in its output."""
    return (
        deliver.select(*by, "client", "pub_id", "t_rel_s")
        .groupBy(*by, "client", "pub_id")
        .agg(F.count("*").alias("deliveries"), F.min("t_rel_s").alias("first_s"), F.max("t_rel_s").alias("last_s"))
        .select(*by, "client", "pub_id", "deliveries", "first_s", "last_s")
    )


def duplicates_of(pairs: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """:func:`delivery_pairs` -> the pairs delivered twice or more."""
    return pairs.where(F.col("deliveries") > 1).select(*by, "client", "pub_id", "deliveries", "first_s", "last_s")


def duplicate_deliveries(deliver: DataFrame) -> DataFrame:
    """deliver -> [client, pub_id, deliveries, first_s, last_s] for each publication received twice or more."""
    return duplicates_of(delivery_pairs(deliver))


def subscriptions(subscribe: DataFrame, unsubscribe: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """-> [client, sub_id, filter, sub_s, unsub_s]: one row per subscription; unsub_s null while active.

    A subscription re-issued with the same id (e.g. after a client restart) counts from its first issue;
    it ends at the first unsubscribe of that id after it.
    """
    subs = (
        subscribe.select(*by, "client", "sub_id", "filter", "t_rel_s")
        .groupBy(*by, "client", "sub_id")
        .agg(F.min_by("filter", "t_rel_s").alias("filter"), F.min("t_rel_s").alias("sub_s"))
    )
    uns = unsubscribe.select(*by, "client", "sub_id", F.col("t_rel_s").alias("u_s"))
    return (
        subs.join(uns, on=[*by, "client", "sub_id"], how="left")
        .where(F.col("u_s").isNull() | (F.col("u_s") >= F.col("sub_s")))
        .groupBy(*by, "client", "sub_id", "filter", "sub_s")
        .agg(F.min("u_s").alias("unsub_s"))
        .select(*by, "client", "sub_id", "filter", "sub_s", "unsub_s")
    )


def publications(publish: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """publish -> [pub_id, publisher, seq, attrs, pub_s] (the first publish of each id)."""
    return (
        publish.select(*by, "pub_id", "client", "seq", "attrs", "t_rel_s")
        .groupBy(*by, "pub_id")
        .agg(F.min_by("client", "t_rel_s").alias("publisher"), F.min_by("seq", "t_rel_s").alias("seq"),
             F.min_by("attrs", "t_rel_s").alias("attrs"), F.min("t_rel_s").alias("pub_s"))
        .select(*by, "pub_id", "publisher", "seq", "attrs", "pub_s")
    )


def non_matching_deliveries(deliver: DataFrame, subs: DataFrame, pubs: DataFrame, matches: DataFrame) -> DataFrame:
    """-> [client, pub_id, deliver_s, filters]: deliveries of a known publication that match no subscription
    the client issued before receiving it (``filters`` lists the client's filters, empty if it had none)."""
    return non_matching_pairs(delivery_pairs(deliver), subs, pubs, matches)


def non_matching_pairs(pairs: DataFrame, subs: DataFrame, pubs: DataFrame, matches: DataFrame) -> DataFrame:
    """:func:`non_matching_deliveries` from :func:`delivery_pairs` (``first_s`` is the delivery time)."""
    j = _judged_pairs(pairs, subs, pubs, matches)
    return j.where(F.col("_known") & ~F.col("_ok")).select("client", "pub_id", "deliver_s", "filters")


def _judged_pairs(pairs: DataFrame, subs: DataFrame, pubs: DataFrame, matches: DataFrame,
                  by: tuple[str, ...] = ()) -> DataFrame:
    """-> [client, pub_id, deliver_s, filters, _known, _ok]: every delivered pair, whether its publication
    is known (logged by a publish) and whether it matches a subscription the client issued before."""
    # one row per delivery carrying the publication's matching filters (a per-pub array) and the
    # client's subscriptions (a small per-client array, broadcast): no per-(delivery, sub) rows
    d = pairs.select(*by, "client", "pub_id", F.col("first_s").alias("deliver_s"))
    mf = matches.select(*by, "filter", "pub_id").groupBy(*by, "pub_id").agg(F.collect_set("filter").alias("mf"))
    known = pubs.select(*by, "pub_id", F.lit(True).alias("_known")).join(mf, on=[*by, "pub_id"], how="left")
    s = subs.select(*by, "client", F.struct("sub_s", "filter").alias("s")).groupBy(*by, "client").agg(
        F.collect_list("s").alias("subs"))
    issued = F.filter("subs", lambda x: x["sub_s"] <= F.col("deliver_s"))  # null when the client has none
    mf_c = F.coalesce(F.col("mf"), F.array().cast("array<string>"))
    ok = F.exists(issued, lambda x: F.array_contains(mf_c, x["filter"]))
    return (
        d.join(known, on=[*by, "pub_id"], how="left")
        .join(F.broadcast(s), on=[*by, "client"], how="left")
        .select(*by, "client", "pub_id", "deliver_s",
                F.coalesce(F.sort_array(F.array_distinct(F.array_compact(F.transform(issued, lambda x: x["filter"])))),
                           F.array().cast("array<string>")).alias("filters"),
                F.coalesce(F.col("_known"), F.lit(False)).alias("_known"),
                F.coalesce(ok, F.lit(False)).alias("_ok"))
    )


def fifo_inversions(deliver: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """-> [client, publisher, pub_id, seq, max_seq_before, deliver_s]: a delivery whose seq is lower than
    one already delivered from the same publisher to the same client (gaps are not inversions)."""
    w = (
        Window.partitionBy(*by, "client", "publisher").orderBy("t", "m", "seq")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    return (
        deliver.select(*by, "client", "publisher", "pub_id", "seq", "t", "m", "t_rel_s")
        .withColumn("max_seq_before", F.max("seq").over(w))
        .where(F.col("seq") < F.col("max_seq_before"))
        .select(*by, "client", "publisher", "pub_id", "seq", "max_seq_before", F.col("t_rel_s").alias("deliver_s"))
    )


def expected_deliveries(subs: DataFrame, pubs: DataFrame, matches: DataFrame, *, settle_s, margin_s: float,
                        end_s, by: tuple[str, ...] = ()) -> DataFrame:
    """-> [client, pub_id, publisher, pub_s]: (subscriber, publication) pairs that must be delivered.

    The publication matches the subscription's filter, was published at least ``settle_s`` after the
    subscribe, the subscription was not withdrawn before ``pub_s + margin_s``, and
    ``pub_s + margin_s <= end_s`` (it had time to arrive before the workload ended). ``settle_s`` and
    ``end_s``: numbers, or column expressions (one value per run of a batch).
    """
    settle = settle_s if isinstance(settle_s, Column) else F.lit(settle_s)
    end = end_s if isinstance(end_s, Column) else F.lit(end_s)
    p = pubs.select(*by, "pub_id", "publisher", "pub_s").where(F.col("pub_s") + F.lit(margin_s) <= end)
    return (
        subs.select(*by, "client", "filter", "sub_s", "unsub_s")
        .join(matches.select(*by, "filter", "pub_id"), on=[*by, "filter"], how="inner")
        .join(p, on=[*by, "pub_id"], how="inner")
        .where(
            (F.col("sub_s") + settle <= F.col("pub_s"))
            & (F.col("unsub_s").isNull() | (F.col("unsub_s") >= F.col("pub_s") + F.lit(margin_s)))
        )
        .select(*by, "client", "pub_id", "publisher", "pub_s")
        .distinct()
    )


def missing_deliveries(expected: DataFrame, deliver: DataFrame) -> DataFrame:
    """-> [client, pub_id, publisher, pub_s]: expected pairs never delivered."""
    return (
        expected.select("client", "pub_id", "publisher", "pub_s")
        .join(deliver.select("client", "pub_id"), on=["client", "pub_id"], how="left_anti")
        .select("client", "pub_id", "publisher", "pub_s")
    )


def attribute_to_faults(missing: DataFrame, windows: DataFrame) -> DataFrame:
    """[client, pub_id, publisher, pub_s] x [fault, lo, hi, source] -> the same + [fault, fault_source]
    (the lowest-index fault whose window contains pub_s; null = unattributed)."""
    w = windows.select("fault", "lo", "hi", "source")
    hit = (
        missing.select("client", "pub_id", "publisher", "pub_s")
        .join(F.broadcast(w), on=(F.col("pub_s") >= F.col("lo")) & (F.col("pub_s") <= F.col("hi")), how="left")
        .groupBy("client", "pub_id", "publisher", "pub_s")
        .agg(F.min("fault").alias("fault"), F.min_by("source", "fault").alias("fault_source"))
    )
    return hit.select("client", "pub_id", "publisher", "pub_s", "fault", "fault_source")


def fault_columns(pub_s, windows: list[tuple[int, float, float, str]]):
    """(fault, fault_source) as column expressions of ``pub_s``: the lowest-index fault whose window
    [lo, hi] contains it (null: none), as :func:`attribute_to_faults` joins, without a join."""
    fault = source = None
    for f, lo, hi, src in sorted(windows, reverse=True):  # the lowest index is the outermost when
        hit = (pub_s >= F.lit(lo)) & (pub_s <= F.lit(hi))
        fault = F.when(hit, F.lit(f)).otherwise(fault if fault is not None else F.lit(None))
        source = F.when(hit, F.lit(src)).otherwise(source if source is not None else F.lit(None))
    if fault is None:
        return F.lit(None).cast("int"), F.lit(None).cast("string")
    return fault.cast("int"), source.cast("string")


# -- checks ---------------------------------------------------------------------------
def _pairs(ctx: AnalysisContext) -> DataFrame:
    """:func:`delivery_pairs` of the run, one plan for the three checks. Not persisted: measured at
    1.17M events, persisting it cost as much CPU as the scans it saved (docs/benchmarks.md)."""
    key = "pubsub.pairs"
    if key not in ctx.results:
        ctx.results[key] = delivery_pairs(ctx.df("deliver"))
    return ctx.results[key]


# the checks' descriptions (also the batched checks', ``analysis.batch_checks``)
DESCRIPTIONS = {
    "no_duplicates": "no client receives the same publication twice",
    "filter_match": "every delivery matches a filter the client subscribed with before it",
    "fifo": "per-publisher FIFO order at every subscriber",
    "completeness": "every matching publication sent while the subscription was settled and active is delivered "
                    "(misses inside a fault window are attributed to it)",
}
# the order of each check's examples
ORDERS = {"no_duplicates": ["first_s", "client", "pub_id"], "filter_match": ["deliver_s", "client", "pub_id"],
          "fifo": ["deliver_s", "client", "publisher"], "completeness": ["pub_s", "client", "pub_id"]}


def check_no_duplicates(ctx: AnalysisContext) -> CheckResult:
    v = duplicates_of(_pairs(ctx))
    return summarize("no_duplicates", DESCRIPTIONS["no_duplicates"], v,
                     order=["first_s", "client", "pub_id"])


def _matching(ctx: AnalysisContext) -> tuple[DataFrame, DataFrame, DataFrame, dict[str, str]]:
    """(subscriptions, publications, filter matches, unparsable filters), computed once per analysis."""
    key = "pubsub.matching"
    if key not in ctx.results:
        subs = subscriptions(ctx.df("subscribe"), ctx.df("unsubscribe")).cache()
        pubs = publications(ctx.df("publish")).cache()
        matches, errors = match_pairs(ctx.spark, subs, pubs)
        ctx.results[key] = (subs, pubs, matches.cache(), errors)
    return ctx.results[key]


def check_filter_match(ctx: AnalysisContext) -> CheckResult:
    subs, pubs, matches, errors = _matching(ctx)
    j = _judged_pairs(_pairs(ctx), subs, pubs, matches)
    # one job: the violations and the deliveries of publications nobody logged (unverifiable)
    tally = j.agg(F.count(F.when(F.col("_known") & ~F.col("_ok"), 1)).alias("v"),
                  # a null pub_id counts as one publication, as a distinct() would
                  F.countDistinct(F.when(~F.col("_known"), F.coalesce(F.col("pub_id"), F.lit("\u0000"))))
                  .alias("unknown")).collect()[0]
    v = j.where(F.col("_known") & ~F.col("_ok")).select("client", "pub_id", "deliver_s", "filters")
    details = {"unverifiable_deliveries": int(tally["unknown"]), "unparsable_filters": errors}
    r = summarize("filter_match", DESCRIPTIONS["filter_match"], v,
                  order=["deliver_s", "client", "pub_id"], details=details, count=int(tally["v"]))
    if errors:  # an unreadable filter means the property could not be checked: fail loudly
        r.passed = False
    return r


def check_fifo(ctx: AnalysisContext) -> CheckResult:
    v = fifo_inversions(ctx.df("deliver"))
    return summarize("fifo", DESCRIPTIONS["fifo"], v,
                     order=["deliver_s", "client", "publisher"])


def check_completeness(ctx: AnalysisContext) -> CheckResult:
    subs, pubs, matches, errors = _matching(ctx)
    expected = expected_deliveries(subs, pubs, matches, settle_s=ctx.settle_s,
                                   margin_s=ctx.options.travel_margin_s, end_s=ctx.end_s)
    got = _pairs(ctx).select("client", "pub_id", F.lit(True).alias("_got"))
    fault, source = fault_columns(F.col("pub_s"), ctx.window_rows())
    judged = (expected.join(got, on=["client", "pub_id"], how="left")
              .select("client", "pub_id", "publisher", "pub_s", F.col("_got").isNotNull().alias("_got"),
                      fault.alias("fault"), source.alias("fault_source")))
    # one job: the expected pairs, and the missing ones by fault (null: unattributed)
    tally = (judged.groupBy("_got", F.when(~F.col("_got"), F.col("fault")).alias("fault"),
                            F.when(~F.col("_got"), F.col("fault_source")).alias("fault_source"))
             .count().collect())
    n_expected = sum(r["count"] for r in tally)
    miss = [r for r in tally if not r["_got"]]
    by_fault = {int(r["fault"]): {"count": r["count"], "source": r["fault_source"]}
                for r in miss if r["fault"] is not None}
    attributed = sum(v["count"] for v in by_fault.values())
    unattributed = judged.where(~F.col("_got") & F.col("fault").isNull()).select("client", "pub_id", "publisher",
                                                                                "pub_s")
    n_un = sum(r["count"] for r in miss if r["fault"] is None)
    details = {
        "expected": n_expected,
        "delivered": n_expected - n_un - attributed,
        "attributed_by_fault": {str(k): v for k, v in sorted(by_fault.items())},
        "settle_s": ctx.settle_s, "travel_margin_s": ctx.options.travel_margin_s,
        "fault_margin_s": ctx.options.fault_margin_s, "end_s": ctx.end_s,
        "unparsable_filters": errors,
    }
    ctx.results["pubsub.completeness"] = details
    r = summarize("completeness", DESCRIPTIONS["completeness"], unattributed, order=["pub_s", "client", "pub_id"], attributed=attributed, details=details,
                  count=n_un)
    if errors:
        r.passed = False
    return r


CHECKS = [check_no_duplicates, check_filter_match, check_fifo, check_completeness]
