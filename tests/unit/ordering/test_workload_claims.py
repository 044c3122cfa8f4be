import random

from testbed.analysis.ordering.reproduce import claims_bw, claims_fig7, claims_rate, claims_subs
from testbed.nodes.ordering.workload import (Popularity, client_subscriptions, own_topics,
                                             rank_weights, zipf_exponent)


def test_popularity_concentration_matches_the_paper_definitions():
    for shape, top in ((0.901, 5), (0.349, 400)):
        w = rank_weights(1000, shape)
        assert abs(sum(w[:top]) - 0.8) < 1e-6
        assert abs(sum(w) - 1.0) < 1e-9
    assert zipf_exponent(1000, 0.901) > zipf_exponent(1000, 0.349)


def test_site_ranking_puts_own_topics_first_and_draws_are_reproducible():
    pop = Popularity(1000, 0.901, own=list(range(400, 600)))
    assert max(range(1000), key=lambda t: pop.weights[t]) == 400
    rng = random.Random(3)
    picks = [pop.pick(rng) for _ in range(5000)]
    assert sum(400 <= t < 405 for t in picks) / 5000 > 0.75
    a = client_subscriptions(random.Random(9), pop, ["c-0", "c-1"], 10)
    b = client_subscriptions(random.Random(9), pop, ["c-0", "c-1"], 10)
    assert a == b and all(len(set(s)) == 10 == len(s) and s == sorted(s) for s in a.values())


def test_own_topics_follow_the_placement():
    tm = {"topics": 10, "strategy": "range", "servers": ["tm1", "tm2"]}
    d = {"tm1": {"site": "a"}, "tm2": {"site": "b"}}
    assert own_topics(tm, d, "b") == [5, 6, 7, 8, 9]
    assert own_topics(tm, d, "c") is None


def _rows7(sizes901, sizes349):
    ks = [1, 10, 100]
    return ([{"shape": 0.901, "k": k, "size_mean": v} for k, v in zip(ks, sizes901)]
            + [{"shape": 0.349, "k": k, "size_mean": v} for k, v in zip(ks, sizes349)])


def test_fig7_claims_hold_and_fail_on_data():
    good = {c["claim"]: c["holds"] for c in claims_fig7(_rows7([1, 17, 950], [1, 46, 990]), 1000)}
    assert all(good.values())
    bad = {c["claim"]: c["holds"] for c in claims_fig7(_rows7([1, 60, 400], [1, 20, 300]), 1000)}
    assert not any(bad.values())


def test_rate_bw_and_subscription_claims_can_fail():
    rows = [{"shape": s, "rate": r, "latency_mean_ms": lat, "throughput_per_s": thr}
            for s, r, lat, thr in ((0.901, 1000, 20, 990), (0.901, 5000, 40, 4500),
                                   (0.349, 1000, 90, 980), (0.349, 5000, 120, 3000))]
    ok = {c["claim"]: c["holds"] for c in claims_rate(rows, [9, 10], "quick")}
    assert all(ok.values())
    rows[0]["latency_mean_ms"] = 500
    assert not all(c["holds"] for c in claims_rate(rows, [9], "quick"))
    bw901 = {"tm1": 0, "tm2": 0, "tm3": 0.1, "tm4": 5, "tm5": 8}
    bw349 = {"tm1": 0, "tm2": 20, "tm3": 30, "tm4": 25, "tm5": 30}
    assert all(c["holds"] for c in claims_bw(bw901, bw349, [11, 12]))
    assert not all(c["holds"] for c in claims_bw(bw349, bw901, [11, 12]))
    srows = [{"shape": s, "total_subscribed": n, "latency_mean_ms": lat, "throughput_per_s": 1000}
             for s, n, lat in ((0.901, 500, 20), (0.901, 4000, 21), (0.349, 500, 90), (0.349, 4000, 300))]
    res = {c["figure"]: c["holds"] for c in claims_subs(srows, [13, 14])}
    assert res[13] and not res[14]  # throughput flat for both: "affects 0.349 more" fails
