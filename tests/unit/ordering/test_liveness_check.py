"""The liveness check: its bound from a plan, and the checker on simulated histories."""

from __future__ import annotations

from testbed.protocols.ordering.analysis.liveness import SLACK_S, check_liveness, liveness_bound

from .harness import Sim, random_run
from .test_liveness import three_sites


def _link(d, j=0.0, dist="normal"):
    return {"delay_ms": d, "jitter_ms": j, "distribution": dist, "loss": 0.0}


def plan_three_sites(**params):
    """The issue's three-site topology, as plan.json writes it (only what the bound reads)."""
    site = {"b1": "a", "b2": "b", "b3": "c", "t1": "a", "t2": "b", "t3": "c",
            "ca": "a", "cb": "b", "cc": "c"}
    wan = {frozenset("ab"): 45.0, frozenset("ac"): 30.0, frozenset("bc"): 70.0}
    links = {}
    for a in site:
        for b in site:
            if a != b:
                sa, sb = site[a], site[b]
                links[f"{a}->{b}"] = _link(3.0, 1.0) if sa == sb else _link(wan[frozenset(sa + sb)])
    for p, b in (("ca", "b1"), ("cb", "b2"), ("cc", "b3")):
        links[f"{p}->{b}"] = links[f"{b}->{p}"] = _link(1.0)
    nodes = {"b1": {"role": "broker", "neighbors": ["b2", "b3"]},
             "b2": {"role": "broker", "neighbors": ["b1"]},
             "b3": {"role": "broker", "neighbors": ["b1"]},
             **{t: {"role": "tm-server", "neighbors": []} for t in ("t1", "t2", "t3")},
             **{p: {"kind": "clients", "role": "client", "clients": {"attach": [b]}}
                for p, b in (("ca", "b1"), ("cb", "b2"), ("cc", "b3"))}}
    return {"links": links, "nodes": nodes, "actions": [], "params": params,
            "placement": {"topic_managers": {"topics": 30, "strategy": "hash",
                                             "servers": ["t1", "t2", "t3"]}}}


def test_bound_from_the_plan():
    b = liveness_bound(plan_three_sites())
    assert b["pipe_ms"] == 70 + 45  # t3 -> t2 -> t1
    assert b["ret_ms"] == 70  # t3 -> cb (b-c) or t2 -> cc
    assert b["ens_ms"] == 77  # cb -> b2 -> b1 -> b3 -> cc
    assert abs(b["bound_s"] - ((115 + 70 + 77) / 1e3 + SLACK_S)) < 1e-9
    # a pause adds its window; jitter counts 4 sigma (normal) or 1 (uniform)
    plan = plan_three_sites()
    plan["actions"] = [{"op": "pause", "target": ["t2"], "window": [2.0, 5.0]},
                       {"op": "resume", "target": ["t2"], "window": [2.0, 5.0]}]
    assert liveness_bound(plan)["faults_s"] == 3.0
    plan["links"]["t3->t2"] = _link(70.0, 5.0)
    assert liveness_bound(plan)["pipe_ms"] == 70 + 20 + 45
    plan["links"]["t3->t2"] = _link(70.0, 5.0, "uniform")
    assert liveness_bound(plan)["pipe_ms"] == 70 + 5 + 45
    assert liveness_bound(plan_three_sites(ens="unreliable", ttl=0.5))["bound_s"] == 0.5 + SLACK_S


def _history(sim: Sim) -> list:
    return sim.history + sim.stuck_records()


def test_passes_on_a_live_run_and_fails_on_a_stalled_one():
    sim = random_run(1, servers=("s1", "s2", "s3"), strategy="hash", n_topics=12, n_clients=10,
                     link_delay=three_sites)
    r = check_liveness(_history(sim), bound_s=1.0)
    assert r["passed"], r
    assert r["max_wait_ms"] > 0  # something was buffered, and not for long
    # the same run with the old routing (no pipeline: chains overtake each other) stalls
    broken = random_run(1, servers=("s1", "s2", "s3"), strategy="hash", n_topics=12, n_clients=10,
                        link_delay=three_sites, pipeline=False)
    r = check_liveness(_history(broken), bound_s=1.0)
    assert not r["passed"]
    assert r["violations"] > 10 and r["held_back_at_end"] > 10
    ex = r["examples"][0]
    assert ex["never_notified"] and ex["held_ms"] > 1000
    w = ex["waits"][0]
    assert set(w) == {"topic", "sub_lc", "needs", "tm", "next_missing"}
    assert w["tm"] in ("s1", "s2", "s3") and w["needs"] > w["sub_lc"]
    # what it waits for is named: an event that was published (it is stuck too) or a dummy
    assert "event " in w["next_missing"] or "subscription of" in w["next_missing"]


def test_a_late_notification_is_a_violation():
    sim = random_run(2)
    hist = _history(sim)
    assert check_liveness(hist, bound_s=2.0)["passed"]
    notes = [h for h in hist if h["ev"] == "o_notify"]
    late = dict(notes[len(notes) // 2], wait_ms=2500.0)
    hist = [late if h is notes[len(notes) // 2] else h for h in hist]
    r = check_liveness(hist, bound_s=2.0)
    assert not r["passed"] and r["violations"] == 1
    assert r["examples"][0]["eid"] == late["eid"] and not r["examples"][0]["never_notified"]
