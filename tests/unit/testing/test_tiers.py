"""The suite's own rules (tests/conftest.py): markers applied automatically, the check that a test
carries the markers of what it starts, and the CI rule on skips. The last tests run a real inner
pytest session with the real conftest and see it fail tests that break the rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import classify_argv, markers_for, missing_markers, restore_settings

ROOT = Path(__file__).resolve().parents[3]


def test_folder_and_fixture_markers():
    assert markers_for(("unit", "x", "test_a.py"), ["tmp_path"], set()) == set()
    assert markers_for(("integration", "test_a.py"), ["tmp_path"], set()) == {"slow"}
    assert markers_for(("unit", "test_a.py"), ["runs", "spark"], set()) == {"spark", "slow"}
    assert markers_for(("integration", "test_a.py"), ["engine"], {"docker"}) == {"slow"}
    assert markers_for(("unit", "test_a.py"), [], {"browser"}) == {"slow"}
    assert markers_for(("integration", "test_a.py"), [], {"spark_cluster", "spark"}) == {"slow", "serial"}
    assert markers_for(("unit", "test_a.py"), [], {"proc"}) == {"slow"}


@pytest.mark.parametrize("argv, expect", [
    (["docker", "run", "-d", "x"], {"docker"}),
    (["/usr/bin/ssh", "-i", "k", "tb@1.2.3.4"], {"ssh"}),
    (["/venv/bin/ansible-playbook", "deploy.yml"], {"ssh"}),
    (["/usr/bin/chromium", "--headless=new"], {"browser"}),
    (["/usr/bin/python3", "-m", "testbed.nodes", "cfg.json"], {"proc"}),
    (["/usr/bin/python3", "-m", "testbed.faults.controller", "runs/x"], {"proc"}),
    (["/usr/bin/python3", "-m", "testbed.cli", "--runs-dir", "r", "run", "t.yaml"], {"proc"}),
    (["/venv/bin/testbed", "wipe"], {"proc", "serial"}),
    (["/usr/bin/python3", "-m", "testbed.cli", "wipe"], {"proc", "serial"}),
    (["/usr/bin/python3", "-m", "pytest", "-q"], set()),
    (["/usr/bin/python3", "-m", "testbed.analysisx"], set()),
    (["git", "status"], set()),
    ([], set()),
])
def test_what_a_process_start_counts_as(argv, expect):
    assert {w for w, _ in classify_argv(argv)} == expect


def test_missing_markers_names_each_and_the_fix():
    lines = missing_markers({"spark": "a SparkSession", "proc": "python -m testbed.nodes"}, {"proc", "slow"})
    assert lines == ["started or used Spark (a SparkSession) but is not marked spark: add @pytest.mark.spark"]
    assert missing_markers({"spark": "x"}, {"spark"}) == []


class _Conf:
    """RuntimeConfig's interface over a dict (the real one is exercised by every spark test's teardown)."""

    def __init__(self, d, static=()):
        self.d, self.static = dict(d), set(static)

    @property
    def getAll(self):
        return dict(self.d)

    def isModifiable(self, k):
        return k not in self.static

    def set(self, k, v):
        self.d[k] = v

    def unset(self, k):
        self.d.pop(k, None)


def test_restore_settings_undoes_a_tests_changes():
    base = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false", "spark.app.name": "t"}
    c = _Conf({**base, "spark.sql.shuffle.partitions": "8", "spark.sql.files.minPartitionNum": "8"}, static={"spark.app.name"})
    c.d.pop("spark.sql.adaptive.enabled")
    assert sorted(restore_settings(c, base)) == ["spark.sql.adaptive.enabled", "spark.sql.files.minPartitionNum",
                                                 "spark.sql.shuffle.partitions"]
    assert c.d == base
    assert restore_settings(c, base) == []


INNER = '''
import os, subprocess, sys
import pytest

def test_cli_unmarked():
    subprocess.run([sys.executable, "-m", "testbed.cli", "--help"], capture_output=True, check=True)

@pytest.mark.proc
def test_cli_marked():
    subprocess.run([sys.executable, "-m", "testbed.cli", "--help"], capture_output=True, check=True)

def test_spark_unmarked():
    from pyspark.sql import SparkSession
    SparkSession.Builder.getOrCreate.__wrapped__ = lambda self: "no JVM here"
    assert SparkSession.builder.getOrCreate() == "no JVM here"

def test_spark_in_a_subprocess_unmarked():
    import pyspark
    home = os.path.dirname(pyspark.__file__)
    # what spark-submit and spark-class do first (no JVM here)
    subprocess.run(["bash", "-c", f'. "{home}/bin/load-spark-env.sh"'], check=True,
                   env=dict(os.environ, SPARK_HOME=home))

def test_wipe_unmarked():
    import testbed.api as api
    api.wipe.__wrapped__ = lambda *a, **k: []
    assert api.wipe() == []

@pytest.mark.serial
def test_wipe_marked():
    import testbed.api as api
    api.wipe.__wrapped__ = lambda *a, **k: []
    assert api.wipe() == []

@pytest.mark.docker
def test_docker_skipped():
    pytest.skip("no engine here")

def test_pure():
    assert 1 + 1 == 2
'''


def _inner(tmp_path: Path, ci: bool, sub: str = "", workers: int = 0) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / sub / "test_inner.py").write_text(INNER)
    env = {**os.environ, "CI": "true" if ci else "", "PYTHONPATH": str(ROOT), "TESTBED_TEST_TIMELINE": ""}
    xdist = ["-n", str(workers)] if workers else ["-p", "no:xdist"]
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rEs", "-p", "no:cacheprovider", *xdist, "-p", "no:warnings",
                           "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_a_test_that_starts_what_it_is_not_marked_for_fails(tmp_path):
    r = _inner(tmp_path, ci=False)
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    assert "7 passed, 1 skipped, 4 errors" in out, out  # an error at teardown: the call passed
    assert "test_cli_unmarked: started node processes or the testbed CLI" in out and "add @pytest.mark.proc" in out
    assert "test_spark_unmarked: started or used Spark (a SparkSession) but is not marked spark" in out
    assert "test_wipe_unmarked: removed every testbed process/container (wipe) (testbed wipe)" in out
    assert "test_spark_in_a_subprocess_unmarked: started or used Spark (spark-submit in a subprocess)" in out
    for ok in ("test_cli_marked", "test_wipe_marked", "test_pure"):
        assert f"test_inner.py::{ok}" not in out.split("short test summary")[-1].replace("SKIPPED", "")


def test_under_tests_integration_only_serial_is_enforced(tmp_path):
    (tmp_path / "integration").mkdir()
    r = _inner(tmp_path, ci=False, sub="integration")
    assert "7 passed, 1 skipped, 1 error" in r.stdout, r.stdout
    assert "test_wipe_unmarked: removed every testbed process/container" in r.stdout
    assert r.returncode == 1


@pytest.mark.parametrize("workers", [0, 2])
def test_in_ci_a_skipped_docker_test_fails_the_run(tmp_path, workers):
    # with xdist workers the controller sees every worker's reports and fails the run
    r = _inner(tmp_path, ci=True, workers=workers)
    assert "CI: 1 docker/ssh/browser/spark_cluster test(s) were skipped" in r.stdout, r.stdout
    assert "test_inner.py::test_docker_skipped" in r.stdout
    assert r.returncode == 1
