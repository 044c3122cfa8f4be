"""A mobility run whose moves outlast its duration waits for them (``params.drain``), on real
processes: a 3-broker line whose b2-b3 link takes 1.5 s each way, so a move b1 -> b3 (four crossings)
takes about 6 s, begun at ~0.5 s of a 4 s workload. With the default drain (30 s) the run ends when
every broker reports its moves done (+ 2 s): past the old end (duration + 2 s), every move ended,
P1-P9 pass. With ``drain: 2s`` (the old end) the run stops with a move open and P2 says so: the
check that the saturated paper-scale runs failed (docs/mobility.md, "History checks")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import api

from test_mobility_run import checks, events

pytestmark = [pytest.mark.slow, pytest.mark.spark]

TOPO = """\
version: 1
name: mobility-drain
protocol: mobility
duration: 4s
seed: 5
sites:
  lab: {}
  far: {}
nodes:
  b1: {role: broker, site: lab}
  b2: {role: broker, site: lab, neighbors: [b1]}
  b3: {role: broker, site: far, neighbors: [b2]}
links:
  default: {delay: 1ms}
  rules:
    - {sites: [lab, far], delay: 1500ms}
  clients: {delay: 0.2ms, jitter: 0ms}
params:
  movement: reconfiguration
  settle: 1s
  move_timeout: 10s
  quiesce: 0.5s
{% if drain is defined %}
  drain: {{ drain }}
{% endif %}
  mobile:
    m:
      count: 2
      workload: random
      start: [b1]
      routes: [[b1, b3]]
      pause: 0.5s
      first_move: 0.5s
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("drain")
    topo = root / "slow.yaml"
    topo.write_text(TOPO)
    out = {}
    for key, var in (("default", {}), ("short", {"drain": "2s"})):
        [rd] = api.run(str(topo), set_vars=var, runs_dir=str(root / "runs"), analyze=False)
        out[key] = Path(rd.path)
    api.analyze_runs([str(p) for p in out.values()])
    return out


def moves(run: Path) -> tuple[set[str], dict[str, float]]:
    return {e["mid"] for e in events(run, "move_begin")}, {e["mid"]: e["dur_ms"] for e in events(run, "move_end")}


def test_the_run_waits_for_the_moves_in_flight_and_every_check_passes(runs):
    run = runs["default"]
    m = json.loads((run / "manifest.json").read_text())
    assert m["ended"] == "finished" and m["workload_end_s"] > 4.0 + 2.0, m  # past the old end
    begun, ended = moves(run)
    assert begun and set(ended) == begun and min(ended.values()) > 4000  # each outlasted the quiesce
    res = checks(run)
    assert {k: v["violations"] for k, v in res.items() if not v["passed"]} == {}


def test_with_the_old_end_a_move_is_cut_and_p2_fails(runs):
    run = runs["short"]
    begun, ended = moves(run)
    assert begun - set(ended), (begun, ended)  # stopped with a move open
    res = checks(run)
    assert not res["P2"]["passed"] and res["P2"]["violations"] == len(begun - set(ended))
    assert "0 move_end" in json.dumps(res["P2"]["examples"])
