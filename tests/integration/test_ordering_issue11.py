"""Issue #11's three-site topology on real processes.

With ``pipeline: false`` (the paper's routing, what the code did before the fix) chains
overtake each other between the three TM servers and events stay buffered for good: the
Spark liveness check fails and names, for each stuck event, the topic, TM server and
sequence number it waits for and what holds that number. With the pipeline (the default)
the same topology keeps TNO, completeness and liveness.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from testbed import api
from testbed.protocols.ordering.analysis.randomized import check_run

TOPO = Path(__file__).resolve().parents[2] / "topologies" / "ordering" / "liveness" / "three-sites.yaml"


def _variant(tmp_path: Path, duration: str, **params) -> Path:
    y = YAML()
    topo = y.load(TOPO.read_text())
    topo["duration"] = duration
    topo["params"].update(params)
    path = tmp_path / "three-sites-variant.yaml"
    with open(path, "w") as f:
        y.dump(topo, f)
    return path


@pytest.mark.slow
def test_three_sites_pass_with_the_pipeline(tmp_path):
    [rd] = api.run(str(TOPO), runs_dir=str(tmp_path / "runs"), analyze=False)
    r = check_run(rd.path)
    assert r["passed"], {k: r[k] for k in ("tno", "completeness", "liveness")}
    assert r["completeness"]["expected"] > 3000


@pytest.mark.slow
@pytest.mark.spark
def test_liveness_check_fails_on_the_papers_routing(tmp_path):
    path = _variant(tmp_path, "8s", pipeline=False)
    [rd] = api.run(str(path), runs_dir=str(tmp_path / "runs"), analyze=False)
    api.analyze_run(str(rd.path))
    doc = json.loads((Path(rd.path) / "analysis" / "checks.json").read_text())
    checks = {c["name"]: c for c in doc["checks"]}
    assert not doc["ok"]
    live = checks["liveness"]
    assert not live["passed"] and live["violations"] > 50, live
    assert not checks["completeness"]["passed"]
    assert checks["tno"]["passed"]  # nothing was notified out of order: it just stopped
    ex = live["examples"][0]
    assert ex["never_notified"] and ex["held_ms"] > 1000 * live["details"]["bound_s"]
    waits = ex["waits"]
    assert waits and all(w["tm"] in ("t1", "t2", "t3") and w["needs"] > w["sub_lc"] for w in waits)
    # the missing predecessor is named: a published event that is itself stuck, or a dummy
    named = [w["next_missing"] for e in live["examples"] for w in e["waits"]]
    assert any(": event " in n for n in named), named
    report = (Path(rd.path) / "analysis" / "report.md").read_text()
    assert "Violations of `liveness`" in report and "delivered" in report and "None" not in report.split(
        "Completeness:")[1].split("\n")[0]
