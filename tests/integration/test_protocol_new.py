"""`testbed protocol new NAME --external DIR` writes a protocol that the registry accepts, that
`testbed run` runs and checks (real processes, real Spark), and whose own generated tests pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]


def test_the_skeleton_is_registered_runs_and_is_checked(tmp_path):
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "testbed.cli", "protocol", "new", "zzhello", "--external",
                          str(tmp_path / "pkg")], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "10 files written" in out.stdout
    # installed the way pip would: the package on the path, a dist-info declaring the entry point
    site = tmp_path / "site"
    dist = site / "zzhello-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: zzhello\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[testbed.protocols]\nzzhello = zzhello\n")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path / "pkg"), str(site)])
    env.pop("TESTBED_RUNS", None)

    probe = ("from testbed import registry as R; from testbed.nodes.runtime import api as A; "
             "p = R.get('zzhello'); cls = A.load_class(p.node_class_path('node', 'node')); "
             "print(p.source.split(' (')[0], p.nodes, p.missing(), [c.__name__ for c in p.checks()], "
             "issubclass(cls, A.Node), sorted(e for e in R.all_events() if e.startswith('zzhello')))")
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("entry point zzhello = zzhello zzhello.nodes [] "
                                "['check_received_once_and_sent'] True ['zzhello_recv', 'zzhello_send']"), r.stdout

    smoke = tmp_path / "pkg" / "zzhello" / "topologies" / "smoke.yaml"
    r = subprocess.run([sys.executable, "-m", "testbed.cli", "--runs-dir", str(tmp_path / "runs"), "run", str(smoke)],
                       env=env, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run_dir = Path(next(ln.split(": ", 1)[1] for ln in r.stdout.splitlines() if ln.startswith("run directory: ")))
    checks = {c["name"]: c for c in json.loads((run_dir / "analysis" / "checks.json").read_text())["checks"]}
    assert checks["zzhello_no_phantom_or_duplicate"]["passed"] and checks["control_provenance"]["passed"]
    ingest = json.loads((run_dir / "analysis" / "ingest.json").read_text())
    assert ingest["events"]["zzhello_send"] >= 2 * 3 * 20 * 0.8 and ingest["events"]["zzhello_recv"] > 0

    # its own generated tests pass, and the check they hold fails on a duplicate delivery
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(tmp_path / "pkg" / "tests")], env=env, capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
