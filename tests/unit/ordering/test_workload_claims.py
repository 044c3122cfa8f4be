import random

from testbed.protocols.ordering.nodes.workload import (Popularity, client_subscriptions, own_topics,
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
