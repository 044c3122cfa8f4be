"""TESTBED_TEST_TIMELINE (tests/conftest.py) and scripts/suite_timeline.py: a real inner pytest
session on two xdist workers writes one line per test phase; the summary reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

import suite_timeline as TL  # noqa: E402


def test_an_xdist_run_writes_each_phase_once_and_the_summary_names_the_longest_file(tmp_path):
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_a.py").write_text("import time\ndef test_slow():\n    time.sleep(0.6)\n")
    (tmp_path / "test_b.py").write_text("def test_one():\n    pass\ndef test_two():\n    pass\n")
    out = tmp_path / "tl.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TESTBED_TEST_TIMELINE": str(out), "CI": ""}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                        "loadfile", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = TL.load(str(out))
    assert sorted((n.split("::")[1], w) for _, n, w, _, _ in rows) == sorted(
        (t, ph) for t in ("test_slow", "test_one", "test_two") for ph in ("setup", "call", "teardown"))
    assert {w for w, *_ in rows} <= {"gw0", "gw1"} and all(b >= a for *_, a, b in rows)
    slow = next(b - a for _, n, ph, a, b in rows if n.endswith("test_slow") and ph == "call")
    assert slow >= 0.59  # written to the millisecond
    text = TL.summary(rows, top=1)
    assert "2 worker(s)" in text or "1 worker(s)" in text
    assert text.split("files by total time (top 1):\n")[1].splitlines()[0].endswith("test_a.py")


def test_summary_of_nothing():
    assert TL.summary([]) == "no timeline rows"
