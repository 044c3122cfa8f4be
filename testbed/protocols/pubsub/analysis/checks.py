"""History checks of the content-based pub/sub core.

Transforms (DataFrame -> DataFrame, ``select`` at entry and exit) compute the
violation rows; the ``check_*`` functions wrap them into a :class:`CheckResult`.
Times are ``t_rel_s`` (seconds from the workload start, clock-corrected).

* no_duplicates     a client receives a publication at most once
* filter_match      every delivery matches a subscription the client issued before it
* fifo              per (subscriber, publisher), deliveries arrive in publication order
* completeness      every publication that matched a subscription active throughout its
                    travel was delivered; a miss is *attributed* to a fault only when the fault
                    touched its route (publisher's process, the overlay path between the two
                    brokers, subscriber's process) within the fault's window (``analysis.routes``)
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


def fifo_inversions(deliver: DataFrame, by: tuple[str, ...] = (), hashed: bool = False) -> DataFrame:
    """-> [client, publisher, pub_id, seq, max_seq_before, deliver_s]: a delivery whose seq is lower than
    one already delivered from the same publisher to the same client (gaps are not inversions).

    ``hashed``: -> [*by, seq, max_seq_before] with (client, publisher) as one 64-bit hash, a
    cheaper sort (1.4 s -> 0.8 s on 988k deliveries). Never fewer rows than the exact inversions:
    two (client, publisher) streams sharing a hash are one stream in time order, where every
    inversion of either is still one (an earlier higher seq stays earlier). So no row here means
    none exact; rows here are recounted exactly (:func:`check_fifo`)."""
    key = [F.xxhash64("client", "publisher").alias("_k")] if hashed else ["client", "publisher"]
    w = (
        Window.partitionBy(*by, *(["_k"] if hashed else key)).orderBy("t", "m", "seq")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    rows = (
        deliver.select(*by, *key, *([] if hashed else ["pub_id"]), "seq", "t", "m", *([] if hashed else ["t_rel_s"]))
        .withColumn("max_seq_before", F.max("seq").over(w))
        .where(F.col("seq") < F.col("max_seq_before"))
    )
    if hashed:
        return rows.select(*by, "seq", "max_seq_before")
    return rows.select(*by, "client", "publisher", "pub_id", "seq", "max_seq_before",
                       F.col("t_rel_s").alias("deliver_s"))


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
    return route_fault_columns(pub_s, None, [(f, lo, hi, src, None) for f, lo, hi, src in windows])


def route_fault_columns(pub_s, route, windows: list[tuple[int, float, float, str, frozenset[int] | None]]):
    """(fault, fault_source) as column expressions: the lowest-index fault whose window [lo, hi]
    contains ``pub_s`` and whose touched routes (``analysis.routes``: pair codes; None = every
    route) contain ``route`` (null: none)."""
    fault = source = None
    for f, lo, hi, src, codes in sorted(windows, key=lambda w: w[0], reverse=True):  # the lowest index
        if codes is not None and not codes:  # touches no route of the run
            continue
        hit = (pub_s >= F.lit(lo)) & (pub_s <= F.lit(hi))
        if codes is not None:
            hit = hit & route.isin(sorted(codes))
        fault = F.when(hit, F.lit(f)).otherwise(fault if fault is not None else F.lit(None))
        source = F.when(hit, F.lit(src)).otherwise(source if source is not None else F.lit(None))
    if fault is None:
        return F.lit(None).cast("int"), F.lit(None).cast("string")
    return fault.cast("int"), source.cast("string")


def route_code(codes: dict[str, int], n_endpoints: int, client="client", pub_id="pub_id") -> Column:
    """The route of a (subscriber ``client``, publication ``pub_id``) pair as ``analysis.routes.Routes``
    codes it (the publisher is ``pub_id``'s part before ``:``); null when a client is not in the plan."""
    m = F.create_map(*[x for c, i in sorted(codes.items()) for x in (F.lit(c), F.lit(i))])
    pub = F.substring_index(F.col(pub_id), ":", 1)
    return (m[pub] * F.lit(n_endpoints) + m[F.col(client)]).cast("int")


def needs_resync(ctx: AnalysisContext) -> bool:
    """Whether some fault of the run ends by re-synchronisation (its recovery read from the logs)."""
    from testbed.analysis.routes import RESYNC_OPS

    return any(w.attributable and set(w.ops) & RESYNC_OPS for w in ctx.windows)


def run_route_windows(ctx: AnalysisContext, resync: list[tuple] | None = None):
    """(Routes, [RouteWindow]) of one run: its faults' windows by route, each restart's or heal's
    recovery ended when the re-syncs were applied (``broker_resync_applied``), or, in logs without
    those, by the brokers' ``broker_resync`` (peer) and the client processes' ``client_resync``
    (broker) events plus the fault margin (``resync``: those rows when already read, as the batch
    does). Computed once per analysis."""
    key = "pubsub.routes"
    if key not in ctx.results:
        from testbed.analysis.routes import Routes, route_windows

        routes = Routes(ctx.plan)
        rows = resync if resync is not None else resync_rows(ctx) if needs_resync(ctx) else []
        ctx.results[key] = (routes, route_windows(ctx.windows, routes, rows, margin_s=ctx.options.fault_margin_s,
                                                  end_s=ctx.end_s))
    return ctx.results[key]


RESYNC_EVENTS = (("broker_resync", "peer"), ("client_resync", "broker"))  # (event, the peer re-synced): sent
APPLIED_EVENT = "broker_resync_applied"  # the receiver handled a re-sync wave (peer = who sent it)


def resync_rows(ctx: AnalysisContext) -> list[tuple]:
    """Every re-sync of the run (small: one per reconnection): sent rows (node that sent, peer,
    t_rel_s) and applied rows (node that applied, peer that sent, t_rel_s, wave, fwd, full), as
    ``analysis.routes.split_rows`` reads them."""
    out: list[tuple] = []
    for ev, peer in RESYNC_EVENTS:
        if ctx.has(ev):
            out += [(r[0], r[1], float(r[2])) for r in ctx.df(ev).select("node", peer, "t_rel_s").collect()]
    if ctx.has(APPLIED_EVENT):
        out += [(r[0], r[1], float(r[2]), r[3], int(r[4] or 0), bool(r[5]))
                for r in ctx.df(APPLIED_EVENT).select("node", "peer", "t_rel_s", "wave", "fwd", "full").collect()]
    return out


def route_args(routes, rwins) -> tuple[Column | None, list]:
    """(route code column or None, the windows as :func:`route_fault_columns` takes them)."""
    rows = [(w.fault, w.lo, w.hi, w.source, w.codes) for w in rwins]
    if not routes.known or not rows:
        return None, [(f, lo, hi, src, None) for f, lo, hi, src, _ in rows]
    return route_code(routes.client_codes(), len(routes.endpoints)), rows


def pair_key(client, pub_id) -> list:
    """(client, publication) as two 64-bit hashes (``_k1``, ``_k2``): the group key of
    :func:`judged_pairs` ``hashed``. Two different pairs share both with probability about
    n^2 / 2^129 for n pairs (below 1e-25 at 10M events); grouping by two numbers instead of two
    strings took 1 s off the 1.17M-event benchmark's shared pass (docs/benchmarks.md)."""
    return [F.xxhash64(client, pub_id).alias("_k1"), F.xxhash64(F.lit("testbed"), pub_id, client).alias("_k2")]


def judged_pairs(deliver: DataFrame, subs: DataFrame, pubs: DataFrame, matches: DataFrame, *, settle_s,
                 margin_s: float, end_s, by: tuple[str, ...] = (), hashed: bool = False,
                 route: Column | None = None) -> DataFrame:
    """The delivered and the matched (client, publication) pairs in one aggregation, for
    no_duplicates, filter_match and completeness at once:
    [*by, client, pub_id, deliveries, first_s, last_s, ok_sub_s, expected, pub_s].

    The deliveries and the candidate pairs (each subscription with each publication its filter
    matches: :func:`match_pairs` evaluates every distinct filter once per publication) are one union
    grouped by (client, publication): ``deliveries``, ``first_s``, ``last_s`` as
    :func:`delivery_pairs`; ``ok_sub_s`` the earliest subscription of the client whose filter matches
    (a delivery is filter-matched iff ``ok_sub_s <= first_s``); ``expected`` whether some matching
    subscription makes the pair expected (:func:`expected_deliveries`' rule); ``pub_s`` of a matched
    publication. One shuffle instead of a delivery aggregation per check, a distinct of the expected
    pairs and their join with the deliveries.

    Every aggregate is a number: Spark then aggregates in a hash map (a string aggregate, such as
    the publisher, makes it sort all the rows first: measured 2x slower at 1.17M events).
    :func:`with_publisher` adds the publisher where examples need it.

    ``hashed``: grouped by :func:`pair_key` instead, with ``_k1``, ``_k2`` in place of client and
    pub_id: what :func:`pubsub_tally` counts on; examples come from the exact pairs.

    ``route``: the route code of a candidate pair (:func:`route_code`, over its ``client`` and
    ``pub_id``), aggregated as ``route`` (a number); null when None (no fault to attribute by route)."""
    settle = settle_s if isinstance(settle_s, Column) else F.lit(settle_s)
    end = end_s if isinstance(end_s, Column) else F.lit(end_s)
    margin = F.lit(margin_s)
    if "pub_s" in matches.columns:  # carried by match_pairs(keep=...): no join back
        m = matches.select(*by, "filter", "pub_id", "pub_s")
    else:
        m = (matches.select(*by, "filter", "pub_id")
             .join(pubs.select(*by, "pub_id", "pub_s"), on=[*by, "pub_id"], how="inner"))
    keys = pair_key(F.col("client"), F.col("pub_id")) if hashed else ["client", "pub_id"]
    names = ["_k1", "_k2"] if hashed else ["client", "pub_id"]
    cand = (
        F.broadcast(subs.select(*by, "client", "filter", "sub_s", "unsub_s"))
        .join(m, on=[*by, "filter"], how="inner")
        .select(*by, *keys, F.lit(None).cast("double").alias("_t"), F.lit(0).alias("_d"),
                F.col("sub_s").alias("_sub_s"),
                F.when((F.col("pub_s") + margin <= end) & (F.col("sub_s") + settle <= F.col("pub_s"))
                       & (F.col("unsub_s").isNull() | (F.col("unsub_s") >= F.col("pub_s") + margin)), 1)
                .otherwise(0).alias("_e"),
                "pub_s", *([route.alias("_r")] if route is not None else []))
    )
    d = deliver.select(*by, *keys, F.col("t_rel_s").cast("double").alias("_t"), F.lit(1).alias("_d"),
                       F.lit(None).cast("double").alias("_sub_s"), F.lit(0).alias("_e"),
                       F.lit(None).cast("double").alias("pub_s"),
                       *([F.lit(None).cast("int").alias("_r")] if route is not None else []))
    j = (
        d.unionByName(cand)
        .groupBy(*by, *names)
        .agg(F.sum("_d").alias("deliveries"), F.min("_t").alias("first_s"), F.max("_t").alias("last_s"),
             F.min("_sub_s").alias("ok_sub_s"), (F.max("_e") == 1).alias("expected"),
             F.max("pub_s").alias("pub_s"), *([F.max("_r").alias("route")] if route is not None else []))
    )
    return j if route is not None else j.withColumn("route", F.lit(None).cast("int"))


def with_publisher(pairs: DataFrame, pubs: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """Rows with ``pub_id`` (examples of :func:`judged_pairs`) -> the same + ``publisher`` (of
    :func:`publications`), before ``pub_s``."""
    cols = [c for c in pairs.columns if c not in ("publisher",)]
    at = cols.index("pub_s") if "pub_s" in cols else len(cols)
    return (pairs.join(pubs.select(*by, "pub_id", "publisher"), on=[*by, "pub_id"], how="left")
            .select(*cols[:at], "publisher", *cols[at:]))


def pubsub_tally(j: DataFrame, pubs: DataFrame, fault, source, by: tuple[str, ...] = (),
                 exact: DataFrame | None = None) -> dict[tuple, dict]:
    """{by values: {"dup": n, "fm": n, "unknown": n, "expected": n, "miss": {(fault, source): n}}}
    over :func:`judged_pairs` (``fault`` None: unattributed), in one Spark job when every delivery
    is explained by a matching subscription or has one that came too late. Deliveries with no
    matching subscription at all are joined to the publications in a second job, only when there
    are some, to tell violations (a known publication) from unverifiable deliveries (unknown).
    ``exact``: the pairs by client and pub_id when ``j`` is :func:`judged_pairs` ``hashed`` (that
    second job needs the publication ids)."""
    delivered = F.col("deliveries") > 0
    fm_bad = delivered & ~F.coalesce(F.col("ok_sub_s") <= F.col("first_s"), F.lit(False))
    miss = F.col("expected") & ~delivered
    empty = {"dup": 0, "fm": 0, "unknown": 0, "expected": 0, "miss": {}}
    rows = (j.where((F.col("deliveries") > 1) | F.col("expected") | fm_bad)
            .select(*by, (F.col("deliveries") > 1).alias("_dup"), F.col("expected").alias("_exp"),
                    F.when(miss, fault).alias("fault"), F.when(miss, source).alias("src"), miss.alias("_miss"),
                    (fm_bad & F.col("ok_sub_s").isNotNull()).alias("_fm1"),
                    (fm_bad & F.col("ok_sub_s").isNull()).alias("_fm0"))
            .groupBy(*by, "_dup", "_exp", "_miss", "fault", "src", "_fm1", "_fm0").count().collect())
    out: dict[tuple, dict] = {}
    unmatched = False
    for r in rows:
        t = out.setdefault(tuple(r[k] for k in by), {**empty, "miss": {}})
        n = int(r["count"])
        t["dup"] += n if r["_dup"] else 0
        t["expected"] += n if r["_exp"] else 0
        t["fm"] += n if r["_fm1"] else 0  # a matching subscription exists: the publication is known
        unmatched = unmatched or bool(r["_fm0"])
        if r["_miss"]:
            k = (r["fault"], r["src"])
            t["miss"][k] = t["miss"].get(k, 0) + n
    if unmatched:
        known = pubs.select(*by, "pub_id", F.lit(True).alias("_known"))
        for r in ((j if exact is None else exact).where(fm_bad & F.col("ok_sub_s").isNull()).select(*by, "pub_id")
                  .join(known, on=[*by, "pub_id"], how="left")
                  .groupBy(*by)
                  .agg(F.count("_known").alias("n"),
                       # a null pub_id counts as one publication, as a distinct() would
                       F.countDistinct(F.when(F.col("_known").isNull(), F.coalesce(F.col("pub_id"), F.lit("\u0000"))))
                       .alias("u"))
                  .collect()):
            t = out.setdefault(tuple(r[k] for k in by), {**empty, "miss": {}})
            t["fm"] += int(r["n"])
            t["unknown"] += int(r["u"])
    return out


def completeness_details(t: dict, errors: dict[str, str], *, settle_s: float, travel_margin_s: float,
                         fault_margin_s: float, end_s: float, windows=()) -> tuple[dict, int, int]:
    """(details, unattributed, attributed) of completeness from one run's :func:`pubsub_tally`
    (``windows``: the run's ``analysis.routes.RouteWindow`` list: each excusing fault's window)."""
    win = {w.fault: w for w in windows}
    by_fault = {int(f): {"count": n, "source": s, **({"window": [round(win[int(f)].lo, 3), round(win[int(f)].hi, 3)],
                                                      "recovered": win[int(f)].recovered,
                                                      "routes": "all" if win[int(f)].codes is None
                                                      else len(win[int(f)].codes)} if int(f) in win else {})}
                for (f, s), n in t["miss"].items() if f is not None}
    attributed = sum(v["count"] for v in by_fault.values())
    n_un = sum(n for (f, _), n in t["miss"].items() if f is None)
    details = {
        "expected": t["expected"],
        "delivered": t["expected"] - n_un - attributed,
        "attributed_by_fault": {str(k): v for k, v in sorted(by_fault.items())},
        "settle_s": settle_s, "travel_margin_s": travel_margin_s,
        "fault_margin_s": fault_margin_s, "end_s": end_s,
        "unparsable_filters": errors,
    }
    return details, n_un, attributed


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
                    "(a miss is attributed to a fault that touched its route inside the fault's window)",
}
# the order of each check's examples
ORDERS = {"no_duplicates": ["first_s", "client", "pub_id"], "filter_match": ["deliver_s", "client", "pub_id"],
          "fifo": ["deliver_s", "client", "publisher"], "completeness": ["pub_s", "client", "pub_id"]}


def _shared(ctx: AnalysisContext) -> tuple[DataFrame, dict, dict[str, str]]:
    """(:func:`judged_pairs`, its :func:`pubsub_tally`, unparsable filters): one pass for
    no_duplicates, filter_match and completeness, computed once per analysis."""
    key = "pubsub.judged"
    if key not in ctx.results:
        subs, pubs, matches, errors = _matching(ctx)
        routes, rwins = run_route_windows(ctx)
        route, wins = route_args(routes, rwins)
        kw = dict(settle_s=ctx.settle_s, margin_s=ctx.options.travel_margin_s, end_s=ctx.end_s, route=route)
        # counted on the hashed pairs; the exact ones (no job unless a check has examples to show)
        j = judged_pairs(ctx.df("deliver"), subs, pubs, matches, **kw)
        fault, source = route_fault_columns(F.col("pub_s"), F.col("route"), wins)
        t = pubsub_tally(judged_pairs(ctx.df("deliver"), subs, pubs, matches, hashed=True, **kw), pubs, fault, source,
                         exact=j).get((), {"dup": 0, "fm": 0, "unknown": 0, "expected": 0, "miss": {}})
        ctx.results[key] = (j.withColumn("fault", fault), t, errors)
    return ctx.results[key]


def check_no_duplicates(ctx: AnalysisContext) -> CheckResult:
    j, t, _ = _shared(ctx)
    v = duplicates_of(j)
    return summarize("no_duplicates", DESCRIPTIONS["no_duplicates"], v, order=ORDERS["no_duplicates"], count=t["dup"])


def _matching(ctx: AnalysisContext) -> tuple[DataFrame, DataFrame, DataFrame, dict[str, str]]:
    """(subscriptions, publications, filter matches, unparsable filters), computed once per analysis."""
    key = "pubsub.matching"
    if key not in ctx.results:
        subs = subscriptions(ctx.df("subscribe"), ctx.df("unsubscribe")).cache()
        # publications and matches are read once when every check passes (examples read them again):
        # not cached, which measured cheaper than building the cache (docs/benchmarks.md)
        pubs = publications(ctx.df("publish"))
        matches, errors = match_pairs(ctx.spark, subs, pubs, keep=("pub_s",))
        ctx.results[key] = (subs, pubs, matches, errors)
    return ctx.results[key]


def check_filter_match(ctx: AnalysisContext) -> CheckResult:
    subs, pubs, matches, errors = _matching(ctx)
    _, t, _ = _shared(ctx)
    # the examples (only when there are violations) by the per-delivery evaluation, which also lists
    # the client's filters; the counts come from the shared pass
    v = non_matching_pairs(_pairs(ctx), subs, pubs, matches)
    details = {"unverifiable_deliveries": t["unknown"], "unparsable_filters": errors}
    r = summarize("filter_match", DESCRIPTIONS["filter_match"], v,
                  order=ORDERS["filter_match"], details=details, count=t["fm"])
    if errors:  # an unreadable filter means the property could not be checked: fail loudly
        r.passed = False
    return r


def check_fifo(ctx: AnalysisContext) -> CheckResult:
    if fifo_inversions(ctx.df("deliver"), hashed=True).isEmpty():  # none exact either (see there)
        return CheckResult("fifo", True, 0, description=DESCRIPTIONS["fifo"])
    v = fifo_inversions(ctx.df("deliver"))
    return summarize("fifo", DESCRIPTIONS["fifo"], v, order=ORDERS["fifo"])


def check_completeness(ctx: AnalysisContext) -> CheckResult:
    j, t, errors = _shared(ctx)
    details, n_un, attributed = completeness_details(
        t, errors, settle_s=ctx.settle_s, travel_margin_s=ctx.options.travel_margin_s,
        fault_margin_s=ctx.options.fault_margin_s, end_s=ctx.end_s, windows=run_route_windows(ctx)[1])
    ctx.results["completeness"] = details
    unattributed = with_publisher(j.where(F.col("expected") & (F.col("deliveries") == 0) & F.col("fault").isNull())
                                  .select("client", "pub_id", "pub_s"), _matching(ctx)[1])
    r = summarize("completeness", DESCRIPTIONS["completeness"], unattributed, order=ORDERS["completeness"],
                  attributed=attributed, details=details, count=n_un)
    if errors:
        r.passed = False
    return r


CHECKS = [check_no_duplicates, check_filter_match, check_fifo, check_completeness]
