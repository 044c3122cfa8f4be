"""Routing additions for transactional mobility: the ``retract`` covering mode, tentative
(dual-hop) PRT/SRT entries with prepare/commit/abort, cause tags on routing changes.

A move is simulated on tables alone (no nodes): prepare along the path target -> source,
commit source -> target, as the reconfiguration protocol does, with publications checked
against brute force in every intermediate state.
"""

import collections
import copy
import random

import pytest

from testbed.protocols.pubsub.nodes.filters import matches, parse
from testbed.protocols.pubsub.nodes.routing import Change, Out, RoutingTable

from pubsub.test_routing import ADV_FILTERS, SUB_FILTERS, Net, rand_tree

F = parse


# ------------------------------------------------------------------ retract
def test_retract_unsubscribes_covered_when_the_cover_arrives_and_resubscribes_when_it_leaves():
    t = RoutingTable(["n1"], covering="retract")
    t.advertise("a", F("[x,isPresent,0]"), "n1")
    assert t.subscribe("s2", F("[x,>,5]"), "c/2") == [Out("n1", "sub", "s2", F("[x,>,5]"))]
    assert t.subscribe("s3", F("[x,>,6]"), "c/3") == []  # quenched (as active)
    t.cause, t.changes = "c#1", []
    out = t.subscribe("root", F("[x,>,0]"), "c/1")
    # the root travels first, then the subscription it covers is withdrawn
    assert out == [Out("n1", "sub", "root", F("[x,>,0]")), Out("n1", "unsub", "s2")]
    assert t.changes == [Change("c#1", "fwd", "sent", "root", "n1"), Change("c#1", "retract", "sent", "s2", "n1")]
    assert t.sizes()["covered"] == 2 and set(t.sent["n1"]) == {"root"}
    # the root leaves: the uncovered non-root goes out before the root's unsubscription
    out = t.unsubscribe("root", "c/1")
    assert out == [Out("n1", "sub", "s2", F("[x,>,5]")), Out("n1", "unsub", "root")]
    assert set(t.sent["n1"]) == {"s2"}
    # active never retracts: the same sequence sends no unsubscription of s2
    a = RoutingTable(["n1"], covering="active")
    a.advertise("a", F("[x,isPresent,0]"), "n1")
    a.subscribe("s2", F("[x,>,5]"), "c/2")
    assert a.subscribe("root", F("[x,>,0]"), "c/1") == [Out("n1", "sub", "root", F("[x,>,0]"))]


def test_retract_keeps_the_earlier_of_two_equal_filters():
    t = RoutingTable(["n1"], covering="retract")
    t.advertise("a", F("[x,isPresent,0]"), "n1")
    t.subscribe("first", F("[x,>,1]"), "c/1")
    assert t.subscribe("second", F("[x,>,1]"), "c/2") == []  # quenched by an equal filter
    # withdrawing the first forwards the second, then unsubscribes the first
    assert t.unsubscribe("first", "c/1") == [Out("n1", "sub", "second", F("[x,>,1]")), Out("n1", "unsub", "first")]


def test_retract_costs_messages_when_a_root_moves_back_and_forth():
    """The paper's pathological case: moving the covering root costs O(children) messages."""
    counts = {}
    for mode in ("active", "retract"):
        net = Net([("b0", "b1"), ("b1", "b2"), ("b2", "b3")], mode)
        net.op("b0", "adv", "p:a", "p", F("[x,isPresent,0]"))
        for i in range(5):
            net.op("b3", "sub", f"leaf{i}", f"l{i}", F(f"[x,>=,{10 * i}],[x,<,{10 * i + 10}]"))
        net.op("b3", "sub", "root", "r", F("[x,>=,0],[x,<,100]"))
        net.msgs = 0
        net.op("b3", "unsub", "root", "r")  # the root leaves b3 ...
        net.op("b2", "sub", "root2", "r", F("[x,>=,0],[x,<,100]"))  # ... and arrives at b2
        counts[mode] = net.msgs
        net.publish("b0", "p", {"x": 15}, "z")
        assert {k for k, _ in net.delivered} == {"l1", "r"}
    # active forwarded the leaves before the root came and never retracts them, so the root's
    # move costs its own (un)subscription only; retract re-forwards and re-retracts the leaves
    assert counts["retract"] > counts["active"]


@pytest.mark.parametrize("seed", range(4))
def test_retract_random_network_delivers_exactly_once_and_cleans_up(seed):
    rng = random.Random(100 + seed)
    brokers = 7
    net = Net(rand_tree(rng, brokers), "retract")
    subs, advs = {}, {}
    clients = [f"k{i}" for i in range(10)]
    home = {c: f"b{rng.randrange(brokers)}" for c in clients}
    for step in range(60):
        r = rng.random()
        c = rng.choice(clients)
        if r < 0.4:
            sid = f"{c}:s{step}"
            subs[sid] = (c, F(rng.choice(SUB_FILTERS)))
            net.op(home[c], "sub", sid, c, subs[sid][1])
        elif r < 0.6 and subs:
            sid = rng.choice(sorted(subs))
            sc, _ = subs.pop(sid)
            net.op(home[sc], "unsub", sid, sc)
        elif r < 0.8:
            aid = f"{c}:a{step}"
            advs[aid] = (c, F(rng.choice(ADV_FILTERS)))
            net.op(home[c], "adv", aid, c, advs[aid][1])
        elif advs:
            aid = rng.choice(sorted(advs))
            ac, _ = advs.pop(aid)
            net.op(home[ac], "unadv", aid, ac)
        for aid, (ac, af) in sorted(advs.items()):
            for x in (-1, 0, 2.5, 3, 5, 7, 8):
                for y in ("a", "b"):
                    attrs = {"x": x, "y": y}
                    if not matches(af, attrs):
                        continue
                    pid = f"{aid}:{step}:{x}:{y}"
                    net.publish(home[ac], ac, attrs, pid)
                    want = {sc for sc, sf in subs.values() if matches(sf, attrs)} - {ac}
                    got = net.by_pub[pid]
                    assert set(got) == want and all(v == 1 for v in got.values()), (step, attrs)
    for sid, (sc, _) in sorted(subs.items()):
        net.op(home[sc], "unsub", sid, sc)
    for aid, (ac, _) in sorted(advs.items()):
        net.op(home[ac], "unadv", aid, ac)
    for name, t in net.tables.items():
        assert t.sizes() == {"srt": 0, "prt": 0, "covered": 0, "sent": 0, "retired": 0}, name


# ------------------------------------------------------------------ tentative entries
def path_between(net, a, b):
    prev = {a: None}
    q = collections.deque([a])
    while q:
        x = q.popleft()
        for y in net.tables[x].neighbors:
            if y not in prev:
                prev[y] = x
                q.append(y)
    p = [b]
    while p[-1] != a:
        p.append(prev[p[-1]])
    return p[::-1]


def prepare(net, path, mid, sid, f, client):
    for m in range(len(path) - 1, -1, -1):  # target first, as message (2) travels
        new = path[m + 1] if m + 1 < len(path) else "c/" + client + "@T"
        assert net.tables[path[m]].prepare_sub(mid, sid, f, new) == []


def commit(net, path, mid, sid):
    for m, b in enumerate(path):  # source first, as message (4) travels
        assert net.tables[b].commit_sub(mid, sid, path[m - 1] if m else None) == []


def abort(net, path, mid, sid):
    for b in path:
        assert net.tables[b].abort_sub(mid, sid) == []


def deliveries(net, advs, attrs_list, tag):
    got = {}
    for aid, (ac, af, home) in sorted(advs.items()):
        for attrs in attrs_list:
            if matches(af, attrs):
                pid = f"{tag}:{aid}:{attrs}"
                net.publish(home, ac, attrs, pid)
                got[pid] = dict(net.by_pub[pid])
    return got


ATTRS = [{"x": x, "y": y} for x in (-1, 0, 2.5, 3, 5, 7, 8) for y in ("a", "b")]


@pytest.mark.parametrize("seed", range(6))
def test_move_by_prepare_commit_keeps_exactly_once_and_ends_like_a_fresh_subscription(seed):
    rng = random.Random(seed)
    edges = rand_tree(rng, 8)
    net = Net(edges, "off")
    fresh_net = Net(edges, "off")
    advs = {}
    for i in range(4):
        b = f"b{rng.randrange(8)}"
        f = F(rng.choice(ADV_FILTERS))
        advs[f"p{i}:a"] = (f"p{i}", f, b)
        for n in (net, fresh_net):
            n.op(b, "adv", f"p{i}:a", f"p{i}", f)
    others = []
    for i in range(5):  # stationary subscribers (must be untouched)
        b, f = f"b{rng.randrange(8)}", F(rng.choice(SUB_FILTERS))
        others.append((f"o{i}", f, b))
        for n in (net, fresh_net):
            n.op(b, "sub", f"o{i}:s", f"o{i}", f)
    src, tgt = "b0", f"b{rng.randrange(1, 8)}"
    f = F(rng.choice(SUB_FILTERS))
    net.op(src, "sub", "m:s1", "m", f)
    fresh_net.op(tgt, "sub", "m:s1", "m@T", f)
    path = path_between(net, src, tgt)
    before = copy.deepcopy({b: (t.prt, t.wanted, t.sent) for b, t in net.tables.items()})
    msgs = net.msgs

    # prepared: every matching publication reaches the source copy AND the target copy once
    prepare(net, path, "m#1", "m:s1", f, "m")
    for pid, got in deliveries(net, advs, ATTRS, "prep").items():
        attrs = eval(pid.split(":", 3)[3])
        if matches(f, attrs) and not pid.split(":")[1].startswith("m"):
            assert got.get("m") == 1 and got.get("m@T") == 1, (pid, got)
        assert all(v == 1 for v in got.values())
    # abort restores exactly the state before
    abort(net, path, "m#1", "m:s1")
    assert {b: (t.prt, t.wanted, t.sent) for b, t in net.tables.items()} == before
    assert all(not t.tentative for t in net.tables.values())

    # prepare again, commit: no message sent, and publications reach the target only
    prepare(net, path, "m#2", "m:s1", f, "m")
    for t in net.tables.values():
        t.changes = []
    commit(net, path, "m#2", "m:s1")
    assert net.msgs == msgs
    for b in path:
        ops = [(c.cause, c.op) for c in net.tables[b].changes]
        assert ops == [("m#2", "commit")]
    assert all(not t.tentative and len(t.index) == len(t.prt) for t in net.tables.values())
    moved = deliveries(net, advs, ATTRS, "after")
    fresh = deliveries(fresh_net, advs, ATTRS, "after")
    assert moved == fresh
    # the tables off the path are untouched (Claim 1), and the stationary entries everywhere
    for b, t in net.tables.items():
        if b not in path:
            assert (t.prt, t.wanted, t.sent) == before[b]
        assert {k: (e.hop, e.filter) for k, e in t.prt.items() if k != "m:s1"} == \
            {k: (e.hop, e.filter) for k, e in before[b][0].items() if k != "m:s1"}
    # withdrawing the moved subscription at the target cleans every table
    net.op(tgt, "unsub", "m:s1", "m@T")
    for b, t in net.tables.items():
        assert "m:s1" not in t.prt and all("m:s1" not in s for s in t.sent.values()), b
    # and subscriptions and advertisements issued after the move still route exactly once
    net.op(tgt, "sub", "m:s2", "m@T", f)
    fresh_net.op(tgt, "unsub", "m:s1", "m@T")
    fresh_net.op(tgt, "sub", "m:s2", "m@T", f)
    assert deliveries(net, advs, ATTRS, "late") == deliveries(fresh_net, advs, ATTRS, "late")


def test_tentative_entries_need_covering_off_and_unknown_ids_are_no_ops():
    t = RoutingTable(["n1"], covering="retract")
    with pytest.raises(ValueError):
        t.prepare_sub("m#1", "s", F("[x,>,1]"), "n1")
    t = RoutingTable(["n1"])
    assert t.commit_sub("m#1", "nope", None) == [] and t.abort_sub("m#1", "nope") == []
    t.changes = []
    t.prepare_sub("m#1", "s", F("[x,>,1]"), "n1")
    assert t.dump()["tentative"] == [["m#1", "s", "n1"]]
    assert t.route({"x": 2}) == {"n1"}  # the tentative hop routes before any commit
    assert t.changes == [Change("m#1", "prepare", "prt", "s", "n1")]


def test_publisher_move_commit_redirects_subscriptions_toward_the_new_place():
    # b0 - b1 - b2; publisher moves b0 -> b2; a subscriber at b1 and one at b2
    net = Net([("b0", "b1"), ("b1", "b2")], "off")
    af = F("[x,isPresent,0]")
    net.op("b0", "adv", "p:a", "p", af)
    net.op("b1", "sub", "s1", "k1", F("[x,>,1]"))
    net.op("b2", "sub", "s2", "k2", F("[x,>,5]"))
    path = ["b0", "b1", "b2"]
    for m in (2, 1, 0):
        new = path[m + 1] if m < 2 else "c/p@T"
        assert net.tables[path[m]].prepare_adv("p#1", "p:a", af, new) == []
    for m, b in enumerate(path):
        net.emit(b, net.tables[b].commit_adv("p#1", "p:a", path[m - 1] if m else None))
        net.run()
    assert all(not t.tentative_adv for t in net.tables.values())
    assert net.tables["b0"].srt["p:a"].hop == "b1" and net.tables["b2"].srt["p:a"].hop == "c/p@T"
    net.publish("b2", "p@T", {"x": 9}, "z")
    assert dict(net.by_pub["z"]) == {"k1": 1, "k2": 1}
    # the subscriptions no longer flow toward the old place
    assert "s1" not in net.tables["b0"].prt and "s2" not in net.tables["b0"].prt
