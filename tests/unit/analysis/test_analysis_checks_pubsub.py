"""Every pub/sub check passes on a clean history and fails on one with its violation."""

from testbed.protocols.pubsub.analysis.checks import (
    check_completeness, check_fifo, check_filter_match, check_no_duplicates,
)
from testbed.analysis.context import AnalysisOptions

from analysis_helpers import context, dlv, pub, sub

STOCK = "[class,eq,'STOCK']"


def clean_history():
    """Two subscribers (one STOCK, one BOND), one publisher, everything delivered in order."""
    subs = [sub("s-0", STOCK, 0.0), sub("s-1", "[class,eq,'BOND']", 0.0)]
    pubs, dels = [], []
    for seq in range(1, 11):
        cls = "STOCK" if seq % 2 else "BOND"
        t = 2.0 + seq
        pubs.append(pub("p-0", seq, {"class": cls, "price": seq}, t))
        dels.append(dlv("s-0" if cls == "STOCK" else "s-1", "p-0", seq, t + 0.05, t))
    return {"subscribe": subs, "publish": pubs, "deliver": dels}


def test_all_pass_on_clean_history(spark):
    ctx = context(spark, clean_history())
    for chk in (check_no_duplicates, check_filter_match, check_fifo, check_completeness):
        r = chk(ctx)
        assert r.passed, (r.name, r.examples)
        assert r.violations == 0 and r.attributed == 0
    assert ctx.results["completeness"]["expected"] == 10


def test_duplicate_delivery_fails(spark):
    h = clean_history()
    h["deliver"].append(dlv("s-0", "p-0", 3, 9.0, 5.0))
    r = check_no_duplicates(context(spark, h))
    assert not r.passed and r.violations == 1
    assert r.examples[0]["client"] == "s-0" and r.examples[0]["pub_id"] == "p-0:3"
    assert r.examples[0]["deliveries"] == 2


def test_non_matching_delivery_fails(spark):
    h = clean_history()
    h["deliver"].append(dlv("s-1", "p-0", 5, 7.1, 7.0))  # STOCK publication to the BOND subscriber
    r = check_filter_match(context(spark, h))
    assert not r.passed and r.violations == 1
    assert r.examples[0]["pub_id"] == "p-0:5" and r.examples[0]["filters"] == ["[class,eq,'BOND']"]


def test_delivery_before_subscribing_or_without_subscription_fails(spark):
    h = clean_history()
    h["subscribe"].append(sub("s-2", STOCK, 20.0))  # subscribed only after the delivery below
    h["deliver"] += [dlv("s-2", "p-0", 1, 3.1, 3.0), dlv("s-9", "p-0", 3, 5.1, 5.0)]
    r = check_filter_match(context(spark, h))
    assert r.violations == 2
    assert {e["client"] for e in r.examples} == {"s-2", "s-9"}


def test_delivery_of_unknown_publication_is_unverifiable_not_a_violation(spark):
    h = clean_history()
    h["deliver"].append(dlv("s-0", "p-7", 1, 3.0))
    r = check_filter_match(context(spark, h))
    assert r.passed and r.details["unverifiable_deliveries"] == 1


def test_unparsable_filter_fails_filter_match(spark):
    h = clean_history()
    h["subscribe"].append(sub("s-3", "[class,eq,STOCK", 0.0))
    r = check_filter_match(context(spark, h))
    assert not r.passed and "[class,eq,STOCK" in r.details["unparsable_filters"]


def test_fifo_inversion_fails(spark):
    h = clean_history()
    # s-0 receives seq 5 before seq 3 (delivery times swapped)
    for d in h["deliver"]:
        if d["pub_id"] == "p-0:3":
            d["s"] = 7.5
    r = check_fifo(context(spark, h))
    assert not r.passed and r.violations == 1
    assert r.examples[0]["seq"] == 3 and r.examples[0]["max_seq_before"] == 5


def test_fifo_gap_is_not_an_inversion(spark):
    h = clean_history()
    h["deliver"] = [d for d in h["deliver"] if d["pub_id"] != "p-0:3"]
    assert check_fifo(context(spark, h)).passed


def test_unattributed_loss_fails_completeness(spark):
    h = clean_history()
    h["deliver"] = [d for d in h["deliver"] if d["pub_id"] != "p-0:7"]
    r = check_completeness(context(spark, h))
    assert not r.passed and r.violations == 1 and r.attributed == 0
    assert r.examples[0]["client"] == "s-0" and r.examples[0]["pub_id"] == "p-0:7"


def test_loss_in_fault_window_is_attributed(spark):
    h = clean_history()
    h["deliver"] = [d for d in h["deliver"] if d["pub_id"] != "p-0:5"]  # published at 7.0
    timeline = [
        {"fault": 0, "op": "stall", "target": ["b1"], "planned_s": 5.0, "actual_s": 5.01, "status": "done",
         "window": [5.0, 6.0], "source": "{at: 5s, stall: b1, for: 1s}"},
        {"fault": 0, "op": "unstall", "target": ["b1"], "planned_s": 6.0, "actual_s": 6.02, "status": "done",
         "window": [5.0, 6.0], "source": "{at: 5s, stall: b1, for: 1s}"},
    ]
    ctx = context(spark, h, timeline=timeline)
    r = check_completeness(ctx)
    assert r.passed and r.violations == 0 and r.attributed == 1  # 7.0 <= 6.02 + 2 s margin
    assert r.details["attributed_by_fault"]["0"]["count"] == 1


def test_loss_outside_fault_window_is_a_violation(spark):
    h = clean_history()
    h["deliver"] = [d for d in h["deliver"] if d["pub_id"] != "p-0:9"]  # published at 11.0
    timeline = [{"fault": 0, "op": "crash", "target": ["b1"], "planned_s": 5.0, "actual_s": 5.0,
                 "status": "done", "window": [5.0, 6.0], "source": "{at: 5s, crash: b1}"}]
    r = check_completeness(context(spark, h, timeline=timeline))
    assert not r.passed and r.violations == 1 and r.attributed == 0


def test_completeness_respects_settle_unsubscribe_and_end(spark):
    h = clean_history()
    h["subscribe"].append(sub("s-4", STOCK, 4.5))  # settles at 5.5: seq 5 (7.0), 7 (9.0), 9 (11.0)...
    h["unsubscribe"] = [{"client": "s-4", "sub_id": "s-4/1", "broker": "b1", "s": 10.0}]  # 9 at 11.0 not due
    ctx = context(spark, h, duration_s=10.5)  # pub_s + 2 <= 10.5: seq <= 6
    r = check_completeness(ctx)
    # due to s-4: seq 5 only (published 7.0; seq 3 at 5.0 is before settle; seq 7 at 9.0 withdrawn at 10 < 11)
    assert r.violations == 1 and r.examples[0]["client"] == "s-4" and r.examples[0]["pub_id"] == "p-0:5"
    ctx2 = context(spark, h, duration_s=10.5, options=AnalysisOptions(settle_s=3.0))
    assert check_completeness(ctx2).violations == 0  # settles at 7.5: nothing due


def test_hashed_pairs_tally_as_the_exact_pairs(spark):
    """The shared pass counts on pairs keyed by two 64-bit hashes (pubsub.checks.pair_key): on a
    history with every kind of violation at once its tally is the exact pairs' tally."""
    from pyspark.sql import functions as F

    from testbed.protocols.pubsub.analysis.checks import _matching, fault_columns, judged_pairs, pubsub_tally

    h = clean_history()
    h["deliver"].append(dlv("s-0", "p-0", 3, 9.0, 5.0))  # a duplicate
    h["deliver"].append(dlv("s-1", "p-0", 5, 7.1, 7.0))  # a non-matching delivery
    h["deliver"].append(dlv("s-9", "p-0", 3, 5.1, 5.0))  # no subscription at all
    h["deliver"].append(dlv("s-0", "p-7", 1, 3.0))  # an unknown publication
    h["deliver"] = [d for d in h["deliver"] if d["pub_id"] not in ("p-0:7", "p-0:9")]  # two misses
    timeline = [{"fault": 0, "op": "crash", "target": ["b1"], "planned_s": 8.0, "actual_s": 8.0,
                 "status": "done", "window": [8.0, 8.5], "source": "{at: 8s, crash: b1}"}]  # + margin: 9.0 in, 11.0 out
    ctx = context(spark, h, timeline=timeline)
    subs, pubs, matches, _ = _matching(ctx)
    kw = dict(settle_s=ctx.settle_s, margin_s=ctx.options.travel_margin_s, end_s=ctx.end_s)
    fault, source = fault_columns(F.col("pub_s"), ctx.window_rows())
    exact = judged_pairs(ctx.df("deliver"), subs, pubs, matches, **kw)
    hashed = judged_pairs(ctx.df("deliver"), subs, pubs, matches, hashed=True, **kw)
    assert {"_k1", "_k2"} <= set(hashed.columns) and "pub_id" not in hashed.columns
    want = pubsub_tally(exact, pubs, fault, source)
    assert pubsub_tally(hashed, pubs, fault, source, exact=exact) == want
    t = want[()]
    assert (t["dup"], t["fm"], t["unknown"]) == (1, 2, 1) and sum(t["miss"].values()) == 2 and len(t["miss"]) == 2


def test_fifo_hashed_streams_never_hide_an_inversion(spark):
    """check_fifo looks for inversions with (client, publisher) hashed and recounts exactly only
    where it found some: streams that shared a hash would be one stream, which keeps every
    inversion of each. Shown with the extreme collision: every stream given the same client and
    publisher."""
    from pyspark.sql import functions as F

    from testbed.protocols.pubsub.analysis.checks import fifo_inversions

    h = clean_history()
    h["publish"] += [pub("p-1", seq, {"class": "STOCK"}, 2.0 + seq) for seq in range(1, 6)]
    h["deliver"] += [dlv("s-0", "p-1", seq, 3.3 + i, 2.0 + seq) for i, seq in enumerate((1, 2, 4, 3, 5))]  # 3 after 4
    for d in h["deliver"]:
        if d["pub_id"] == "p-0:3":
            d["s"] = 7.5  # s-0 receives p-0's seq 5 before its seq 3
    ctx = context(spark, h)
    exact = fifo_inversions(ctx.df("deliver"))
    assert sorted((r["publisher"], r["seq"]) for r in exact.collect()) == [("p-0", 3), ("p-1", 3)]
    assert fifo_inversions(ctx.df("deliver"), hashed=True).count() == 2
    merged = ctx.df("deliver").withColumn("client", F.lit("x")).withColumn("publisher", F.lit("y"))
    assert fifo_inversions(merged, hashed=True).count() >= 2
    r = check_fifo(ctx)
    assert not r.passed and r.violations == 2 and {e["publisher"] for e in r.examples} == {"p-0", "p-1"}
    assert check_fifo(context(spark, clean_history())).violations == 0
