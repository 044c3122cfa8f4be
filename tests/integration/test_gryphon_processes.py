"""Gryphon end to end: real node processes (local provider), the real fault schedule
(stall, cut, crash, restart), real Spark analysis with the gryphon history checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import api

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "topologies" / "gryphon" / "smoke.yaml"

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(600)]


def events(run, ev):
    out = []
    for f in (run.path / "logs").glob("*.jsonl"):
        for line in f.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("ev") == ev:
                out.append(e)
    return out


def test_smoke_exactly_once_across_stall_cut_crash_restart(tmp_path):
    runs = api.run(str(SMOKE), runs_dir=str(tmp_path / "runs"))
    assert len(runs) == 1
    run = runs[0]
    tl = run.manifest["timeline"]
    assert {a["op"] for a in tl} >= {"stall", "crash", "restart", "cut"}
    assert all(a["status"] == "done" for a in tl), tl
    checks = {c["name"]: c for c in json.loads((run.analysis_dir / "checks.json").read_text())["checks"]}
    for name in ("exactly_once", "published", "tick_order", "gapless", "complete"):
        assert checks[name]["passed"], checks[name]
    assert checks["complete"]["details"]["checked"] == 2
    logged = sum(len(e["ticks"]) for e in events(run, "g_logged") if not e["recovered"])
    delivered = events(run, "g_deliver")
    assert logged > 300 and len(delivered) >= 2 * logged * 0.9
    # the b1 crash is seen at once by its neighbours (lost connection)
    assert any(e["peer"] == "b1" and not e["up"] for e in events(run, "g_peer"))
    # the stable log is in the PHB's state dir and survives it
    assert (run.node_state_dir("p1") / "pubends.log").stat().st_size > 0
