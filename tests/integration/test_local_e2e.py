"""End to end with the local provider: real node processes on loopback, the real CLI, real Spark.

These tests drive what a user types: `testbed validate/up/status/inject/logs/down/run/wipe`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed import api
from testbed.providers.local.provider import node_processes

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "topologies" / "smoke.yaml"
EXAMPLES = sorted((ROOT / "topologies" / "examples").glob("*.yaml"))

pytestmark = pytest.mark.slow


def cli(*args: str, runs_dir: Path, timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, TESTBED_RUNS=str(runs_dir))
    p = subprocess.run([sys.executable, "-m", "testbed.cli", *args], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=ROOT)
    if check and p.returncode != 0:
        raise AssertionError(f"testbed {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


@pytest.fixture
def runs_dir(tmp_path):
    d = tmp_path / "runs"
    yield d
    # whatever a test left behind, down must remove (and the test fails if it could not)
    api.down(runs_dir=str(d), all_runs=True)
    assert node_processes(str(d)) == {}


def test_validate_prints_the_plan(runs_dir):
    p = cli("validate", str(SMOKE), runs_dir=runs_dir, check=True)
    plan = api.plans(str(SMOKE))[0]
    for n in plan.nodes:
        assert n in p.stdout
    assert "stall" in p.stdout or "crash" in p.stdout  # the fault timeline is shown


def test_bad_file_reports_every_error_with_location(runs_dir, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "version: 1\nname: Bad_Name\nprotocol: pubsub\nduration: 10\nsites:\n  a: {}\n"
        "nodes:\n  b1: {role: broker, site: a, neighbors: [zz]}\n"
        "faults:\n  - {at: 50s, crash: b1}\n"
    )
    p = cli("validate", str(bad), runs_dir=runs_dir)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) >= 4, p.stderr  # name, duration unit, neighbor, fault outside the run
    for ln in lines:
        assert ln.startswith(f"{bad}:"), ln
    text = p.stderr
    assert f"{bad}:2:7: name" in text
    assert "duration" in text and "unit" in text.lower()
    assert "zz" in text
    assert "faults[0]" in text


def test_up_status_inject_logs_down(runs_dir):
    cli("up", str(SMOKE), "--no-schedule", runs_dir=runs_dir, check=True)
    st = api.status(runs_dir=str(runs_dir))
    assert st["nodes"] and all(n["state"] == "running" for n in st["nodes"])
    broker = next(n["node"] for n in st["nodes"] if n["role"] == "broker")

    p = cli("inject", f"{{crash: {broker}}}", runs_dir=runs_dir, check=True)
    assert "crash" in p.stdout
    states = {n["node"]: n["state"] for n in api.status(runs_dir=str(runs_dir))["nodes"]}
    assert states[broker] == "stopped"

    cli("inject", f"{{restart: {broker}}}", runs_dir=runs_dir, check=True)
    states = {n["node"]: n["state"] for n in api.status(runs_dir=str(runs_dir))["nodes"]}
    assert states[broker] == "running"

    cli("inject", f"{{pause: {broker}, for: 1s}}", runs_dir=runs_dir, check=True)
    states = {n["node"]: n["state"] for n in api.status(runs_dir=str(runs_dir))["nodes"]}
    assert states[broker] == "paused"
    time.sleep(2.0)
    states = {n["node"]: n["state"] for n in api.status(runs_dir=str(runs_dir))["nodes"]}
    assert states[broker] == "running"

    logs = cli("logs", broker, runs_dir=runs_dir, check=True).stdout.splitlines()
    events = [json.loads(ln)["ev"] for ln in logs]
    assert events.count("node_start") == 2  # started, crashed, restarted: one log, appended

    status = cli("status", runs_dir=runs_dir, check=True)
    assert "crash" in status.stdout and "restart" in status.stdout

    m = api.status(runs_dir=str(runs_dir))
    run_path = m["path"]
    manifest = json.loads((Path(run_path) / "manifest.json").read_text())
    ops = [e["op"] for e in manifest["injected"]]
    assert ops[:3] == ["crash", "restart", "pause"] and "resume" in ops
    assert all(e["status"] == "done" for e in manifest["injected"])

    cli("down", runs_dir=runs_dir, check=True)
    assert node_processes(str(runs_dir)) == {}
    again = cli("down", runs_dir=runs_dir)
    assert again.returncode == 0


def test_killed_controller_leaves_nothing_down_cannot_remove(runs_dir):
    env = dict(os.environ, TESTBED_RUNS=str(runs_dir))
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "up", str(SMOKE)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # kill the controller as soon as some node processes exist (in the middle of `up`)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not node_processes(str(runs_dir)):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert node_processes(str(runs_dir)), "no node had started"
    time.sleep(0.5)
    cli("down", runs_dir=runs_dir, check=True)
    assert node_processes(str(runs_dir)) == {}


def test_run_smoke_end_to_end_with_analysis(runs_dir):
    p = cli("run", str(SMOKE), runs_dir=runs_dir, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    run_dir = Path(next(ln.split(": ", 1)[1] for ln in p.stdout.splitlines() if ln.startswith("run directory")))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["emulation"] == "userspace"
    assert manifest["timeline"] and all(e["status"] == "done" for e in manifest["timeline"]), manifest["timeline"]
    for e in manifest["timeline"]:
        assert e["actual_s"] >= e["planned_s"] - 0.001
    checks = json.loads((run_dir / "analysis" / "checks.json").read_text())["checks"]
    assert {c["name"] for c in checks} >= {"no_duplicates", "filter_match", "fifo", "completeness"}
    assert checks and all(c["passed"] for c in checks), checks
    assert list((run_dir / "analysis" / "figures").glob("*.png"))
    assert (run_dir / "analysis" / "report.md").exists()
    assert node_processes(str(runs_dir)) == {}


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_every_fault_kind_example_runs_and_passes_checks(runs_dir, example):
    (rd,) = api.run(str(example), runs_dir=str(runs_dir), analyze=True)
    m = rd.manifest
    assert m["timeline"], "the example has faults"
    assert all(e["status"] == "done" for e in m["timeline"]), m["timeline"]
    checks = api.run_checks(rd)
    assert checks and all(c["passed"] for c in checks), checks


def test_sweep_makes_one_run_per_point_under_one_directory(runs_dir, tmp_path):
    topo = tmp_path / "sweep.yaml"
    topo.write_text(
        "version: 1\nname: sweep-test\nprotocol: pubsub\nduration: 3s\n"
        "sites:\n  a: {}\nnodes:\n  b1: {role: broker, site: a}\n"
        "clients:\n  pubs: {role: publisher, count: 1, attach: b1, rate: \"{{ rate }}/s\", size: 10B}\n"
        "  subs: {role: subscriber, count: 1, attach: b1, filter: \"[class,eq,'STOCK']\"}\n"
        "sweep:\n  rate: [5, 20]\nrepeat: 1\n"
    )
    runs = api.run(str(topo), runs_dir=str(runs_dir), analyze=False)
    assert len(runs) == 2
    sweep_dir = runs[0].path.parent
    assert sweep_dir.parent == runs_dir.resolve() and sweep_dir.name.startswith("sweep-test-sweep-")
    index = json.loads((sweep_dir / "sweep.json").read_text())
    assert [r["point"] for r in index] == [{"rate": 5}, {"rate": 20}]
    published = []
    for rd in runs:
        lines = (rd.logs_dir / "pubs.jsonl").read_text().splitlines()
        published.append(sum(1 for ln in lines if json.loads(ln)["ev"] == "publish"))
    # 3 s at 5/s and at 20/s: the point's rate reached the publisher
    assert 10 <= published[0] <= 20 and 50 <= published[1] <= 70, published
