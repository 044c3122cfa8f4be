"""Scratch directories carry their owner's pid, and `testbed wipe` removes those of ended processes
(testbed/runs/scratch.py): a SIGKILL skips the owner's own cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.runs import scratch

REPO = Path(__file__).resolve().parents[3]


def test_the_owner_is_in_the_name_and_parsed_back(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    for prefix in scratch.PREFIXES:
        d = scratch.make(prefix)
        assert d.parent == tmp_path and d.is_dir()
        assert d.name.startswith(f"{prefix}-{os.getpid()}-")
        assert scratch.owner(d.name) == os.getpid()
    assert scratch.owner("tb-ansible-up-a65_sv_i") is None  # the old names: no pid
    assert scratch.owner("somebody-else-123-abc") is None
    with pytest.raises(ValueError, match="unknown scratch prefix"):
        scratch.make("tmp")


def test_only_ended_owners_and_old_unowned_directories_are_leftovers(tmp_path):
    now = time.time()
    for name in ("testbed-ingest-100-aaaa", "tb-ansible-up-101-bbbb", "tb-ansible-102-cccc",
                 "testbed-spark-103-dddd", "tb-ansible-collect-100-eeee",
                 "testbed-ingest-a65_sv_i", "tb-ansible-zzzzzzzz",  # old names: old / recent below
                 "unrelated-100-ffff", "testbed-runs"):
        (tmp_path / name).mkdir()
    (tmp_path / "testbed-ingest-104-file").write_text("a file, not a directory")
    old = now - scratch.LEGACY_AGE_S - 60
    os.utime(tmp_path / "testbed-ingest-a65_sv_i", (old, old))
    alive = {101, 103}
    got = scratch.leftovers(tmp_path, alive=lambda pid: pid in alive, now=now)
    assert sorted(p.name for p in got) == ["tb-ansible-102-cccc", "tb-ansible-collect-100-eeee",
                                           "testbed-ingest-100-aaaa", "testbed-ingest-a65_sv_i"]
    assert scratch.leftovers(tmp_path / "missing") == []


def test_a_killed_owners_directory_is_removed_and_a_live_ones_kept(tmp_path):
    """A real process makes a scratch directory the way an analysis does, then is SIGKILLed: its
    directory stays (no atexit) until remove_leftovers, which keeps this process's own."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    code = ("import atexit, shutil, sys, time\n"
            "from testbed.runs import scratch\n"
            "d = scratch.make('testbed-ingest'); atexit.register(shutil.rmtree, d, True)\n"
            "(d / 'parquet').mkdir(); print(d, flush=True); time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        left = Path(p.stdout.readline().strip())
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()
    mine = tmp_path / f"testbed-spark-{os.getpid()}-mine"
    mine.mkdir()
    assert left.parent == tmp_path and (left / "parquet").is_dir()
    said = []
    removed = scratch.remove_leftovers(said.append, tmp_path)
    assert removed == [f"scratch {left}"] and not left.exists()
    assert mine.is_dir()
    assert said == ["removed 1 scratch directories left by ended processes"]
    assert scratch.remove_leftovers(said.append, tmp_path) == [] and len(said) == 1


def test_pid_alive():
    assert scratch.pid_alive(os.getpid())
    assert not scratch.pid_alive(0) and not scratch.pid_alive(-5)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert not scratch.pid_alive(pid_max + 1)
    assert not scratch.pid_alive(2**70)
