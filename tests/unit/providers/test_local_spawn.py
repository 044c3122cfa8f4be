"""The local provider's `up` starts its processes several at a time: every started one is
recorded (in the plan's order) before a spawn error is raised, so `down` finds them."""

from __future__ import annotations

import threading

import pytest

from testbed.api import plans
from testbed.providers.local import provider as local
from testbed.runs.rundir import RunDir

from tests.unit.topology.helpers import BASE, write


def test_spawns_overlap_and_a_failed_spawn_leaves_the_others_recorded(tmp_path, monkeypatch):
    [plan] = plans(str(write(tmp_path, BASE)))
    names = list(plan.nodes)
    assert len(names) >= 4
    run = RunDir.create(tmp_path / "runs", "r1")
    for d in (run.logs_dir, run.configs_dir):
        d.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(local, "SPAWN_THREADS", 3)
    lock = threading.Lock()
    busy = {"now": 0, "max": 0}
    gate = threading.Barrier(3, timeout=5)  # passes only if 3 spawns run at once

    def fake_spawn(self, run_, node, groups):
        with lock:
            busy["now"] += 1
            busy["max"] = max(busy["max"], busy["now"])
        try:
            if names.index(node) < 3:
                gate.wait()
            if node == names[1]:
                raise OSError(f"cannot start {node}")
            return 10_000 + names.index(node)
        finally:
            with lock:
                busy["now"] -= 1

    monkeypatch.setattr(local.LocalProvider, "_spawn", fake_spawn)
    with pytest.raises(OSError, match=f"cannot start {names[1]}"):
        local.LocalProvider().up(plan, run, lambda m: None)
    assert busy["max"] == 3
    pids = run.state["pids"]
    assert list(pids) == [n for n in names if n != names[1]]
    assert pids == {n: 10_000 + i for i, n in enumerate(names) if n != names[1]}
