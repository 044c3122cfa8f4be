"""Pure parts of Gryphon: tick sets, streams, the filter edge, subends, pubend log, cells, filters."""

import os

import pytest

from testbed.protocols.gryphon.nodes.cells import CellMap, bundle_pick
from testbed.protocols.gryphon.nodes.summary import Summary, SubscriberIndex, filter_from_wire, filter_of, key_filter, spec_json
from testbed.protocols.pubsub.nodes.filters import FilterError
from testbed.protocols.gryphon.nodes.pubend import Pubend, PubendLog
from testbed.protocols.gryphon.nodes.streams import KnowledgeStream, OStream, SubendStream, project
from testbed.protocols.gryphon.nodes.ticks import IntervalSet, chop


def m(k=0):
    return {"seq": k, "c": "p", "a": {"k": k}, "pt": 0}


# -- ticks ---------------------------------------------------------------------------
def test_interval_set_add_merge_remove_gaps():
    s = IntervalSet()
    assert s.add(10, 20) == [(10, 20)]
    assert s.add(15, 25) == [(20, 25)]
    assert s.add(30, 40) == [(30, 40)]
    assert s.intervals() == [(10, 25), (30, 40)]
    assert s.add(25, 30) == [(25, 30)]
    assert s.intervals() == [(10, 40)]
    s.remove(12, 14)
    assert s.intervals() == [(10, 12), (14, 40)]
    assert s.gaps(0, 50) == [(0, 10), (12, 14), (40, 50)]
    assert s.contains(11) and not s.contains(12) and s.contains(14)
    assert s.run_end(14) == 40 and s.run_end(12) == 12
    assert s.covers(15, 40) and not s.covers(11, 15)
    assert s.overlaps(39, 45) and not s.overlaps(40, 45)
    s.remove_below(20)
    assert s.intervals() == [(20, 40)]


def test_chop():
    assert chop(0, 1200, 500) == [(0, 500), (500, 1000), (1000, 1200)]
    assert chop(5, 5, 500) == []
    # a range from tick 0 to now (a subend that never heard of the pubend) is at most MAX_PIECES pieces
    from testbed.protocols.gryphon.nodes.ticks import MAX_PIECES
    # (the real range is ~1.7e12 ticks wide; 1e8 keeps a regression to 200,000 pieces, not 3.4e9)
    now = 100_000_007
    pieces = chop(0, now, 500)
    assert len(pieces) == MAX_PIECES and pieces[0][0] == 0 and pieces[-1][1] == now
    assert all(b == c for (_, b), (c, _) in zip(pieces, pieces[1:]))  # contiguous, nothing left out


# -- knowledge streams ------------------------------------------------------------------
def test_knowledge_accumulate_lookup_and_ack_forgets():
    k = KnowledgeStream()
    nf, nd = k.accumulate([(0, 10)], [(10, m(1))])
    assert nf == [(0, 10)] and [t for t, _ in nd] == [10]
    nf, nd = k.accumulate([(11, 20)], [(20, m(2))])
    # second copy of the same knowledge is not new
    assert k.accumulate([(11, 20)], [(20, m(2))]) == ([], [])
    k.accumulate([(30, 35)], [])
    f, d, q = k.lookup(5, 40)
    assert [t for t, _ in d] == [10, 20]
    assert f == [(5, 10), (11, 20), (30, 35)]
    assert q == [(21, 30), (35, 40)]
    k.ack(15)
    assert 10 not in k.data and k.dticks == [20] and not k.is_q(12)
    f, d, q = k.lookup(0, 21)
    assert f[0] == (0, 15) and [t for t, _ in d] == [20]


def test_project_first_time_filter_and_silence():
    o = OStream("c", match=lambda a: a.get("k") == 1)
    # D passes the filter -> D goes down with its bracketing silence
    out = project(o, [(0, 10)], [(10, m(1))], rt=False)
    assert out == ([(0, 10)], [(10, m(1))])
    # a filtered D becomes F; a message that became pure silence goes only if curious
    assert project(o, [(11, 20)], [(20, m(2))], rt=False) is None
    o.curious.add(15, 25)
    out = project(o, [(11, 20)], [(20, m(2))], rt=False)
    assert out is not None and out[1] == [] and (20, 21) in out[0]
    assert not o.curious.contains(20) and o.curious.contains(21)


def test_project_retransmission_only_curious_ticks():
    o = OStream("c")
    assert project(o, [(0, 10)], [(10, m(1)), (12, m(2))], rt=True) is None
    o.curious.add(11, 13)
    f, d = project(o, [(0, 10), (11, 12)], [(10, m(1)), (12, m(2))], rt=True)
    assert d == [(12, m(2))] and f == [(11, 12)]  # D at 10 not curious -> removed (Q)
    assert not o.curious


def test_effective_ack_extends_over_silence_and_filtered_data():
    k = KnowledgeStream()
    k.accumulate([(0, 10), (11, 20), (21, 30)], [(10, m(2)), (20, m(1))])
    o = OStream("c", match=lambda a: a.get("k") == 1)
    assert o.effective_ack(k) == 20  # D@10 is filtered (F for c), D@20 is not acked
    o.acked = 21
    assert o.effective_ack(k) == 30
    assert OStream("x").effective_ack(k) == 10


# -- subends --------------------------------------------------------------------------
def test_subend_doubt_horizon_delivers_in_order_after_gap_filled():
    s = SubendStream(gct=0.2, nrt_min=0.6)
    assert [t for t, _ in s.accumulate([(0, 10)], [(10, m(1))])] == [10]
    assert s.td == 11
    # 20 arrives, 11..19 unknown (its F prefix was lost): nothing delivered, a gap
    assert s.accumulate([], [(20, m(2))]) == []
    assert s.check(0.0, 0) == []  # gap seen now
    assert s.check(0.1, 0) == []  # GCT not expired
    assert s.check(0.25, 0) == [(11, 20, "gct")]
    assert s.check(0.5, 0) == []  # NRT (0.6) not expired
    assert s.check(0.9, 0) == [(11, 20, "nrt")]
    assert s.check(1.6, 0) == []  # backoff: next repeat after 2 x 0.6
    assert s.check(2.2, 0) == [(11, 20, "nrt")]
    out = s.accumulate([(11, 20)], [])
    assert [t for t, _ in out] == [20] and s.td == 21
    assert s.check(3.0, 0) == [] and s.entries == []


def test_subend_nack_round_trip_sets_nrt_like_rto():
    s = SubendStream(gct=0.1, nrt_min=0.2)
    s.accumulate([(0, 10)], [(10, m(1)), (20, m(2))])
    s.check(0.0, 0)
    assert s.check(0.1, 0) == [(11, 20, "gct")]
    s.accumulate([(11, 20)], [])
    s.check(1.1, 0)  # resolved 1.0 s after one nack: RTT sample
    assert s.srtt == pytest.approx(1.0) and s.rto == pytest.approx(3.0)


def test_subend_chops_large_nacks_and_ackexpected_and_dct():
    s = SubendStream(gct=0.2, nrt_min=0.6, chunk=500)
    s.accumulate([(0, 100)], [])
    out = s.expect(1300, 0.0, "aet")  # AckExpected: nack every Q tick below T now
    assert out == [(100, 600, "aet"), (600, 1100, "aet"), (1100, 1300, "aet")]
    d = SubendStream(gct=0.2, nrt_min=0.6, dct=1.0)
    d.accumulate([(0, 100)], [])
    assert d.check(0.0, 1000) == []  # trails real time by 0.9 s
    assert d.check(0.0, 1200) == [(100, 200, "dct")]
    inf = SubendStream(gct=0.2, nrt_min=0.6, dct=None)
    inf.accumulate([(0, 100)], [])
    assert inf.check(100.0, 10**9) == []  # DCT infinite: no nacks while nothing arrives


# -- pubend -----------------------------------------------------------------------------
def test_pubend_stream_shape_and_silence():
    p = Pubend("p1/a")
    t1 = p.assign(1000, m(1))
    p.first_publication_prefix(t1)
    t2 = p.assign(1000, m(2))
    assert (t1, t2) == (1000, 1001)
    f, d = p.stable()
    assert f == [(0, 1000)] and [t for t, _ in d] == [1000, 1001]
    assert p.silence(1500) == (1002, 1500)
    t3 = p.assign(1400, m(3))  # never before the silence horizon
    assert t3 == 1500
    f, d = p.stable()
    assert f == [(0, 1000), (1002, 1500)]  # F* prefix, then the silence since the previous D
    k = p.k
    fq, dq, q = k.lookup(0, 1501)
    assert q == [] and [t for t, _ in dq] == [1000, 1001, 1500]


def test_pubend_log_fsync_and_recover(tmp_path):
    path = str(tmp_path / "pubends.log")
    log = PubendLog(path)
    log.append("p1/a", 1000, m(1))
    log.append("p1/a", 1005, m(2))
    assert log.sync() == 2
    log.append("p1/a", 1010, m(3))  # appended but never synced: not published
    log.close()
    with open(path, "ab") as f:  # a torn tail record
        f.write(b"\x93\xa4p1/a")
    recs = PubendLog.recover(path)
    assert [(pe, t) for pe, t, _ in recs] == [("p1/a", 1000), ("p1/a", 1005)]
    p = Pubend.recovered("p1/a", [(t, mm) for _, t, mm in recs], now_ms=2000)
    f, d, q = p.k.lookup(0, 2000)
    assert [t for t, _ in d] == [1000, 1005] and q == [] and p.horizon == 2000
    assert p.assign(1500, m(4)) == 2000
    assert os.path.getsize(path) > 0


# -- cells and filters --------------------------------------------------------------------
FIG3 = {
    "p1": {"kind": "node", "neighbors": []},
    "b1": {"kind": "node", "cell": "ib1", "neighbors": ["p1"]},
    "b2": {"kind": "node", "cell": "ib1", "neighbors": ["p1"]},
    "s1": {"kind": "node", "neighbors": ["b1", "b2"]},
    "s2": {"kind": "node", "neighbors": ["b1"]},
    "pubs": {"kind": "clients", "neighbors": []},
}


def test_cells_tree_and_bundles():
    cm = CellMap(FIG3)
    assert cm.children("p1/x", "p1") == ["ib1"]
    assert cm.children("p1/x", "ib1") == ["s1", "s2"]
    assert cm.parent("p1/x", "s1") == "ib1"
    assert cm.links_to("p1", "ib1") == ["b1", "b2"]
    assert cm.links_to("b1", "s2") == ["s2"] and cm.links_to("b2", "s2") == []
    assert cm.links_to("s2", "ib1") == ["b1"]
    assert cm.cell_peers("b1") == ["b2"]
    picks = [bundle_pick(f"p1/pubs-{i}", ["b1", "b2"]) for i in range(4)]
    assert picks.count("b1") == picks.count("b2") == 2  # Sec 4.2: "2 of the 4 pubends" each
    assert picks[0] != picks[1] and picks[0] == picks[2]  # round-robin over the pubends
    three = [bundle_pick(f"p1/pubs-{i}", ["x", "y", "z"]) for i in range(6)]
    assert sorted(three) == ["x", "x", "y", "y", "z", "z"]
    assert bundle_pick("p1/pubs-1", ["b1"]) == "b1" and bundle_pick("p1/pubs-1", []) is None
    assert bundle_pick("p1/a", ["b2", "b1"]) == bundle_pick("p1/a", ["b1", "b2"])


def test_filters_parse_summary_index():
    f = filter_of("[class,eq,'STOCK'],[price,>,10]")  # the pubsub parser
    assert spec_json(f) == [["class", "eq", "STOCK"], ["price", ">", 10]]
    assert filter_from_wire(spec_json(f)) == f
    assert filter_of(None).preds == () and filter_of("  ").preds == ()
    for bad in ("class = STOCK", "[class,eq,STOCK]", "[k,ne,1]"):  # unquoted words, unknown operators
        with pytest.raises(FilterError):
            filter_of(bad)
    for bad in ([["k", "eq"]], [["k", "bogus", 1]], [["k", "eq", None]], [["k", "str-prefix", 1]]):
        with pytest.raises(ValueError):
            filter_from_wire(bad)
    assert filter_from_wire([["k", "!=", 1]]) == filter_of("[k,neq,1]")
    s = Summary([key_filter("k", 1), key_filter("k", 2)])
    assert s.matches({"k": 2}) and s.matches({"k": 2.0}) and not s.matches({"k": 3})
    assert not s.matches({"k": "2"}) and not s.matches({"k": True}) and not s.matches({})
    assert Summary.from_wire(s.to_wire()) == s
    assert Summary(None).matches({}) and Summary([filter_of("")]).everything
    s2 = Summary([filter_of("[p,>,5],[p,<,7]"), filter_of("[k,eq,1],[k,eq,2]")])  # 2nd: unsatisfiable
    assert s2.matches({"p": 6}) and not s2.matches({"p": 7}) and not s2.matches({"k": 1})
    w = Summary.from_wire(s2.to_wire())
    assert w == s2 and w.to_wire() == [[["p", "<", 7], ["p", ">", 5]]]
    u = Summary([])
    u.update(s)
    u.update(s2)
    assert u.matches({"k": 1}) and u.matches({"p": 6}) and not u.is_empty()
    u.update(Summary(None))
    assert u.everything and u.to_wire() is None
    idx = SubscriberIndex()
    idx.add("a", key_filter("k", 1))
    idx.add("b", filter_of(""))
    idx.add("c", filter_of("[k,>,5]"))
    idx.add("d", filter_of("[k,eq,1],[src,str-prefix,'p']"))
    assert sorted(idx.match({"k": 1})) == ["a", "b"]
    assert sorted(idx.match({"k": 1, "src": "pubs-0"})) == ["a", "b", "d"]
    assert sorted(idx.match({"k": 1, "src": "x"})) == ["a", "b"]  # d's other predicate fails
    assert sorted(idx.match({"k": 1.0})) == ["a", "b"] and idx.match({"k": True}) == ["b"]
    assert sorted(idx.match({"k": 7})) == ["b", "c"]
    assert idx.summary().everything


def test_silence_before_brackets_d_with_this_edges_silence():
    from testbed.protocols.gryphon.nodes.streams import silence_before

    k = KnowledgeStream()
    k.accumulate([(0, 10), (11, 20), (21, 30)], [(10, m(1)), (20, m(2)), (30, m(1))])
    o = OStream("c", match=lambda a: a.get("k") == 1)
    o.last_d = 10
    # D@20 is filtered out for this cell: F from 11 up to the next D of this cell at 30
    assert silence_before(o, k, 30) == [(11, 30)]
    k2 = KnowledgeStream()
    k2.accumulate([(0, 10)], [(10, m(1)), (25, m(1)), (30, m(1))])  # 11..24, 26..29 unknown
    assert silence_before(o, k2, 30) == []
    o2 = OStream("c")
    assert silence_before(o2, k2, 30) == [(0, 10)]  # D@10 and D@25 pass: not F
