"""Publisher moves (section 4.4) on the in-memory runtime: a mobile publisher hosted in a broker
moves with the reconfiguration protocol; its advertisement is PREPAREd hop by hop with (2) and
COMMITted with (4) (SRT (adv, pre) becomes (adv, suc), the subscriptions it now attracts are
forwarded toward suc ahead of (4)), so every stationary subscriber keeps receiving its
publications exactly once, before, during and after the moves."""

from __future__ import annotations

import collections

from .harness import CHAIN, configs, duplicates, missing, run

PUB = {"p": {"count": 1, "role": "publisher", "rate": 50.0, "attrs": {"w": "cov", "x": "uniform(0,100)"},
             "start": ["b1"], "moving": 0, "workload": "random", "assign": "random", "start_by": "client",
             "pause": 10.0, "seed": 0}}
SUBS = {"near": {"role": "subscriber", "count": 1, "attach": ["b2"], "filter": "[w,eq,'cov']"},
        "far": {"role": "subscriber", "count": 2, "attach": ["b6", "b7"], "filter": "[w,eq,'cov'],[x,<,50]"}}


def path(a: str, b: str) -> list[str]:
    nb = collections.defaultdict(set)
    for x, ns in CHAIN.items():
        for y in ns:
            nb[x].add(y)
            nb[y].add(x)
    prev, q = {a: None}, [a]
    while q:
        x = q.pop(0)
        for y in sorted(nb[x]):
            if y not in prev:
                prev[y] = x
                q.append(y)
    out = [b]
    while out[-1] != a:
        out.append(prev[out[-1]])
    return out[::-1]


def test_a_publisher_moves_and_every_subscriber_keeps_receiving_exactly_once():
    moves = []

    def move(dst):
        def fn(sim):
            here = [b for b, n in sim.nodes.items() if getattr(n, "copies", {}).get("p-0") is not None
                    and n.copies["p-0"].state == "started"]
            assert len(here) == 1
            r = sim.nodes[here[0]].on_control("move", {"client": "p-0", "to": dst})
            assert r["ok"], r
            moves.append((here[0], dst))
        return fn

    sim = run(configs(CHAIN, PUB, SUBS), duration=5.0,
              actions=[(1.0, move("b6")), (2.5, move("b7")), (4.0, move("b1"))])
    ends = sim.events("move_end")
    assert [(e["src"], e["dst"], e["outcome"]) for e in ends] == [("b1", "b6", "commit"), ("b6", "b7", "commit"),
                                                                  ("b7", "b1", "commit")]
    pubs = sim.events("publish")
    assert len(pubs) > 150 and {p["broker"] for p in pubs} == {"b1", "b6", "b7"}  # it published from each
    delivered = collections.Counter(d["client"] for d in sim.events("deliver"))
    assert delivered["near-0"] > 150 and delivered["far-0"] > 50 and delivered["far-1"] > 50
    assert duplicates(sim) == []
    assert missing(sim) == []
    # the advertisement was prepared and committed at every broker of each path, and nothing else
    # was touched by a move; no tentative entry is left
    ch = collections.Counter((c["mid"], c["op"], c["node"]) for c in sim.events("rt_change") if c["mid"])
    for i, (a, b) in enumerate(moves, 1):
        for node in path(a, b):
            assert ch[(f"p-0#{i}", "prepare", node)] == 1 and ch[(f"p-0#{i}", "commit", node)] == 1
    assert all(c["owner"] == "p-0" for c in sim.events("rt_change") if c["mid"])
    dumps = {d["node"]: d for d in sim.events("rt_dump")}
    assert all(d["tentative"] == [] for d in dumps.values())
    # at the end every broker routes the advertisement toward b1, where the publisher is
    for b, d in dumps.items():
        want = "@p-0" if b == "b1" else path(b, "b1")[1]
        assert [e[1] for e in d["srt"] if e[0] == "p-0:a1"] == [want], b


def test_an_aborted_publisher_move_rolls_back_and_it_keeps_publishing_at_the_source():
    def move(sim):
        assert sim.nodes["b1"].on_control("move", {"client": "p-0", "to": "b6"})["ok"]

    # (2) is slower than the 3PC timeout (2 s): the source aborts and resumes
    sim = run(configs(CHAIN, PUB, SUBS), duration=5.0, actions=[(1.0, move)],
              delays={("b4", "b3"): 2500.0})
    [e] = sim.events("move_end")
    assert e["outcome"] == "abort"
    assert {p["broker"] for p in sim.events("publish")} == {"b1"}
    assert duplicates(sim) == []
    dumps = {d["node"]: d for d in sim.events("rt_dump")}
    assert all(d["tentative"] == [] for d in dumps.values())
    for b, d in dumps.items():
        want = "@p-0" if b == "b1" else path(b, "b1")[1]
        assert [x[1] for x in d["srt"] if x[0] == "p-0:a1"] == [want], b


def test_mobile_publisher_topology_keys(tmp_path):
    from .test_topology import errors, ok

    t = ok(tmp_path, "  mobile: {p: {count: 1, role: publisher, rate: 5/s, start: [b1], moving: 0}}\n")
    assert t.protocol_params.mobile["p"].rate == 5.0
    assert errors(tmp_path, "  mobile: {p: {count: 1, role: publisher}}\n") == [
        "13:15: params.mobile.p: a mobile publisher group needs rate (publications per second each)"]
    assert errors(tmp_path, "  mobile: {p: {count: 1, rate: 5/s}}\n") == [
        "13:15: params.mobile.p: rate and attrs are for mobile publishers (role: publisher)"]
    assert errors(tmp_path, "  movement: covering\n  mobile: {p: {count: 1, role: publisher, rate: 5/s}}\n") == [
        "13:3: params: mobile publishers move with the reconfiguration protocol only (section 4.4)"]
    assert errors(tmp_path, "  mobile: {p: {count: 1, role: publisher, rate: 5/s, attrs: {x: 'uniform(5,1)'}}}\n") == [
        "13:15: params.mobile.p: attrs.x: 'uniform(5,1)': uniform(a,b) needs a < b"]
