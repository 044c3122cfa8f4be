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


def _inner_timeline(tmp_path: Path, workers: int, order: str = "") -> list:
    """Run the tests in ``tmp_path`` in an inner pytest session on ``workers`` xdist workers with
    the real conftest (copied there by the caller) and TESTBED_TEST_TIMELINE; its rows."""
    out = tmp_path / "tl.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TESTBED_TEST_TIMELINE": str(out), "CI": "",
           "TESTBED_TEST_ORDER": order}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(workers),
                        "--dist", "loadfile", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return TL.load(str(out))


def test_an_xdist_run_writes_each_phase_once_and_the_summary_names_the_longest_file(tmp_path):
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_a.py").write_text("import time\ndef test_slow():\n    time.sleep(0.6)\n")
    (tmp_path / "test_b.py").write_text("def test_one():\n    pass\ndef test_two():\n    pass\n")
    rows = _inner_timeline(tmp_path, workers=2)
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


def test_file_totals_sum_every_phase_per_file_rounded_up():
    rows = [("gw0", "tests/a.py::t1", "setup", 0.0, 0.5), ("gw0", "tests/a.py::t1", "call", 0.5, 2.0),
            ("gw1", "tests/b.py::t[x]", "call", 1.0, 1.2)]
    assert TL.file_totals(rows) == {"tests/a.py": 3, "tests/b.py": 1}


def test_longest_files_first_keeps_each_files_tests_together_and_in_order():
    from tests.conftest import UNKNOWN_FILE_S, longest_files_first

    items = ["a::1", "a::2", "b::1", "c::1", "c::2", "d::1", "e::1"]
    durations = {"a": 5, "b": 300, "c": 40, "e": UNKNOWN_FILE_S + 1}  # d is new: unknown
    got = longest_files_first(items, lambda n: n.split("::")[0], durations)
    assert got == ["b::1", "c::1", "c::2", "e::1", "d::1", "a::1", "a::2"]
    # without durations nothing moves
    assert longest_files_first(items, lambda n: n.split("::")[0], {}) == items


def test_an_xdist_worker_is_handed_the_longest_file_first(tmp_path):
    """The real conftest in an inner session on one xdist worker, TESTBED_TEST_ORDER=longest-first:
    test_z.py, listed as the longest in file_durations.json, runs before test_a.py although it is
    collected last and has fewer tests (xdist alone re-sorts the files by their number of tests)."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "file_durations.json").write_text('{"test_z.py": 500, "test_a.py": 2}\n')
    # each test takes 20 ms: the timeline is written to the millisecond, two empty tests can share one
    (tmp_path / "test_a.py").write_text("import time\nimport pytest\n@pytest.mark.parametrize('i', [1, 2])\n"
                                        "def test_a(i):\n    time.sleep(0.02)\n")
    (tmp_path / "test_z.py").write_text("import time\ndef test_z():\n    time.sleep(0.02)\n")
    calls = sorted((a, n) for _, n, ph, a, _ in _inner_timeline(tmp_path, workers=1, order="longest-first")
                   if ph == "call")
    assert [n for _, n in calls] == ["test_z.py::test_z", "test_a.py::test_a[1]", "test_a.py::test_a[2]"]
    # opt-in: without TESTBED_TEST_ORDER, xdist's own order (more tests first)
    (tmp_path / "tl.csv").unlink()
    calls = sorted((a, n) for _, n, ph, a, _ in _inner_timeline(tmp_path, workers=1) if ph == "call")
    assert [n for _, n in calls] == ["test_a.py::test_a[1]", "test_a.py::test_a[2]", "test_z.py::test_z"]


def test_the_cpu_column_counts_a_tests_own_work_and_its_childrens_not_its_sleep(tmp_path):
    """Each phase's line carries the worker's CPU so far; a test that burns 0.6 s of CPU in a child
    process shows about that much, one that sleeps 0.6 s shows about none."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_burn.py").write_text(
        "import subprocess, sys\ndef test_burn():\n"
        "    subprocess.run([sys.executable, '-c', 'import time\\nt=time.process_time()\\n"
        "while time.process_time()-t<0.6: pass'], check=True)\n")
    (tmp_path / "test_nap.py").write_text("import time\ndef test_nap():\n    time.sleep(0.6)\n")
    _inner_timeline(tmp_path, workers=1)
    cpu = TL.file_cpu(str(tmp_path / "tl.csv"))
    assert cpu.get("test_burn.py", 0) >= 0.55, cpu
    assert cpu.get("test_nap.py", 0) < 0.2, cpu
