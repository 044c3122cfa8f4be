"""`--json` outputs of up / status / run, parsed from the real CLI on real node processes.

The shapes are documented in docs/cli.md; these tests parse stdout with a strict JSON
parser (no NaN/Infinity) while progress goes to stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed import api
from testbed.providers.local.provider import node_processes

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

TINY = """\
version: 1
name: tiny
protocol: pubsub
duration: 3s
seed: 1
sites:
  a: {}
nodes:
  b1: {role: broker, site: a}
  b2: {role: broker, site: a, neighbors: [b1]}
clients:
  pubs: {role: publisher, count: 1, attach: b1, rate: 10/s, size: 50B, params: {attrs: {class: STOCK}}}
  subs: {role: subscriber, count: 1, attach: b2, filter: "[class,eq,'STOCK']"}
links:
  default: {delay: 1ms}
faults:
  - {at: 1s, pause: b2, for: 0.5s}
params: {settle: 0.5s}
"""


def strict(text: str):
    def no(c):
        raise ValueError(f"non-standard JSON constant {c}")

    return json.loads(text, parse_constant=no)


def cli(*args: str, runs_dir: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, TESTBED_RUNS=str(runs_dir), TESTBED_ETA_HISTORY=str(runs_dir.parent / "eta.json"))
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


@pytest.fixture
def runs_dir(tmp_path):
    d = tmp_path / "runs"
    yield d
    api.down(runs_dir=str(d), all_runs=True)
    assert node_processes(str(d)) == {}


@pytest.fixture
def tiny(tmp_path):
    f = tmp_path / "tiny.yaml"
    f.write_text(TINY)
    return f


def test_up_and_status_json(runs_dir, tiny):
    p = cli("up", str(tiny), "--no-schedule", "--json", runs_dir=runs_dir)
    assert p.returncode == 0, p.stderr
    up = strict(p.stdout)
    assert up["schema"] == 1 and up["command"] == "up"
    assert Path(up["run_dir"]).name == up["run_id"] and (Path(up["run_dir"]) / "plan.json").exists()
    assert up["status"]["run_id"] == up["run_id"]
    assert "bringing up" in p.stderr  # progress stays on stderr

    p = cli("status", "--json", runs_dir=runs_dir)
    assert p.returncode == 0, p.stderr
    st = strict(p.stdout)
    assert st["schema"] == 1 and st["command"] == "status" and st["run_id"] == up["run_id"]
    assert st["path"] == up["run_dir"] and st["provider"] == "local" and st["status"] == "up (idle)"
    assert st["emulation"] == "userspace" and st["duration_s"] == 3.0
    nodes = {n["node"]: n for n in st["nodes"]}
    assert set(nodes) == {"b1", "b2", "pubs", "subs"}
    assert all(n["state"] == "running" for n in nodes.values())
    assert nodes["b2"]["role"] == "broker" and nodes["b2"]["site"] == "a" and nodes["b2"]["host"] == "localhost"
    assert isinstance(nodes["b1"]["info"]["counters"], dict)
    assert st["fired"] == [] and st["pending"] == 0 and st["next"] is None  # --no-schedule: no timeline

    assert cli("down", runs_dir=runs_dir).returncode == 0
    st = strict(cli("status", up["run_id"], "--json", runs_dir=runs_dir).stdout)
    assert st["status"] == "down" and all(n["state"] != "running" for n in st["nodes"])


@pytest.mark.spark
def test_run_json_lists_each_run_with_its_reports_and_checks(runs_dir, tiny):
    p = cli("run", str(tiny), "--json", runs_dir=runs_dir, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = strict(p.stdout)
    assert doc["schema"] == 1 and doc["command"] == "run" and doc["ok"] is True
    (r,) = doc["runs"]
    rd = Path(r["run_dir"])
    assert rd.name == r["run_id"] and r["status"] == "analyzed" and r["point"] == {} and r["repeat_index"] == 0
    assert r["report"] == str(rd / "analysis" / "report.md") and Path(r["report_html"]).exists()
    assert {Path(f).name for f in r["figures"]} >= {"delivered_rate.png", "fault_timeline.png"}
    names = {c["name"] for c in r["checks"]}
    assert {"no_duplicates", "completeness"} <= names
    assert all(c["passed"] for c in r["checks"]) and r["ok"] is True
    assert set(r["checks"][0]) == {"name", "passed", "violations", "attributed"}
    assert node_processes(str(runs_dir)) == {}
