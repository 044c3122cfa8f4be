import itertools
import time

import pytest

from testbed.api import parse_set
from testbed.errors import UsageError
from testbed.runs.clock import estimate_offset
from testbed.runs.rundir import RunDir, active_runs, find_run, mark_active


def test_offset_takes_the_minimum_rtt_sample():
    true_offset = 5_000_000_000  # the remote clock is 5 s ahead
    delays = itertools.cycle([0.004, 0.0005, 0.003])

    def remote() -> int:
        d = next(delays)
        time.sleep(d / 2)
        t = time.time_ns() + true_offset
        time.sleep(d / 2)
        return t

    est = estimate_offset(remote, samples=6)
    assert abs(est["offset_ns"] - true_offset) <= est["uncertainty_ns"]
    assert est["uncertainty_ns"] < 2_000_000  # the 0.5 ms samples win, not the 4 ms ones


def test_active_runs_and_find(tmp_path):
    rd = RunDir.create(tmp_path, "smoke-1")
    rd.write("plan.json", {})
    mark_active(tmp_path, "smoke-1", True)
    assert active_runs(tmp_path) == ["smoke-1"]
    assert find_run(None, str(tmp_path)).run_id == "smoke-1"
    assert find_run("smoke-1", str(tmp_path)).path == rd.path
    mark_active(tmp_path, "smoke-1", False)
    with pytest.raises(UsageError, match="no active run"):
        find_run(None, str(tmp_path))
    with pytest.raises(UsageError, match="no such run"):
        find_run("nope", str(tmp_path))


def test_manifest_updates_merge(tmp_path):
    rd = RunDir.create(tmp_path, "r")
    rd.update_manifest(a=1)
    rd.modify_manifest(lambda m: m.setdefault("injected", []).append({"op": "crash"}))
    rd.update_manifest(b=2)
    assert rd.manifest == {"a": 1, "injected": [{"op": "crash"}], "b": 2}


def test_parse_set():
    assert parse_set(["rate=5000", "name=x", "on=true", "f=0.5"]) == {"rate": 5000, "name": "x", "on": True, "f": 0.5}
    with pytest.raises(UsageError):
        parse_set(["novalue"])
    with pytest.raises(UsageError):
        parse_set(["bad key=1"])


def test_mark_active_from_many_threads_loses_no_run(tmp_path):
    """Runs brought up at the same time (`testbed reproduce --jobs`) each add themselves."""
    import threading

    from testbed.runs.rundir import active_runs, mark_active

    ids = [f"run-{i}" for i in range(24)]
    for i in ids:
        (tmp_path / i).mkdir()
    ts = [threading.Thread(target=mark_active, args=(tmp_path, i, True)) for i in ids]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(active_runs(tmp_path)) == sorted(ids)
    ts = [threading.Thread(target=mark_active, args=(tmp_path, i, False)) for i in ids[::2]]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(active_runs(tmp_path)) == sorted(ids[1::2])
