"""The pure parts of the schedule runner: which control calls an action makes, link state for restarts."""

from testbed.faults.schedule import LinkState, link_calls, partition_peers, timeline_entry
from testbed.topology.plan import Action, LinkSpec


def test_cut_is_applied_at_both_ends():
    a = Action(at_s=5, op="cut", fault=0, target=("b1", "s1"))
    assert link_calls(a) == [("b1", "cut", {"peers": ["s1"]}), ("s1", "cut", {"peers": ["b1"]})]


def test_partition_blocks_every_pair_across_groups_and_heals_by_id():
    groups = (("a", "b"), ("c",), ("d",))
    assert partition_peers(groups) == {"a": ["c", "d"], "b": ["c", "d"], "c": ["a", "b", "d"], "d": ["a", "b", "c"]}
    calls = link_calls(Action(at_s=1, op="partition", fault=3, groups=groups))
    assert ("c", "partition", {"id": "fault-3", "peers": ["a", "b", "d"]}) in calls
    heal = link_calls(Action(at_s=2, op="heal_partition", fault=3, groups=groups))
    assert sorted(n for n, _, _ in heal) == ["a", "b", "c", "d"]
    assert all(args == {"id": "fault-3"} for _, _, args in heal)


def test_set_link_groups_by_source():
    spec = LinkSpec(delay_ms=200)
    a = Action(at_s=1, op="set_link", fault=0, links={"a->b": spec, "b->a": spec, "a->c": spec})
    calls = link_calls(a)
    assert [c[0] for c in calls] == ["a", "b"]
    assert set(calls[0][2]["links"]) == {"b", "c"}
    assert calls[0][2]["links"]["b"]["delay_ms"] == 200


def test_stall_goes_to_the_node_only():
    assert link_calls(Action(at_s=1, op="stall", fault=0, target=("b1",))) == [("b1", "stall", {})]


def test_link_state_restores_a_restarted_node():
    st = LinkState()
    st.apply(Action(at_s=1, op="set_link", fault=0, links={"b1->s1": LinkSpec(delay_ms=50)}))
    st.apply(Action(at_s=2, op="cut", fault=1, target=("b1", "p1")))
    st.apply(Action(at_s=3, op="partition", fault=2, groups=(("b1",), ("s2",))))
    calls = st.restore_calls("b1")
    ops = [op for op, _ in calls]
    assert ops == ["set_links", "cut", "partition"]
    assert calls[1][1] == {"peers": ["p1"]}
    st.apply(Action(at_s=4, op="heal", fault=1, target=("b1", "p1")))
    st.apply(Action(at_s=5, op="heal_partition", fault=2, groups=(("b1",), ("s2",))))
    assert [op for op, _ in st.restore_calls("b1")] == ["set_links"]
    assert st.restore_calls("zz") == []


def test_timeline_entry_starts_pending():
    e = timeline_entry(Action(at_s=8, op="stall", fault=0, target=("b1",), window=(8, 10.5), source="{...}"))
    assert e["status"] == "pending" and e["planned_s"] == 8 and e["actual_s"] is None and e["window"] == [8, 10.5]


def test_cut_with_close_closes_at_both_ends_and_is_restored_closed():
    a = Action(at_s=7.5, op="cut", fault=1, target=("b1", "s1"), close=True)
    assert link_calls(a) == [("b1", "cut", {"peers": ["s1"], "close": True}),
                             ("s1", "cut", {"peers": ["b1"], "close": True})]
    heal = Action(at_s=12.5, op="heal", fault=1, target=("b1", "s1"), close=True)
    assert link_calls(heal) == [("b1", "heal", {"peers": ["s1"]}), ("s1", "heal", {"peers": ["b1"]})]
    st = LinkState()
    st.apply(Action(at_s=1, op="cut", fault=0, target=("b1", "p1")))
    st.apply(a)
    assert st.restore_calls("b1") == [("cut", {"peers": ["p1"]}), ("cut", {"peers": ["s1"], "close": True})]
    st.apply(heal)
    assert st.restore_calls("s1") == []
    assert Action.from_dict(a.to_dict()) == a
