"""A routing re-sync lost to a silent cut is repaired when the cut heals (found by `testbed explore`).

The case `testbed explore` shrank on the smoke topology: b2 crashes, a silent cut b1-b2 starts,
b2 restarts inside it. b1 sees b2's connection come back and re-syncs it, but the cut drops
those frames (the connection stays up). Before ``Node.on_link_up`` the pub/sub core only
re-synced on a reconnect, so b2 stayed without b1's routing state for the rest of the run and
completeness failed long after every fault had ended. Now the heal re-syncs the link.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import api

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]


def test_heal_of_a_silent_cut_resyncs_the_routing_state_lost_in_it(tmp_path):
    text = (ROOT / "topologies" / "smoke.yaml").read_text()  # edited as text: YAML 1.1 reads `off` as false
    head, rest = text.split("\nfaults:\n", 1)
    tail = rest[rest.index("\nparams:"):]
    faults = ("\nfaults:\n  - {at: 2s, crash: b2}\n  - {at: 3.9s, cut: [b1, b2], for: 3s}\n"
              "  - {at: 4s, restart: b2}\n")
    head = head.replace("name: smoke", "name: cut-resync").replace("duration: 20s", "duration: 14s")
    path = tmp_path / "cut-resync.yaml"
    path.write_text(head + faults + tail)

    (rd,) = api.run(str(path), runs_dir=str(tmp_path / "runs"), analyze=True)
    m = rd.manifest
    assert all(e["status"] == "done" for e in m["timeline"]), m["timeline"]
    heal = next(e for e in m["timeline"] if e["op"] == "heal")

    def events(node: str, ev: str) -> list[dict]:
        lines = (Path(rd.path) / "logs" / f"{node}.jsonl").read_text().splitlines()
        return [e for e in map(json.loads, lines) if e.get("ev") == ev]

    checks = {c["name"]: c for c in api.run_checks(rd)}
    assert checks["completeness"]["passed"], checks["completeness"]
    assert all(c["passed"] for c in checks.values()), [c for c in checks.values() if not c["passed"]]

    # b1 re-synced b2 after the heal (the re-sync on b2's reconnect fell inside the cut)
    t_heal = m["t0_wall_ns"] + heal["actual_s"] * 1e9
    resyncs = [e for e in events("b1", "broker_resync") if e.get("peer") == "b2"]
    assert len(resyncs) >= 2, resyncs  # at b2's reconnect, and at the heal
    assert any(e["t"] >= t_heal for e in resyncs), (resyncs, t_heal)

