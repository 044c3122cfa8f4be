"""The same topologies under `--provider docker` as under `local`: same faults, same history checks.

Marker ``docker``: locally a missing engine skips with the reason; in CI (CI=true) it fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testbed import api
from testbed.errors import ProviderError

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = [ROOT / "topologies" / "smoke.yaml",
              ROOT / "topologies" / "examples" / "partition.yaml",
              ROOT / "topologies" / "examples" / "set-link.yaml"]


@pytest.fixture(scope="module")
def engine():
    from testbed.providers.engine import connect

    try:
        return connect()
    except ProviderError as e:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI needs a Docker engine: {e}")
        pytest.skip(f"no Docker engine: {e}")


def _labeled(engine, run_id: str) -> list[str]:
    f = {"label": f"testbed.run={run_id}"}
    return ([c.name for c in engine.containers.list(all=True, filters=f)]
            + [n.name for n in engine.networks.list(filters=f)]
            + [v.name for v in engine.volumes.list(filters=f)])


@pytest.mark.parametrize("topology", TOPOLOGIES, ids=[t.stem for t in TOPOLOGIES])
def test_topology_in_containers_passes_the_same_checks(engine, tmp_path, topology):
    (rd,) = api.run(str(topology), provider="docker", runs_dir=str(tmp_path / "runs"))
    m = rd.manifest
    assert m["provider"] == "docker"
    assert m["emulation"] == "userspace"  # this kernel has no sch_netem: chosen automatically
    assert m["timeline"] and all(e["status"] == "done" for e in m["timeline"]), m["timeline"]
    checks = api.run_checks(rd)
    assert {c["name"] for c in checks} >= {"no_duplicates", "filter_match", "fifo", "completeness"}
    assert all(c["passed"] for c in checks), checks
    # every process wrote its log into the run directory, the crashed one included
    assert {p.stem for p in rd.logs_dir.glob("*.jsonl")} == set(rd.plan().nodes)
    assert _labeled(engine, rd.run_id) == []
