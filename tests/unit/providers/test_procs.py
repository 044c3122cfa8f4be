"""The one /proc helper (testbed/providers/hostside/procs.py), on real processes."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from testbed.providers.hostside import procs

# a process that ignores SIGTERM, so only the escalation's SIGKILL ends it
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"


def _start(*args: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_state_stop_continue_and_a_reaped_child_is_gone():
    p = _start("-c", STUBBORN)
    try:
        assert procs.alive(p.pid) and procs.state(p.pid) in ("S", "R")
        assert procs.cmdline(p.pid)[:2] == [sys.executable, "-c"]
        procs.kill(p.pid, signal.SIGSTOP)
        assert procs.wait_gone([p.pid], 0.2) == [p.pid]  # stopped is not gone
        assert procs.state(p.pid) == "T"
        procs.kill(p.pid, signal.SIGCONT)
        procs.kill(p.pid, signal.SIGKILL)
        assert procs.wait_gone([p.pid], 5.0) == []  # reaped (our child): not even a zombie
        assert procs.state(p.pid) is None and procs.cmdline(p.pid) == []
        procs.kill(p.pid, signal.SIGKILL)  # gone already: not an error
    finally:
        p.kill()
        p.wait()


def test_escalate_goes_on_to_the_next_signal_only_for_those_left():
    stubborn = _start("-c", STUBBORN)
    polite = _start("-c", "import time; print('ready', flush=True); time.sleep(60)")
    try:
        left = procs.escalate([stubborn.pid, polite.pid], ((signal.SIGTERM, 0.5),))
        assert left == [stubborn.pid]  # the polite one ended on SIGTERM
        assert procs.escalate(left, ((signal.SIGTERM, 0.2), (signal.SIGKILL, 5.0))) == []
    finally:
        for p in (stubborn, polite):
            p.kill()
            p.wait()


@pytest.mark.proc
def test_node_processes_are_found_by_command_line(tmp_path):
    cfg = tmp_path / "run-x" / "configs" / "b1.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("{}")
    # a stand-in with a node's command line: python -m testbed.nodes CONFIG (the module is
    # shadowed by a package on PYTHONPATH that only sleeps)
    fake = tmp_path / "fake" / "testbed" / "nodes"
    fake.mkdir(parents=True)
    (fake.parent / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text("import time; print('ready', flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-m", "testbed.nodes", str(cfg)], stdout=subprocess.PIPE, text=True,
                         cwd=tmp_path / "fake", env={"PYTHONPATH": str(tmp_path / "fake")})
    try:
        assert p.stdout.readline().strip() == "ready"
        assert procs.node_processes(str(tmp_path / "run-x") + "/") == {p.pid: str(cfg)}
        assert procs.node_processes(str(tmp_path / "run-y") + "/") == {}
        assert procs.is_node(p.pid, str(cfg)) and not procs.is_node(p.pid, str(cfg) + "x")
        assert any(pid == p.pid for pid, _ in procs.python_module_processes("testbed.nodes"))
    finally:
        p.kill()
        p.wait()
    assert p.pid not in procs.node_processes()


def test_a_child_that_dies_between_the_reap_and_the_read_is_collected(monkeypatch):
    """CI 2026-11-28: wait_gone said gone while the child stayed a zombie: it died after alive()'s
    reap and before its /proc read. Played here with the first reap doing nothing (the child is a
    zombie already): alive() says not alive and collects it."""
    import time

    p = _start("-c", STUBBORN)
    procs.kill(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while procs.state(p.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert procs.state(p.pid) == "Z"
    real, calls = procs.reap, []

    def late_reap(pid):
        calls.append(pid)
        if len(calls) > 1:
            real(pid)

    monkeypatch.setattr(procs, "reap", late_reap)
    assert not procs.alive(p.pid)
    assert procs.state(p.pid) is None
