"""Mobility's schedule actions ``{at, move: {client, to}}`` and ``{at, reject: bN, for}``: validated
with located one-line errors (the client is followed along the schedule), only for a protocol
that declares them, expanded into control calls, and accepted by ``testbed inject``'s parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import TopologyError, UsageError
from testbed.faults.inject import actions_for, parse_fault
from testbed.faults.schedule import call_outcome, timeline_entry
from testbed.analysis.timeline import fault_windows
from testbed.errors import ProviderError
from testbed.topology.loader import load, plans

from .harness import TOPOLOGY_HEAD

ROOT = Path(__file__).resolve().parents[3]
BASE = TOPOLOGY_HEAD + """\
  mobile: {m: {count: 2, start: [b1, b3], moving: 0}, r: {count: 1, start: [b2], routes: [[b2, b3]]}}
faults:
"""
# m-0 starts at b1, m-1 at b3; r-0 moves on its own


def write(tmp_path: Path, faults: str, base: str = BASE) -> Path:
    p = tmp_path / "t.yaml"
    p.write_text(base + faults)
    return p


def errors(tmp_path: Path, faults: str, base: str = BASE) -> list[str]:
    with pytest.raises(TopologyError) as ei:
        load(write(tmp_path, faults, base))
    return [line.split(":", 1)[1] for line in str(ei.value).splitlines()]


def test_a_valid_schedule_expands_to_control_calls(tmp_path):
    [plan] = plans(write(tmp_path, "  - {at: 2s, reject: b3, for: 3s}\n"
                                   "  - {at: 3s, move: {client: m-0, to: b3}}\n"
                                   "  - {at: 6s, move: {client: m-0, to: b3}}\n"
                                   "  - {at: 8s, move: {client: m-0, to: b2}}\n"))
    rej, mv1, mv2, mv3 = plan.actions
    assert (rej.op, rej.target, rej.window) == ("reject", ("b3",), (2.0, 5.0))
    assert rej.call == {"op": "reject", "args": {"for": 3.0}, "any": False, "text": "b3 refuses moves for 3s"}
    # a move goes to every broker (the one hosting the client starts it), quietly
    assert mv1.op == "move" and mv1.target == ("b1", "b2", "b3") and mv1.window == (3.0, 3.0)
    assert mv1.call["args"] == {"client": "m-0", "to": "b3", "quiet": True} and mv1.call["any"] is True
    assert mv3.call["text"] == "m-0 -> b2"
    # the plan's JSON form keeps the call
    from testbed.topology.plan import Plan
    assert Plan.from_dict(plan.to_dict()) == plan


@pytest.mark.parametrize("faults, message", [
    ("  - {at: 2s, move: {client: m-7, to: b3}}\n",
     "15:29: faults[0].move.client: unknown mobile client 'm-7' (did you mean 'm-1'?); params.mobile declares m-0, m-1, r-0"),
    ("  - {at: 2s, move: {client: m-0, to: b9}}\n", "15:38: faults[0].move.to: unknown broker 'b9'"),
    ("  - {at: 2s, move: {client: m-0, to: b33}}\n",
     "15:38: faults[0].move.to: unknown broker 'b33' (did you mean 'b3'?)"),
    ("  - {at: 2s, move: {client: m-0, to: pubs}}\n", "15:38: faults[0].move.to: 'pubs' is not a broker"),
    ("  - {at: 2s, move: {client: m-0, to: b1}}\n",
     "15:38: faults[0].move.to: 'm-0' is already at b1 at 2s (it starts there)"),
    # followed along the schedule: after its move m-0 is at b3
    ("  - {at: 2s, move: {client: m-0, to: b3}}\n  - {at: 4s, move: {client: m-0, to: b3}}\n",
     "16:38: faults[1].move.to: 'm-0' is already at b3 at 4s (moved there by faults[0])"),
    # ... in time order, not file order
    ("  - {at: 4s, move: {client: m-0, to: b3}}\n  - {at: 2s, move: {client: m-0, to: b3}}\n",
     "15:38: faults[0].move.to: 'm-0' is already at b3 at 4s (moved there by faults[1])"),
    ("  - {at: 2s, move: {client: r-0, to: b3}}\n",
     "15:29: faults[0].move.client: 'r-0' also moves on its own (params.mobile.r.moving): a scheduled "
     "move needs a client that does not (e.g. moving: 0)"),
    ("  - {at: 2s, crash: b1}\n  - {at: 3s, restart: b1}\n  - {at: 4s, move: {client: m-0, to: b2}}\n",
     "17:29: faults[2].move.client: 'm-0' is gone at 4s: its broker b1 crashed at 2s (faults[0]) and took it along"),
    ("  - {at: 2s, reject: pubs, for: 1s}\n", "15:22: faults[0].reject: 'pubs' is not a broker"),
    ("  - {at: 2s, reject: b9, for: 1s}\n", "15:22: faults[0].reject: unknown broker 'b9'"),
    ("  - {at: 2s, reject: b2}\n", "15:5: faults[0]: reject: needs 'for' (how long)"),
    ("  - {at: 2s, move: {client: m-0, to: b2}, for: 1s}\n", "15:5: faults[0]: move: 'for' does not apply here"),
    ("  - {at: 2s, move: {client: m-0}}\n", "15:20: faults[0].move.to: required key is missing"),
    ("  - {at: 2s, move: {client: m-0, to: b2, via: b1}}\n", "15:42: faults[0].move.via: unknown key 'via'"),
    ("  - {at: 2s, mvoe: {client: m-0, to: b2}}\n",
     "15:14: faults[0].mvoe: unknown fault kind 'mvoe' (did you mean 'move'?); protocol mobility has: "
     "stall, crash, restart, cut, partition, pause, set_link, throttle, move, reject"),
    ("  - {at: 2s, move: {client: m-0, to: b2}, crash: b1}\n", "15:5: faults[0]: a fault has exactly one kind, got crash, move"),
    ("  - {at: 25s, move: {client: m-0, to: b2}}\n", "15:10: faults[0].at: at 25s is not before the end of the run (duration 20s)"),
])
def test_located_one_line_errors(tmp_path, faults, message):
    assert errors(tmp_path, faults) == [message]


def test_a_rejected_move_leaves_the_client_where_it_was(tmp_path):
    # b3 refuses from 1s to 4s: the move at 2s fails, so m-0 is still at b1 at 5s (no error), and a
    # move to b1 then is reported
    load(write(tmp_path, "  - {at: 1s, reject: b3, for: 3s}\n  - {at: 2s, move: {client: m-0, to: b3}}\n"
                         "  - {at: 5s, move: {client: m-0, to: b3}}\n"))
    assert errors(tmp_path, "  - {at: 1s, reject: b3, for: 3s}\n  - {at: 2s, move: {client: m-0, to: b3}}\n"
                            "  - {at: 5s, move: {client: m-0, to: b1}}\n") == [
        "17:38: faults[2].move.to: 'm-0' is already at b1 at 5s (it starts there)"]


def test_a_reject_does_not_stop_the_covering_movement(tmp_path):
    # covering never negotiates with the target: the move at 2s happens, so a move to b3 at 5s is wrong
    base = BASE.replace("params:\n", "params:\n  movement: covering\n")
    assert errors(tmp_path, "  - {at: 1s, reject: b3, for: 3s}\n  - {at: 2s, move: {client: m-0, to: b3}}\n"
                            "  - {at: 5s, move: {client: m-0, to: b3}}\n", base) == [
        "18:38: faults[2].move.to: 'm-0' is already at b3 at 5s (moved there by faults[1])"]


def test_only_a_protocol_that_declares_them_takes_them(tmp_path):
    pubsub = BASE.replace("protocol: mobility", "protocol: pubsub").split("params:\n")[0] + "faults:\n"
    assert errors(tmp_path, "  - {at: 2s, move: {client: m-0, to: b3}}\n", pubsub) == [
        "13:14: faults[0].move: unknown fault kind 'move'; protocol pubsub has: "
        "stall, crash, restart, cut, partition, pause, set_link, throttle"]


def test_the_shipped_fault_topology_validates_in_every_case():
    for case in ("reject", "crash", "crash-xfer", "cut"):
        [plan] = plans(ROOT / "topologies" / "mobility" / "faults.yaml", {"case": case})
        assert any(a.op == "move" for a in plan.actions)


class _Plan:
    protocol = "mobility"


def test_inject_parses_move_and_reject(tmp_path):
    [plan] = plans(write(tmp_path, "  []\n"))
    [a] = actions_for("{move: {client: m-0, to: b3}}", plan, now_s=4.0, index=1000)
    assert (a.op, a.at_s, a.fault, a.target) == ("move", 4.0, 1000, ("b1", "b2", "b3"))
    assert a.call["args"] == {"client": "m-0", "to": "b3", "quiet": True}
    [a] = actions_for("{reject: b2, for: 2s}", plan, now_s=1.0, index=1001)
    assert (a.op, a.target, a.call["args"], a.window) == ("reject", ("b2",), {"for": 2.0}, (1.0, 3.0))
    for text, msg in [("{move: {client: m-0, to: b9}}", "unknown broker 'b9'"),
                      ("{reject: pubs, for: 1s}", "'pubs' is not a broker"),
                      ("{reject: b2}", "needs 'for'"),
                      ("{move: {client: m-0}}", "move.to: Field required"),
                      ("{mvoe: {client: m-0, to: b2}}", "unknown fault kind 'mvoe'")]:
        with pytest.raises(UsageError, match=msg):
            actions_for(text, plan, now_s=1.0, index=1002)
    with pytest.raises(UsageError, match="unknown fault kind 'move'; protocol pubsub"):
        parse_fault("{move: {client: m-0, to: b2}}", "pubsub")


def test_call_outcomes_and_no_fault_window(tmp_path):
    [plan] = plans(write(tmp_path, "  - {at: 2s, reject: b3, for: 3s}\n  - {at: 3s, move: {client: m-0, to: b3}}\n"))
    rej, mv = plan.actions
    no = ProviderError("control channel: move: client not started here")
    assert call_outcome(mv, {"b1": {"ok": True}, "b2": no, "b3": no}) == ("done", ["b1"], None)
    status, ok, err = call_outcome(mv, {"b1": no, "b2": no, "b3": ProviderError("control channel: move: "
                                                                                "client already moving")})
    assert status == "skipped" and ok == [] and "client already moving; client not started here" in err
    assert call_outcome(rej, {"b3": ProviderError("x: boom")})[0] == "failed"
    # a protocol action is not a fault: nothing is attributed to its window
    tl = [dict(timeline_entry(a), status="done", actual_s=a.at_s) for a in plan.actions]
    assert tl[1]["call"] == "move" and fault_windows({"timeline": tl}, plan.to_dict()) == []
    assert fault_windows({}, plan.to_dict()) == []


def test_validate_and_graph_show_the_mobile_clients(tmp_path):
    from testbed.render.graph import plan_to_dot
    from testbed.topology.describe import describe

    [plan] = plans(write(tmp_path, "  - {at: 3s, move: {client: m-0, to: b3}}\n"))
    text = describe(plan)
    assert "clients hosted in nodes" in text
    assert "  m            mobile     x2     at b1:1 b3:1\n" in text
    assert "subscribers, workload random; move only when the schedule says; 1 scheduled move(s)" in text
    assert "  r            mobile     x1     at b2:1\n" in text and "1 move every 10s on b2<->b3" in text
    dot = plan_to_dot(plan)
    assert '"hosted:m" [label="m\\nmobile x2\\n(in brokers)"' in dot
    assert '"hosted:m" -- "b1" [label="x1 start"' in dot and '"hosted:m" -- "b3" [label="x1 start"' in dot
    assert '"hosted:r" -- "b2" [label="x1 start"' in dot
    # a protocol without the hook shows none
    pubsub = BASE.replace("protocol: mobility", "protocol: pubsub").split("params:\n")[0] + "faults: []\n"
    [p2] = plans(write(tmp_path, "", pubsub))
    assert "hosted" not in describe(p2) and "hosted:" not in plan_to_dot(p2)


def test_a_misspelt_fault_key_is_not_taken_for_a_protocol_action(tmp_path):
    pubsub = BASE.replace("protocol: mobility", "protocol: pubsub").split("params:\n")[0] + "faults:\n"
    assert errors(tmp_path, "  - {at: 2s, crash: b1, fro: 1s}\n  - {at: 3s, crsh: b1}\n", pubsub) == [
        "13:5: faults[0]: unknown key 'fro' (did you mean 'for'?)",
        "14:14: faults[1].crsh: unknown fault kind 'crsh' (did you mean 'crash'?); protocol pubsub has: "
        "stall, crash, restart, cut, partition, pause, set_link, throttle"]


def test_graph_at_a_time_shows_the_mobile_clients_where_the_schedule_puts_them():
    from testbed.render.graph import plan_to_dot
    from testbed.topology.protocols import hosted_clients

    topo = ROOT / "topologies" / "mobility" / "faults.yaml"
    [plan] = plans(topo, {"case": "reject"})  # m-0, m-2 at b1; m-1, m-3 at b6
    at = lambda t: {h.name: h.at for h in hosted_clients(plan, t)}  # noqa: E731
    assert at(None) == at(1.0) == {"m": {"b1": 2, "b6": 2}}
    assert at(2.5) == {"m": {"b1": 2, "b6": 2}}  # the move to b6 at 2s is rejected (b6 refuses until 4s)
    assert at(5.5) == {"m": {"b1": 1, "b5": 1, "b6": 2}}  # m-0 -> b5 at 5s
    assert at(7.0) == {"m": {"b1": 2, "b5": 1, "b6": 1}}  # m-1 -> b1 at 6s
    dot = plan_to_dot(plan, 7.0)
    assert '"hosted:m" -- "b5" [label="x1 at 7s"' in dot and '"hosted:m" -- "b1" [label="x2 at 7s"' in dot
    assert 'label="x2 start"' in plan_to_dot(plan)
    # covering does not negotiate: the same schedule moves m-0 to b6 at 2s
    [cov] = plans(topo, {"case": "reject", "movement": "covering"})
    assert {h.name: h.at for h in hosted_clients(cov, 2.5)} == {"m": {"b1": 1, "b6": 3}}
    # a crash takes the clients of its broker along (b1 at 2.6s: m-2; a scheduled move counts at its
    # `at`, as validate follows it, so m-0 is at b6 from 2s on)
    [crash] = plans(topo, {"case": "crash"})
    [h] = hosted_clients(crash, 3.0)
    assert h.at == {"b6": 3} and "1 gone with crashed brokers by 3s" in h.text
    [h] = hosted_clients(crash, 6.5)  # the restart brings no client back; m-1 -> b5 at 6s
    assert h.at == {"b5": 1, "b6": 2}
