"""The run-end condition: the TXC reports ``finished`` once its transactions have ended, and the
controller's rule (faults/schedule.py ``all_finished``) over the nodes' status replies."""

from __future__ import annotations

import pytest

from testbed.errors import ProviderError
from testbed.faults.schedule import all_finished
from tests.unit.pubsub.harness import Sim
from tests.unit.transactions.harness import scenario


def _status(sim: Sim) -> dict[str, dict]:
    return {n: {"node_status": node.status()} for n, node in sim.nodes.items()}


@pytest.mark.parametrize("variant", ["dtx", "stx", "blwait"])
def test_the_txc_is_finished_only_when_every_transaction_has_ended(variant):
    sim = Sim(scenario(variant, transactions=4), delay_ms=5.0)
    sim.start()
    sim.run_for(0.5)
    assert all_finished(_status(sim)) is False  # before the workload: not finished
    sim.start_workload(0.0, 30.0)
    sim.run_for(0.05)
    assert sim.nodes["e"].status()["open"] == 1 and all_finished(_status(sim)) is False
    t = 0.05
    while not all_finished(_status(sim)) and t < 20:
        sim.run_for(0.05)
        t += 0.05
    ends = sim.events("tx_end")
    assert len(ends) == 4 and {e["outcome"] for e in ends} == {"committed"}
    # only the coordinator reports it; finished well before the 30 s duration
    assert [n for n, s in _status(sim).items() if "finished" in s["node_status"]] == ["e"]
    assert t < 10
    sim.shutdown()


def test_the_txc_is_finished_when_no_transaction_may_begin_any_more():
    """The last moment to begin one (``timeout`` before the planned end) passed: the rest of the
    queue is not begun, and the run ends once the begun ones have ended."""
    sim = Sim(scenario("blwait", transactions=50, wait=0.2, timeout=1.0), delay_ms=5.0)
    sim.start()
    sim.run_for(0.5)
    sim.start_workload(0.0, 2.0)  # transactions may begin during the first second only
    sim.run_for(2.5)
    assert all_finished(_status(sim)) is True
    assert 0 < len(sim.events("tx_end")) < 50
    sim.shutdown()


def test_fig9_regular_traffic_has_no_run_end_condition():
    sim = Sim(scenario("dtx", transactions=2, regular_rate=50.0, round_size=20), delay_ms=5.0)
    sim.start()
    sim.run_for(0.5)
    assert all_finished(_status(sim)) is None
    sim.shutdown()


def test_all_finished_rule():
    st = lambda **ns: {"node_status": ns}  # noqa: E731
    assert all_finished({"b1": st(), "e": st(finished=True)}) is True
    assert all_finished({"b1": st(), "e": st(finished=True), "e2": st(finished=False)}) is False
    assert all_finished({"b1": st(), "d": st(role="dispatcher")}) is None  # nobody's work has an end
    assert all_finished({}) is None
    # a node that did not answer may be one whose work is not done
    assert all_finished({"b1": ProviderError("down"), "e": st(finished=True)}) is False
    assert all_finished({"b1": {}, "e": {"node_status": None}}) is None


def test_where_a_run_s_wall_time_went(tmp_path):
    import json

    from testbed.protocols.transactions.analysis.measure import phase_totals, run_phases

    t0 = 1_700_000_000_000_000_000
    for name, end in (("r1", 3.5), ("r2", None)):
        d = tmp_path / name
        d.mkdir()
        (d / "plan.json").write_text(json.dumps({"params": {"settle": 1.0}}))
        m = {"up_s": 0.6, "down_s": 0.2, "t0_wall_ns": t0, "duration_s": 15.0,
             "end_wall_ns": t0 + int(((end or 15.0) + 2.1) * 1e9)}
        if end is not None:
            m["workload_end_s"] = end
        (d / "manifest.json").write_text(json.dumps(m))
    ph = run_phases(tmp_path / "r1")
    assert ph == pytest.approx({"up_s": 0.6, "settle_s": 1.0, "workload_s": 3.5, "drain_collect_s": 2.1,
                                "down_s": 0.2})
    assert run_phases(tmp_path / "r2")["workload_s"] == 15.0  # no run-end condition: the planned duration
    tot = phase_totals([tmp_path / "r1", tmp_path / "r2", tmp_path / "missing"])
    assert tot["runs"] == 2 and tot["workload_s"] == 18.5 and tot["drain_collect_s"] == 4.2
