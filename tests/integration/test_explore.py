"""``testbed explore`` end to end: real node processes, real Spark checks.

* the forgetful pub/sub variant (a broker that never re-syncs a neighbour coming back,
  ``testbed.testing.forgetful``, registered here through a real entry point) is found within a
  few cases and shrunk to at most two fault entries; the same minimal case with the correct
  broker passes, so the violation is the bug's;
* the correct pub/sub protocol on the smoke topology: no violation on a fixed-seed exploration,
  and ``--resume`` reads every verdict back instead of running again.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from testbed.explore import explore
from testbed.explore.files import load_base, parse, to_yaml, validate_text
from testbed.explore.generate import base_topology

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]

LINE = """\
version: 1
name: line
protocol: {protocol}
duration: 10s
seed: 1
sites:
  a: {{}}
  b: {{}}
nodes:
  b1: {{role: broker, site: a}}
  b2: {{role: broker, site: a, neighbors: [b1]}}
  b3: {{role: broker, site: b, neighbors: [b2]}}
clients:
  pub: {{role: publisher, count: 2, attach: b1, rate: 20/s, size: 100B}}
  sub: {{role: subscriber, count: 2, attach: b3, filter: "[class,eq,'STOCK']"}}
links:
  default: {{delay: 5ms, jitter: 1ms}}
  rules:
    - {{sites: [a, b], delay: 20ms, jitter: 2ms}}
  clients: {{delay: 1ms, jitter: 0ms}}
params:
  settle: 1s
"""


@pytest.fixture
def forgetful(tmp_path, monkeypatch):
    """The forgetful protocol installed as an entry point, here and in the runs' subprocesses."""
    from testbed import registry as protocols
    from testbed.testing.forgetful import install_entry_point

    site = tmp_path / "site"
    install_entry_point(site)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(site), os.environ.get("PYTHONPATH", "")]))
    protocols.reset()
    assert "forgetful" in protocols.names()
    yield
    sys.path.remove(str(site)) if str(site) in sys.path else None
    protocols.reset()


def test_forgetful_broker_is_found_and_shrunk_to_at_most_two_faults(spark, forgetful, tmp_path):
    topo = tmp_path / "line.yaml"
    topo.write_text(LINE.format(protocol="forgetful"))
    res = explore(str(topo), runs=3, seed=24, faults="crash,pause", max_faults=3, first=True, shrink_runs=1,
                  out=str(tmp_path / "explorations"))
    s = res.summary
    assert "completeness" in s["violations"], s["per_case"]
    first_bad = min(c["case"] for c in s["per_case"] if "completeness" in c["failed"])
    assert s["cases"] == first_bad + 1 <= 3  # found within 3 cases; --first: none drawn after it
    m = s["minimal"]["completeness"]
    shrunk = json.loads((res.path / "minimal" / "completeness.json").read_text())
    assert m["entries_after"] <= 2 < shrunk["entries_before"], shrunk
    minimal = Path(m["file"])
    text = minimal.read_text()
    assert text.startswith("# testbed explore") and "reproduce: testbed run" in text
    plan = validate_text(text, str(minimal))  # what `testbed run` will read
    assert {a.op for a in plan.actions} == {"crash", "restart"}
    # the minimal file is a case `testbed run` already ran and saw fail: the same topology, seed included
    failed = [json.loads(v.read_text()) for v in (res.path / "verdicts").glob("*.json")]
    same = [v for v in failed if parse(Path(v["file"]).read_text()) == parse(text)]
    assert same and all("completeness" in v["failed"] for v in same), [v["file"] for v in failed]
    assert (res.path / "summary.md").read_text().count("completeness") >= 2

    # the same minimal case with the correct broker: the checks pass, so the bug made the violation
    from testbed.explore.check import check_run
    from testbed import api

    fixed = parse(text)
    fixed["protocol"] = "pubsub"
    ok_file = tmp_path / "fixed.yaml"
    ok_file.write_text(to_yaml(fixed))
    [rd] = api.run(str(ok_file), runs_dir=str(tmp_path / "runs"), analyze=False)
    checks = {c["name"]: c for c in check_run(rd.path, spark)}
    assert checks["completeness"]["passed"], checks["completeness"]["examples"]


def test_correct_pubsub_smoke_exploration_has_no_violation_and_resumes(spark, tmp_path):
    smoke = base_topology(load_base(ROOT / "topologies" / "smoke.yaml")[0])  # its own faults removed
    smoke["duration"] = "10s"  # 4 s of faults, then the 6 s quiet tail
    topo = tmp_path / "smoke.yaml"
    topo.write_text(to_yaml(smoke))
    out = tmp_path / "explorations"
    res = explore(str(topo), runs=2, seed=11, out=str(out), vary="links,placement,counts")
    s = res.summary
    assert s["cases"] == 2 and s["status"] == {"ok": 2}, s["per_case"]
    assert res.ok and s["violations"] == {} and not list((res.path / "minimal").glob("*.yaml"))
    assert all(c["faults"] for c in s["per_case"])  # every case had faults to survive
    assert "placement" in " ".join(s["skipped"])  # nothing to vary there: said, not silently ignored
    runs_before = sorted(str(p) for p in (res.path / "runs").glob("*/*/plan.json"))  # runs/<case>/<run>/
    assert len(runs_before) == 2

    again = explore(resume=res.path.name, out=str(out), runs=2)
    assert again.path == res.path and again.summary["status"] == {"ok": 2}
    assert sorted(str(p) for p in (res.path / "runs").glob("*/*/plan.json")) == runs_before  # nothing ran again
