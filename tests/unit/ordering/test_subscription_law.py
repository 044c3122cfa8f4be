"""The subscription law of Sec 5.2 (testbed/protocols/ordering/nodes/workload.py, issue #12 item 1)."""

import random

import pytest

from testbed.protocols.ordering.nodes.workload import FOREIGN_EPS, Popularity, client_subscriptions

OWN = list(range(200, 400))  # site 2 of the paper deployment: TMs of topics 200-399


def _subs(shape, k, eps=FOREIGN_EPS, n_clients=4000, seed=5, own=OWN):
    pop = Popularity(1000, shape, own, eps)
    return pop, client_subscriptions(random.Random(seed), pop, [f"c-{i}" for i in range(n_clients)], k)


@pytest.mark.parametrize("k", [1, 10, 50])
@pytest.mark.parametrize("eps", [0.0, 0.05, 0.2])
def test_fraction_of_clients_with_a_foreign_topic_is_eps_whatever_k(k, eps):
    _, subs = _subs(0.901, k, eps)
    foreign = [sum(1 for t in s if t not in OWN) for s in subs.values()]
    assert max(foreign) <= 1  # at most one foreign topic per client
    frac = sum(foreign) / len(subs)
    assert abs(frac - eps) < 4 * (eps * (1 - eps) / len(subs)) ** 0.5 + 1e-9, frac
    assert all(len(s) == len(set(s)) == k for s in subs.values())


def test_foreign_topics_are_uniform_over_the_other_sites():
    _, subs = _subs(0.901, 10, eps=1.0, n_clients=8000)
    picks = [t for s in subs.values() for t in s if t not in OWN]
    assert len(picks) == 8000
    below, above = sum(t < 200 for t in picks), sum(t >= 400 for t in picks)
    assert abs(below / len(picks) - 0.25) < 0.03  # 200 of the 800 foreign topics are below
    assert below + above == len(picks) and len(set(picks)) > 700


def test_slots_on_the_sites_top_topics_follow_the_law():
    pop, subs = _subs(0.901, 1, eps=0.0)
    w = pop.subscription_weights()
    top5 = OWN[:5]
    law = sum(w[t] for t in top5)
    assert law > 0.8  # the calibrated 80% on 5 topics, conditioned on the own topics
    share = sum(s[0] in top5 for s in subs.values()) / len(subs)
    assert abs(share - law) < 0.03
    # k = 2 distinct topics, drawn one after the other from the law (what Efraimidis-Spirakis
    # keys amount to): P(t in s) = p_t + sum_{u != t} p_u p_t / (1 - p_u)
    _, subs2 = _subs(0.901, 2, eps=0.0, n_clients=8000)
    for t in top5:
        expect = w[t] + sum(w[u] * w[t] / (1 - w[u]) for u in w if u != t)
        got = sum(t in s for s in subs2.values()) / len(subs2)
        assert abs(got - expect) < 4 * (expect * (1 - expect) / len(subs2)) ** 0.5, (t, got, expect)


def test_the_old_law_put_a_third_of_the_clients_abroad_and_the_new_one_does_not():
    # a law over the whole ranking (spray-and-diffuse, or the former 0.901) with k = 10
    pop = Popularity(1000, 0.901, OWN, 0.05)
    pop.local = False
    old = client_subscriptions(random.Random(5), pop, [f"c-{i}" for i in range(2000)], 10)
    assert sum(any(t not in OWN for t in s) for s in old.values()) / 2000 > 0.25
    _, new = _subs(0.901, 10, n_clients=2000)
    assert sum(any(t not in OWN for t in s) for s in new.values()) / 2000 < 0.08


def test_spray_and_diffuse_and_single_site_keep_the_whole_ranking():
    pop, subs = _subs(0.349, 10, eps=0.0, n_clients=500)
    assert not pop.local and sum(any(t not in OWN for t in s) for s in subs.values()) > 250
    one = Popularity(1000, 0.901, None, 0.05)  # one server hosts every TM (Figs 7-8)
    assert not one.local and one.foreign == []
    # same draw as a site-less law: the single-site figures do not depend on foreign_eps
    a = client_subscriptions(random.Random(1), one, ["x", "y"], 10)
    b = client_subscriptions(random.Random(1), Popularity(1000, 0.901, None, 0.5), ["x", "y"], 10)
    assert a == b


def test_publications_keep_the_calibrated_law():
    pop = Popularity(1000, 0.901, OWN, 0.05)
    assert abs(sum(pop.weights[t] for t in OWN[:5]) - 0.8) < 1e-6
    with pytest.raises(ValueError):
        Popularity(1000, 0.901, OWN, 1.5)
