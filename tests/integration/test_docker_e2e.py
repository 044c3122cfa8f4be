"""The same topologies under `--provider docker` as under `local`: same faults, same history checks.

Marker ``docker``: locally a missing engine skips with the reason; in CI (CI=true) it fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed import api
from testbed.testing.dockerlab import labeled

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = [ROOT / "topologies" / "smoke.yaml",
              ROOT / "topologies" / "examples" / "partition.yaml",
              ROOT / "topologies" / "examples" / "set-link.yaml"]


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
    assert labeled(engine, rd.run_id) == []
