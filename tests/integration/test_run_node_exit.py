"""A node whose process is gone during the workload although the failure schedule did not crash it
(it raised, or something outside the run killed it: another session's `testbed wipe` kills every
testbed process on the machine) makes the run fail, named, with its logs kept; it is not collected
as a run whose history is the plan's (testbed/faults/schedule.py, ScheduleRunner.exited)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from testbed import api
from testbed.errors import RunError

pytestmark = pytest.mark.proc
TINY = str(Path(__file__).resolve().parent / "topologies" / "tiny" / "tiny.yaml")


def _run(tmp_path, on_workload_start=None):
    root = tmp_path / "runs"
    sv = {"rate": 10}
    [plan] = api.plans(TINY, sv, "local")

    def on_event(e):
        if e.get("kind") == "workload" and e.get("phase") == "start" and on_workload_start:
            [run] = [p for p in root.iterdir() if p.is_dir()]
            on_workload_start(run)

    return root, lambda: api.run_one(plan, TINY, sv, root, lambda s: None, on_event)


def test_a_node_killed_from_outside_fails_the_run_with_its_logs_kept(tmp_path):
    def kill_broker(run: Path) -> None:
        pid = json.loads((run / "state.json").read_text())["pids"]["b1"]
        os.kill(pid, signal.SIGKILL)  # not the schedule's crash: as `testbed wipe` elsewhere does

    root, go = _run(tmp_path, kill_broker)
    with pytest.raises(RunError) as e:
        go()
    assert "node b1 exited during the workload" in str(e.value)
    assert "outside the failure schedule" in str(e.value)
    [run] = [p for p in root.iterdir() if p.is_dir()]
    m = json.loads((run / "manifest.json").read_text())
    assert m["status"] == "failed"
    assert set(m["exited_outside_schedule"]) == {"b1"}
    last = m["exited_outside_schedule"]["b1"]["last_log_s"]  # its last log line: before it was seen gone
    assert last is not None and last <= m["exited_outside_schedule"]["b1"]["at_s"]
    assert (run / "logs" / "b1.jsonl").stat().st_size > 0  # its log up to the kill is kept
    # the other nodes ran on and were collected too
    assert len(list((run / "logs").glob("*.jsonl"))) >= 3


def test_a_run_whose_nodes_all_live_is_collected(tmp_path):
    """The same run untouched: collected, nothing recorded as exited (the check is not a false alarm)."""
    root, go = _run(tmp_path)
    run = go()
    m = run.manifest
    assert m["status"] == "collected" and "exited_outside_schedule" not in m
