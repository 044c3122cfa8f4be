"""`testbed reproduce transactions --provider docker`: Fig 5's S-TX point (3 seeds) in real
containers, the claims and the history checks from their logs, and nothing of these runs left
behind in the engine (only this test's runs are looked at and cleaned: by their run ids).

Marker ``docker``: locally a missing engine skips with the reason; in CI (CI=true) it fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.testing.dockerlab import labeled

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]


def test_fig5_stx_point_in_containers(engine, tmp_path, monkeypatch):
    from testbed.experiments import reproduce

    monkeypatch.setenv("TESTBED_RUNS", str(tmp_path / "runs"))
    reproduce("transactions", scale="quick", figs=[5], out_dir=tmp_path / "out", runs_dir=str(tmp_path / "runs"),
              provider="docker", points={"variant": "stx"})
    out = tmp_path / "out" / "transactions"
    result = json.loads((out / "result.json").read_text())
    runs = [(tmp_path / "out" / r["run"]).resolve() for r in result["runs"] if r["run"]]  # relative to <out>
    assert len(runs) == 3 and result["stats"]["ran"] == 3
    for run in runs:
        m = json.loads((run / "manifest.json").read_text())
        assert m["provider"] == "docker" and m["status"] in ("collected", "analyzed")
        ends = [json.loads(x) for x in (run / "logs" / "e.jsonl").read_text().splitlines() if '"tx_end"' in x]
        assert ends and {e["outcome"] for e in ends} == {"committed"}
        assert labeled(engine, m["run_id"]) == []  # torn down: no container, network or volume left
    by = {c["sentence"]: c for c in json.loads((out / "claims.json").read_text())["claims"]}
    assert by["S-TX throughput about 20 tx/s"]["measured"]["n"] == 3
    checks = json.loads((out / "checks.json").read_text())
    # P1-P5 over the figure's runs: a row of the checks table (a check of the runs, not a claim: #28)
    assert [c["passed"] for c in checks if c["check"] == "transactions.p1_p5_per_figure"] == [True]
    assert checks and all(c["passed"] for c in checks), [c for c in checks if not c["passed"]]
    assert (out / "figures" / "fig5.png").is_file()
