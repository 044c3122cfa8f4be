"""Checks and figures come from the protocol registry; fault windows (no Spark needed)."""

from testbed import registry as protocols
from testbed.protocols.gryphon.analysis.figures import run_figures
from testbed.protocols.pubsub.analysis.checks import CHECKS as PUBSUB
from testbed.analysis.timeline import action_rows, fault_windows


def test_pubsub_checks_are_found_by_convention():
    got = protocols.checks_for("pubsub")
    assert got == PUBSUB and [f.__name__ for f in got] == [
        "check_no_duplicates", "check_filter_match", "check_fifo", "check_completeness"]


def test_gryphon_figures_are_found_by_convention():
    assert protocols.figures_for("gryphon") == [run_figures]
    assert protocols.figures_for("pubsub") == []  # no protocols/pubsub/analysis/figures.py


def test_unknown_protocol_has_no_checks_or_figures():
    assert protocols.checks_for("no-such-protocol") == []
    assert protocols.figures_for("no-such-protocol") == []


def test_fault_windows_planned_vs_actual_and_status():
    manifest = {"timeline": [
        {"fault": 0, "op": "stall", "target": ["b1"], "planned_s": 8.0, "actual_s": 8.1, "status": "done",
         "window": [8.0, 10.5], "source": "{at: 8s, stall: b1, for: 2.5s}"},
        {"fault": 0, "op": "unstall", "target": ["b1"], "planned_s": 10.5, "actual_s": 10.8, "status": "done",
         "window": [8.0, 10.5], "source": "{at: 8s, stall: b1, for: 2.5s}"},
        {"fault": 1, "op": "crash", "target": ["b2"], "planned_s": 12.0, "actual_s": 12.05, "status": "done",
         "window": [12.0, 20.0], "source": "{at: 12s, crash: b2}"},
        {"fault": 2, "op": "cut", "target": ["b1", "b2"], "planned_s": 30.0, "actual_s": None,
         "status": "skipped", "window": [30.0, 35.0], "source": "{at: 30s, cut: [b1, b2], for: 5s}"},
    ]}
    w = {x.fault: x for x in fault_windows(manifest, {})}
    assert w[0].actual == (8.1, 10.8) and w[0].ops == ("stall", "unstall") and w[0].status == "done"
    assert w[0].attribution_window(2.0) == (6.0, 12.8)
    assert w[1].actual == (12.05, 20.05)  # single action: the whole window shifts by its delay
    assert w[2].actual is None and w[2].status == "skipped" and not w[2].attributable
    rows = action_rows(manifest, {})
    assert [round(r["delta_ms"], 3) if r["delta_ms"] is not None else None for r in rows] == [100.0, 300.0, 50.0, None]


def test_fault_windows_fall_back_to_plan_actions():
    plan = {"actions": [{"at_s": 5.0, "op": "pause", "fault": 0, "target": ["s1"], "window": [5.0, 8.0],
                         "source": "{at: 5s, pause: s1, for: 3s}"}]}
    (w,) = fault_windows({}, plan)
    assert w.status == "planned" and w.attributable and w.actual is None and w.planned == (5.0, 8.0)


def test_injected_faults_join_the_timeline():
    manifest = {"timeline": [], "injected": [
        {"fault": 1000, "op": "crash", "target": ["b1"], "planned_s": 4.2, "actual_s": 4.2, "status": "done",
         "window": [4.2, 4.2], "source": "{crash: b1}"}]}
    (w,) = fault_windows(manifest, {"actions": [{"at_s": 1.0, "op": "pause", "fault": 0}]})
    assert w.fault == 1000 and w.status == "done" and w.attribution_window(2.0) == (2.2, 6.2)
    (r,) = action_rows(manifest, {})
    assert r["injected"] and r["delta_ms"] == 0.0
