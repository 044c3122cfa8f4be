"""`testbed wipe` (the CLI, as a user types it) removes the temporary directory a killed testbed
process left, and keeps a live process's (testbed/runs/scratch.py). It removes every testbed
process on the machine, so it runs in the serial pass, alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.serial, pytest.mark.proc]


def test_wipe_removes_the_scratch_a_killed_analysis_left(tmp_path):
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch_root), "PYTHONPATH": str(REPO)}
    code = ("import atexit, shutil, time\n"
            "from testbed.runs import scratch\n"
            "d = scratch.make('testbed-ingest'); atexit.register(shutil.rmtree, d, True)\n"
            "print(d, flush=True); time.sleep(120)\n")
    killed = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    alive = subprocess.Popen([sys.executable, "-c", code.replace("testbed-ingest", "testbed-spark")], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        left = Path(killed.stdout.readline().strip())
        kept = Path(alive.stdout.readline().strip())
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert left.is_dir() and kept.is_dir()
        out = subprocess.run([sys.executable, "-m", "testbed.cli", "--runs-dir", str(tmp_path / "runs"), "wipe"],
                             env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
        assert out.returncode == 0, out.stderr
        assert "removed 1 scratch directories left by ended processes" in out.stdout + out.stderr
        assert not left.exists() and kept.is_dir()
    finally:
        for p in (killed, alive):
            p.kill()
            p.wait()
            p.stdout.close()
