"""Broker + client processes on the in-memory harness: routing, hops, restarts, re-sync, covering."""

import collections

import pytest

from testbed.protocols.pubsub.nodes.filters import matches, parse

from .harness import Sim, topology

LINE = {"b1": ["b2"], "b2": ["b1", "b3"], "b3": ["b2"]}


def pubs_and_delivers(sim):
    pubs = {r["pub_id"]: r for r in sim.events("publish")}
    dl = collections.Counter((r["client"], r["pub_id"]) for r in sim.events("deliver"))
    return pubs, dl


def run_line(covering="off", **over):
    groups = {
        "pubs": {"role": "publisher", "count": 2, "attach": ["b1"], "rate_per_s": 50,
                 "extra": {"attrs": {"class": "STOCK", "price": "uniform(0,100)"}}},
        "subs": {"role": "subscriber", "count": 3, "attach": ["b3", "b2"],
                 "filter": "[class,eq,'STOCK'],[price,>,50]"},
        "all": {"role": "subscriber", "count": 1, "attach": ["b1"], "filter": "[class,eq,'STOCK']"},
    }
    for g, kw in over.items():
        groups[g].update(kw)
    sim = Sim(topology(LINE, groups, {"covering": covering}))
    sim.start()
    sim.run_for(0.5)
    return sim


def test_line_delivers_matching_publications_exactly_once_with_hops():
    sim = run_line()
    sim.start_workload(0.1, 2.0)
    sim.run_for(3.0)
    sim.shutdown()
    pubs, dl = pubs_and_delivers(sim)
    assert len(pubs) == 200  # 2 clients x 50/s x 2 s
    seqs = sorted(r["seq"] for r in pubs.values() if r["client"] == "pubs-0")
    assert seqs == list(range(1, 101))
    assert all(r["broker"] == "b1" and r["size"] == 16 for r in pubs.values())
    f = parse("[class,eq,'STOCK'],[price,>,50]")
    for pid, r in pubs.items():
        want = {"all-0"} | ({"subs-0", "subs-1", "subs-2"} if matches(f, r["attrs"]) else set())
        got = {c for (c, p) in dl if p == pid}
        assert got == want, pid
    assert all(n == 1 for n in dl.values())
    hops = {(r["client"]): r["hops"] for r in sim.events("deliver")}
    assert hops == {"all-0": 1, "subs-0": 3, "subs-1": 2, "subs-2": 3}
    d = sim.events("deliver", client="subs-0")[0]
    p = pubs[d["pub_id"]]
    assert d["publisher"] == p["client"] and d["seq"] == p["seq"] and d["pub_t"] <= d["t"]
    # periodic tables: b2 holds the advertisements and the forwarded subscriptions
    last = [r for r in sim.events("broker_tables", node="b2")][-1]
    assert last["srt"] == 2 and last["prt"] == 3  # subs-0, subs-2 (via b3) + subs-1 (local)
    assert sim.nodes["b3"].status()["prt"] == 2 and sim.nodes["b3"].status()["srt"] == 2
    assert sim.nodes["b1"].status()["prt"] == 4  # three subs via b2, one local


def test_publications_are_spread_evenly_over_the_run():
    sim = run_line()
    t0 = sim.start_workload(0.0, 1.0)
    sim.run_for(2.0)
    ts = sorted(r["t"] - t0 for r in sim.events("publish"))
    assert len(ts) == 100
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    assert max(gaps) <= 10_000_001 and min(gaps) >= 9_999_999  # 100/s in total: every 10 ms
    assert ts[-1] < 1e9


def test_unsubscribe_and_resubscribe_at():
    sim = run_line(subs={"extra": {"unsubscribe_at": 1.0, "resubscribe_at": 2.0}})
    t0 = sim.start_workload(0.0, 3.0)
    sim.run_for(4.0)
    uns = sim.events("unsubscribe")
    assert {r["client"] for r in uns} == {"subs-0", "subs-1", "subs-2"}
    assert all(r["sub_id"].endswith(":s1") for r in uns)
    resubs = [r for r in sim.events("subscribe") if r["sub_id"].endswith(":s2")]
    assert len(resubs) == 3
    for c in ("subs-0", "subs-1", "subs-2"):
        ts = [r["t"] - t0 for r in sim.events("deliver", client=c)]
        assert any(t < 1e9 for t in ts) and any(t > 2.1e9 for t in ts)
        # nothing between the unsubscription reaching the broker and the resubscription
        assert not [t for t in ts if 1.01e9 < t < 2.0e9], c
    # state removed along the path: b1 holds the s2 subscriptions only
    assert sorted(sim.nodes["b1"].table.prt) == sorted(["all-0:s1", "subs-0:s2", "subs-1:s2", "subs-2:s2"])


@pytest.mark.parametrize("victim", ["b2", "b3", "b1"])
def test_broker_crash_and_restart_relearns_state_without_duplicates(victim):
    sim = run_line()
    before = {b: (sorted(sim.nodes[b].table.srt), sorted(sim.nodes[b].table.prt),
                  {h: sorted(s) for h, s in sim.nodes[b].table.sent.items()}) for b in LINE}
    t0 = sim.start_workload(0.0, 4.0)
    sim.run_for(1.0)
    sim.crash(victim)
    sim.run_for(0.5)
    sim.restart(victim)
    sim.run_for(3.0)
    after = {b: (sorted(sim.nodes[b].table.srt), sorted(sim.nodes[b].table.prt),
                 {h: sorted(s) for h, s in sim.nodes[b].table.sent.items()}) for b in LINE}
    assert after == before
    pubs, dl = pubs_and_delivers(sim)
    assert all(n == 1 for n in dl.values())  # never a duplicate
    assert sim.events("broker_resync")
    # every publication published after re-sync settled reaches all its subscribers
    f = parse("[class,eq,'STOCK'],[price,>,50]")
    late = [p for p in pubs.values() if p["t"] - t0 > 2.0e9]
    assert late
    for p in late:
        want = {"all-0"} | ({"subs-0", "subs-1", "subs-2"} if matches(f, p["attrs"]) else set())
        assert {c for (c, q) in dl if q == p["pub_id"]} == want
    if victim in ("b1", "b3"):
        assert sim.events("client_resync", broker=victim)
        # the client processes' re-syncs are framed too: the restarted broker logs them applied
        procs = {r["node"] for r in sim.events("client_resync", broker=victim)}
        assert procs <= {r["peer"] for r in sim.events("broker_resync_applied", node=victim)}


@pytest.mark.parametrize("covering", ["off", "active", "lazy"])
def test_covering_modes_deliver_the_same(covering):
    brokers = {"b1": ["b2"], "b2": ["b1", "b3"], "b3": ["b2"]}
    groups = {
        "pubs": {"role": "publisher", "count": 1, "attach": ["b1"], "rate_per_s": 100,
                 "extra": {"attrs": {"x": "uniform(0,10)"}}},
        "root": {"role": "subscriber", "count": 1, "attach": ["b3"], "filter": "[x,>,1]",
                 "extra": {"unsubscribe_at": 0.5}},
        "mid": {"role": "subscriber", "count": 2, "attach": ["b3"], "filter": "[x,>,3]"},
        "leaf": {"role": "subscriber", "count": 2, "attach": ["b3"], "filter": "[x,>,5],[x,<,9]"},
    }
    sim = Sim(topology(brokers, groups, {"covering": covering}))
    sim.start()
    sim.run_for(0.5)
    t0 = sim.start_workload(0.0, 1.5)
    sim.run_for(2.0)
    sim.shutdown()
    pubs, dl = pubs_and_delivers(sim)
    assert all(n == 1 for n in dl.values())
    for p in pubs.values():
        x = p["attrs"]["x"]
        got = {c for (c, q) in dl if q == p["pub_id"]}
        want = set()
        if x > 3:
            want |= {"mid-0", "mid-1"}
        if 5 < x < 9:
            want |= {"leaf-0", "leaf-1"}
        if x > 1 and p["t"] - t0 < 0.49e9:
            want |= {"root-0"}
        assert want <= got and got - want <= {"root-0"}, (x, got)
    c = [r for r in sim.events("broker_counters", node="b3")][-1]
    subs_out = {"off": 5, "active": 2, "lazy": 1}[covering]  # b3 -> b2
    unsubs_out = {"off": 1, "active": 1, "lazy": 0}[covering]
    assert (c["sub_out"], c["unsub_out"]) == (subs_out, unsubs_out)


def test_bad_messages_are_logged_and_ignored():
    sim = run_line()
    b1 = sim.nodes["b1"]
    b1.on_message("pubs", {"k": "sub", "id": "x", "f": "[a,eq,nope]", "c": "pubs-0"})
    b1.on_message("pubs", {"k": "sub", "id": "x", "f": "[a,eq,1]"})
    b1.on_message("b2", {"k": "what"})
    b1.on_message("pubs", {"k": "pub", "id": "z", "a": {}, "c": None})
    b1.on_message("b2", {"k": "pub", "id": "z", "a": 5, "c": "q"})
    bad = sim.events("broker_bad_message", node="b1")
    assert len(bad) == 5 and "col 7" in bad[0]["reason"]
    assert b1.status()["bad"] == 5


def test_resync_markers_log_when_a_restart_is_applied_and_carry_a_relearnt_subscription_on():
    """A subscription made while b2 is down (b3's frame to b2 is dropped) comes back in b3's re-sync;
    b2 applies it and carries the wave on to b1, which logs its own applied row for that wave. Every
    publication sent after the wave's last applied row reaches the new subscription."""
    sim = run_line(subs={"count": 1, "attach": ["b3"], "extra": {"unsubscribe_at": 0.6, "resubscribe_at": 0.8}})
    t0 = sim.start_workload(0.0, 3.0)
    sim.run_for(0.5)
    sim.crash("b2")
    sim.run_for(0.5)  # subs-0 withdraws s1 and subscribes s2 while b2 is down
    sim.restart("b2")
    sim.run_for(3.0)
    applied = sim.events("broker_resync_applied")
    sent = {(r["node"], r["peer"]) for r in sim.events("broker_resync")}
    # every re-sync sent after the restart was applied at its receiver, by its own wave
    for x, y in (("b1", "b2"), ("b3", "b2"), ("b2", "b1"), ("b2", "b3")):
        assert (x, y) in sent
        assert any(r["node"] == y and r["peer"] == x and r["wave"].startswith(f"{x}>{y}@") for r in applied), (x, y)
    # the re-learnt subscription travelled one more hop with a wave b2 did not start
    carried = [r for r in applied if r["node"] == "b1" and not r["wave"].startswith("b2>")]
    assert carried, applied
    w = carried[0]["wave"]
    assert sum(r["fwd"] for r in applied if r["wave"] == w) == len([r for r in applied if r["wave"] == w]) - 1
    assert "subs-0:s2" in sim.nodes["b1"].table.prt
    end_ns = max(r["t"] for r in applied if r["wave"] == w)
    pubs, dl = pubs_and_delivers(sim)
    f = parse("[class,eq,'STOCK'],[price,>,50]")
    late = [p for p in pubs.values() if p["t"] > end_ns and p["t"] < t0 + 3e9 and matches(f, p["attrs"])]
    assert late and all(("subs-0", p["pub_id"]) in dl for p in late)


def _line_with_state(tmp_path, sweep_groups):
    groups = {
        "pubs": {"role": "publisher", "count": 2, "attach": ["b1"], "rate_per_s": 50,
                 "extra": {"attrs": {"class": "STOCK", "price": "uniform(0,100)"}}},
        "subs": {"role": "subscriber", "count": 1, "attach": ["b3"], "filter": "[class,eq,'STOCK'],[price,>,50]",
                 "extra": sweep_groups},
        "all": {"role": "subscriber", "count": 1, "attach": ["b1"], "filter": "[class,eq,'STOCK']"},
    }
    cfgs = topology(LINE, groups, {"covering": "off"})
    for name, c in cfgs.items():
        c["state_dir"] = str(tmp_path / name)  # stable storage: a restarted broker knows it restarted
    sim = Sim(cfgs)
    sim.start()
    sim.run_for(0.5)
    return sim


def _b2_down_for_half_a_second(sim) -> None:
    """A 3 s workload; b2 crashes at 0.5 s and restarts at 1.0 s; the run goes on 3 s after that."""
    sim.start_workload(0.0, 3.0)
    sim.run_for(0.5)
    sim.crash("b2")
    sim.run_for(0.5)
    sim.restart("b2")
    sim.run_for(3.0)


def test_a_withdrawal_lost_while_a_broker_was_down_is_swept_by_its_full_resync(tmp_path):
    """subs-0 withdraws s1 (and subscribes s2) while b2 is down: b3's unsubscription to b2 is lost, so
    b1 keeps routing s1 to b2 after b2's restart (b2 drops those publications as unmatched). Once b2
    has applied the re-sync of both its neighbours it sends them a full re-sync; b1 withdraws s1."""
    sim = _line_with_state(tmp_path, {"unsubscribe_at": 0.6, "resubscribe_at": 0.8})
    _b2_down_for_half_a_second(sim)
    assert sim.nodes["b2"].complete and sim.nodes["b2"]._restarted
    assert not sim.nodes["b1"]._restarted and not sim.nodes["b3"]._restarted
    assert "subs-0:s1" not in sim.nodes["b1"].table.prt  # swept
    assert "subs-0:s2" in sim.nodes["b1"].table.prt  # what b2 holds stays
    assert sorted(sim.nodes["b1"].table.prt) == sorted(["all-0:s1", "subs-0:s2"])
    (swept,) = sim.events("broker_resync_swept", node="b1")
    assert swept["peer"] == "b2" and swept["unsubs"] == 1 and swept["unadvs"] == 0
    # the full re-syncs came after b2 had applied both neighbours' re-syncs; nothing else was swept
    assert not sim.events("broker_resync_swept", node="b3")
    pubs, dl = pubs_and_delivers(sim)
    assert all(n == 1 for n in dl.values())


def test_without_stable_storage_a_restarted_broker_sends_no_full_resync_and_the_stale_route_stays(tmp_path):
    sim = run_line(subs={"count": 1, "attach": ["b3"], "extra": {"unsubscribe_at": 0.6, "resubscribe_at": 0.8}})
    _b2_down_for_half_a_second(sim)
    assert "subs-0:s1" in sim.nodes["b1"].table.prt and not sim.events("broker_resync_swept")
