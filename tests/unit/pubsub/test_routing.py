"""Pure routing tables: SRT/PRT, covering modes, re-sync, matching index.

Network tests run RoutingTables on a random tree with FIFO links (a tiny synchronous
simulator) and compare who receives each publication with brute force.
"""

import collections
import itertools
import random

import pytest

from testbed.protocols.pubsub.nodes.filters import covers, make, matches, parse, Pred
from testbed.protocols.pubsub.nodes.routing import MatchIndex, Out, RoutingTable

F = parse


def test_matchindex_eq_and_scan():
    ix = MatchIndex()
    ix.add("s1", F("[topic,eq,3]"), "a")
    ix.add("s2", F("[topic,eq,3],[x,>,1]"), "b")
    ix.add("s3", F("[x,>,1]"), "c")
    ix.add("s4", F("[sym,str-prefix,'IB']"), "d")
    ix.add("s5", F("[topic,eq,3.0]"), "e")
    ix.add("s6", F("[a,eq,1],[a,eq,2]"), "f")  # unsatisfiable
    assert ix.hops({"topic": 3}) == {"a", "e"}
    assert ix.hops({"topic": 3, "x": 2}) == {"a", "b", "c", "e"}
    assert ix.hops({"topic": "3", "x": 2.5}) == {"c"}
    assert ix.hops({"topic": True}) == set()  # bool is not a number
    assert ix.hops({"sym": "IBM", "x": [1]}) == {"d"}
    ix.remove("s1"); ix.remove("s5"); ix.remove("s6"); ix.remove("nope")
    assert ix.hops({"topic": 3}) == set()
    assert len(ix) == 3


def test_matchindex_agrees_with_matches():
    rng = random.Random(5)
    ops = ["eq", "neq", "<", "<=", ">", ">=", "isPresent", "str-prefix"]
    filters = []
    for i in range(200):
        preds = []
        for _ in range(rng.randint(1, 3)):
            op = rng.choice(ops)
            v = rng.choice(["", "a", "b", "ab"]) if op == "str-prefix" or rng.random() < .4 else rng.randint(0, 4)
            preds.append(Pred(rng.choice("xyz"), op, v))
        filters.append(make(preds))
    ix = MatchIndex()
    for i, f in enumerate(filters):
        ix.add(f"s{i}", f, f"h{i}")
    vals = [None, 0, 1, 2.5, 4, "", "a", "ab", "b", "ba"]
    for vx, vy, vz in itertools.product(vals, repeat=3):
        pub = {k: v for k, v in zip("xyz", (vx, vy, vz)) if v is not None}
        assert ix.hops(pub) == {f"h{i}" for i, f in enumerate(filters) if matches(f, pub)}


def test_single_broker_basics():
    t = RoutingTable(["n1", "n2"])
    out = t.advertise("p:a1", F("[class,eq,'S']"), "c/p")
    assert out == [Out("n1", "adv", "p:a1", F("[class,eq,'S']")), Out("n2", "adv", "p:a1", F("[class,eq,'S']"))]
    assert t.advertise("p:a1", F("[class,eq,'S']"), "n1") == []  # duplicate id ignored
    # a subscription with no advertisement from a neighbour is kept, not forwarded
    assert t.subscribe("s:1", F("[class,eq,'S']"), "c/s") == []
    assert t.route({"class": "S"}, "c/p") == {"c/s"}
    assert t.route({"class": "S"}, "c/s") == set()
    # an advertisement from n1 attracts it
    out = t.advertise("q:a1", F("[class,isPresent,'']"), "n1")
    assert Out("n1", "sub", "s:1", F("[class,eq,'S']")) in out and Out("n2", "adv", "q:a1", F("[class,isPresent,'']")) in out
    assert t.unsubscribe("s:1", "n2") == []  # wrong hop ignored
    assert t.unsubscribe("s:1", "c/s") == [Out("n1", "unsub", "s:1")]
    assert t.unadvertise("q:a1", "n1") == [Out("n2", "unadv", "q:a1")]
    assert t.unadvertise("p:a1", "c/p") == [Out("n1", "unadv", "p:a1"), Out("n2", "unadv", "p:a1")]
    assert t.sizes()["srt"] == 0 and t.sizes()["prt"] == 0 and t.sizes()["sent"] == 0


def test_unadvertise_withdraws_subscriptions_routed_only_for_it():
    t = RoutingTable(["n1"])
    t.advertise("a", F("[x,<,10]"), "n1")
    t.advertise("b", F("[x,>,100]"), "n1")
    assert t.subscribe("s", F("[x,<,5]"), "c/s") == [Out("n1", "sub", "s", F("[x,<,5]"))]
    assert t.unadvertise("b", "n1") == []  # s still wanted because of a
    assert t.unadvertise("a", "n1") == [Out("n1", "unsub", "s")]
    assert "s" in t.prt  # kept; forwarded again when an advertisement attracts it
    assert t.advertise("c", F("[x,eq,1]"), "n1") == [Out("n1", "sub", "s", F("[x,<,5]"))]


def test_active_covering_forwards_uncovered_before_unsub():
    t = RoutingTable(["n1"], covering="active")
    t.advertise("a", F("[x,isPresent,0]"), "n1")
    assert t.subscribe("big", F("[x,>,0]"), "c/1") == [Out("n1", "sub", "big", F("[x,>,0]"))]
    assert t.subscribe("small", F("[x,>,5]"), "c/2") == []  # quenched
    assert t.subscribe("small2", F("[x,>,6]"), "c/3") == []
    assert t.sizes()["covered"] == 2
    out = t.unsubscribe("big", "c/1")
    # small is forwarded (and now covers small2), then big is withdrawn
    assert out == [Out("n1", "sub", "small", F("[x,>,5]")), Out("n1", "unsub", "big")]
    assert t.unsubscribe("small2", "c/3") == []
    assert t.unsubscribe("small", "c/2") == [Out("n1", "unsub", "small")]


def test_lazy_covering_retires_instead_of_forwarding():
    t = RoutingTable(["n1"], covering="lazy")
    t.advertise("a", F("[x,isPresent,0]"), "n1")
    t.subscribe("big", F("[x,>,0]"), "c/1")
    t.subscribe("small", F("[x,>,5]"), "c/2")
    assert t.unsubscribe("big", "c/1") == []  # big retired, still covers small downstream
    assert t.route({"x": 1}) == set() and t.route({"x": 6}) == {"c/2"}
    assert t.sizes()["retired"] == 1
    assert t.subscribe("small3", F("[x,>,7]"), "c/3") == []  # quenched by the retired cover
    assert t.unsubscribe("small", "c/2") == []  # small3 still relies on big
    assert t.unsubscribe("small3", "c/3") == [Out("n1", "unsub", "big")]
    assert t.sizes() == {"srt": 1, "prt": 0, "covered": 0, "sent": 0, "retired": 0}
    assert t.resync("n1") == []  # the advertisement came from n1


def test_resync_sends_advs_not_from_peer_and_subs_sent_to_peer():
    t = RoutingTable(["n1", "n2"])
    t.advertise("a1", F("[x,eq,1]"), "n1")
    t.advertise("a2", F("[x,eq,2]"), "n2")
    t.advertise("a3", F("[x,eq,3]"), "c/p")
    t.subscribe("s1", F("[x,eq,1]"), "c/s")
    t.subscribe("s2", F("[x,eq,2]"), "n1")
    assert t.resync("n1") == [Out("n1", "adv", "a2", F("[x,eq,2]")), Out("n1", "adv", "a3", F("[x,eq,3]")),
                              Out("n1", "sub", "s1", F("[x,eq,1]"))]
    assert t.resync("c/s") == []
    with pytest.raises(ValueError):
        RoutingTable([], covering="eager")


def test_sweep_withdraws_what_a_full_resync_did_not_resend_and_passes_the_withdrawals_on():
    t = RoutingTable(["n1", "n2"])
    t.advertise("a1", F("[x,eq,1]"), "n1")  # n1's side publishes x=1
    t.advertise("a2", F("[x,eq,2]"), "n2")  # n2's side publishes x=2 (withdrawn while the link was down)
    t.subscribe("s1", F("[x,eq,1]"), "n2")  # forwarded to n1
    t.subscribe("s2", F("[x,eq,1]"), "n2")  # withdrawn at n2 while the link was down
    t.subscribe("s3", F("[x,eq,2]"), "c/s")  # a local client's, forwarded to n2 because of a2
    gone_a, gone_s, out = t.sweep("n2", advs=[], subs=["s1"])
    assert (gone_a, gone_s) == (["a2"], ["s2"])
    assert out == [Out("n1", "unsub", "s2"), Out("n1", "unadv", "a2"), Out("n2", "unsub", "s3")]
    assert sorted(t.prt) == ["s1", "s3"] and sorted(t.srt) == ["a1"]
    assert t.sweep("n2", advs=[], subs=["s1"]) == ([], [], [])  # nothing left to withdraw
    assert t.sweep("c/s", advs=[], subs=[]) == ([], [], [])  # not a neighbour


# ------------------------------------------------------------------ network simulation
class Net:
    """Brokers on a tree with FIFO links; clients are hops "c/<name>" at their broker."""

    def __init__(self, edges, covering):
        nb = collections.defaultdict(list)
        for a, b in edges:
            nb[a].append(b)
            nb[b].append(a)
        self.tables = {b: RoutingTable(sorted(nb[b]), covering) for b in nb}
        self.q = collections.deque()
        self.delivered = collections.Counter()
        self.by_pub = collections.defaultdict(collections.Counter)
        self.msgs = 0

    def emit(self, src, outs):
        for o in outs:
            self.q.append((src, o))

    def run(self):
        while self.q:
            src, o = self.q.popleft()
            self.msgs += 1
            t = self.tables[o.dst]
            if o.kind == "adv":
                self.emit(o.dst, t.advertise(o.id, o.filter, src))
            elif o.kind == "unadv":
                self.emit(o.dst, t.unadvertise(o.id, src))
            elif o.kind == "sub":
                self.emit(o.dst, t.subscribe(o.id, o.filter, src))
            else:
                self.emit(o.dst, t.unsubscribe(o.id, src))

    def op(self, broker, kind, id, client, f=None):
        t = self.tables[broker]
        fn = {"adv": t.advertise, "unadv": t.unadvertise, "sub": t.subscribe, "unsub": t.unsubscribe}[kind]
        self.emit(broker, fn(id, f, "c/" + client) if f is not None else fn(id, "c/" + client))
        self.run()

    def publish(self, broker, client, attrs, pub_id):
        stack = [(broker, "c/" + client)]
        while stack:
            b, frm = stack.pop()
            for h in self.tables[b].route(attrs, frm):
                if h.startswith("c/"):
                    self.delivered[(h[2:], pub_id)] += 1
                    self.by_pub[pub_id][h[2:]] += 1
                else:
                    stack.append((h, b))


def rand_tree(rng, n):
    return [(f"b{i}", f"b{rng.randrange(i)}") for i in range(1, n)]


SUB_FILTERS = ["[x,>,0]", "[x,>,2]", "[x,>,2],[x,<,6]", "[x,eq,3]", "[x,<,4]", "[x,isPresent,0]",
               "[y,eq,'a']", "[y,str-prefix,'a'],[x,>,1]", "[x,>=,5]", "[x,neq,3]"]
ADV_FILTERS = ["[x,>=,0],[x,<=,4]", "[x,>=,3],[x,<=,8],[y,eq,'a']", "[x,isPresent,0]", "[x,eq,7]",
               "[x,<,0]"]


@pytest.mark.parametrize("covering", ["off", "active", "lazy"])
@pytest.mark.parametrize("seed", range(3))
def test_random_network_delivers_exactly_once_and_cleans_up(covering, seed):
    rng = random.Random(seed * 7 + len(covering))
    brokers = 7
    net = Net(rand_tree(rng, brokers), covering)
    subs = {}  # sub_id -> (client, filter, broker)
    advs = {}  # adv_id -> (client, filter, broker)
    clients = [f"k{i}" for i in range(10)]
    home = {c: f"b{rng.randrange(brokers)}" for c in clients}
    n = 0
    for step in range(60):
        n += 1
        r = rng.random()
        c = rng.choice(clients)
        if r < 0.35:
            sid = f"{c}:s{n}"
            subs[sid] = (c, F(rng.choice(SUB_FILTERS)))
            net.op(home[c], "sub", sid, c, subs[sid][1])
        elif r < 0.55 and subs:
            sid = rng.choice(sorted(subs))
            sc, _ = subs.pop(sid)
            net.op(home[sc], "unsub", sid, sc)
        elif r < 0.75:
            aid = f"{c}:a{n}"
            advs[aid] = (c, F(rng.choice(ADV_FILTERS)))
            net.op(home[c], "adv", aid, c, advs[aid][1])
        elif r < 0.85 and advs:
            aid = rng.choice(sorted(advs))
            ac, _ = advs.pop(aid)
            net.op(home[ac], "unadv", aid, ac)
        # publish from every advertised space, check against brute force
        for aid, (ac, af) in sorted(advs.items()):
            for x in (-1, 0, 1, 2.5, 3, 4, 5, 7, 8):
                for y in ("a", "b"):
                    attrs = {"x": x, "y": y}
                    if not matches(af, attrs):
                        continue
                    pid = f"{aid}:{step}:{x}:{y}"
                    net.publish(home[ac], ac, attrs, pid)
                    want = {sc for sc, sf in subs.values() if matches(sf, attrs)} - {ac}
                    got = net.by_pub[pid]
                    assert set(got) == want, (covering, step, attrs)
                    assert all(cnt == 1 for cnt in got.values())
    # withdraw everything: every table must be empty again
    for sid, (sc, _) in sorted(subs.items()):
        net.op(home[sc], "unsub", sid, sc)
    for aid, (ac, _) in sorted(advs.items()):
        net.op(home[ac], "unadv", aid, ac)
    for name, t in net.tables.items():
        assert t.sizes() == {"srt": 0, "prt": 0, "covered": 0, "sent": 0, "retired": 0}, name
        assert len(t.index) == 0


def test_covering_saves_subscription_messages():
    counts = {}
    for mode in ("off", "active", "lazy"):
        net = Net([("b0", "b1"), ("b1", "b2"), ("b2", "b3")], mode)
        net.op("b0", "adv", "p:a", "p", F("[x,isPresent,0]"))
        net.msgs = 0
        net.op("b3", "sub", "root", "r", F("[x,>,0]"))
        for i in range(5):
            net.op("b3", "sub", f"leaf{i}", f"l{i}", F(f"[x,>,{i + 1}]"))
        net.op("b3", "unsub", "root", "r")
        counts[mode] = net.msgs
        net.publish("b0", "p", {"x": 9}, "z")
        assert {k for k, _ in net.delivered} == {f"l{i}" for i in range(5)}
    assert counts["off"] == 3 * 7  # 6 subs + 1 unsub over 3 links
    assert counts["active"] == 3 * 3  # root, then leaf0 forwarded + root withdrawn
    assert counts["lazy"] == 3 * 1  # only root; it stays retired
