"""The fuzz of test_auth.py under the Docker provider: containers on a user network stay
authenticated by the run secret. >= 1,000 random and malformed frames to both ports of a broker
container and of a client container during a smoke run; then every history check passes and
the report counts each refusal. Marker ``docker``: without an engine it skips (CI: fails).
Never calls wipe (run it alone: ``pytest tests/integration/test_docker_auth.py``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from auth_helpers import fuzz, fuzz_frames
from testbed import api
from testbed.testing.harness import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

SMOKE = Path(__file__).resolve().parents[2] / "topologies" / "smoke.yaml"


def test_fuzz_containers_then_checks_pass(engine, tmp_path):
    runs = tmp_path / "runs"
    rd = api.up(str(SMOKE), provider="docker", runs_dir=str(runs))
    try:
        dep = json.loads((rd.path / "deployment.json").read_text())
        targets = ["b1", "sub-bond"]
        addrs = [tuple(dep["endpoints"][n][port]) for n in targets for port in ("data", "control")]
        assert all(not a[0].startswith("127.") for a in addrs)  # the containers' own addresses
        wait_for(lambda: rd.manifest.get("status") == "running", 120, 0.2)
        sent = fuzz(addrs, fuzz_frames(random.Random(15), rd.run_id, "b2", 1200))
        assert sent >= 1000
        wait_for(lambda: rd.manifest.get("status") == "workload-done", 180, 0.2)
        st = {n["node"]: n for n in api.status(rd.run_id, runs_dir=str(runs))["nodes"]}
        for n in targets:
            assert st[n]["state"] == "running" and st[n]["info"]["stalled"] is False
    finally:
        api.down(rd.run_id, runs_dir=str(runs))
    cfg = rd.configs_dir / "b1.json"
    assert cfg.stat().st_mode & 0o777 == 0o600
    res = api.analyze_run(str(rd.path))
    assert res.ok, [(r.name, r.examples, r.details) for r in res.checks if not r.passed]
    rej = res.metrics["rejected"]
    assert set(rej["by_node"]) == set(targets) and rej["total"] == sent, rej
    assert "were refused" in res.report.read_text().split("## Event logs")[0]
