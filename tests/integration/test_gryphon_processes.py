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


GD_CHECKS = ("exactly_once", "published", "tick_order", "gapless", "complete")


def run_topology(tmp_path, name: str, text: str):
    """Run the topology ``text`` (with its Spark analysis); the run and its checks by name."""
    topo = tmp_path / f"{name}.yaml"
    topo.write_text(text)
    run = api.run(str(topo), runs_dir=str(tmp_path / "runs"))[0]
    return run, {c["name"]: c for c in json.loads((run.analysis_dir / "checks.json").read_text())["checks"]}


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


FILTERED = """\
version: 1
name: gryphon-filters
protocol: gryphon
duration: 5s
seed: 4
sites:
  lab: {}
nodes:
  p1: {role: broker, site: lab}
  b1: {role: broker, site: lab, neighbors: [p1]}
  s1: {role: broker, site: lab, neighbors: [b1]}
  s2: {role: broker, site: lab, neighbors: [b1]}
clients:
  pubs: {role: publisher, count: 2, attach: p1, rate: 40/s, size: 100B, params: {attr_space: 4}}
  keyed: {role: subscriber, count: 4, attach: [s1, s2], params: {filter_mod: 4}}
  low: {role: subscriber, count: 1, attach: s1, filter: "[k,<,2]"}
  src: {role: subscriber, count: 1, attach: s2, filter: "[src,str-prefix,'pubs-1'],[k,>=,1]"}
links:
  default: {delay: 1ms}
params:
  settle: 1s
"""


def test_filters_are_the_pubsub_language_end_to_end(tmp_path):
    """Subscriptions in the pubsub filter language (keyed, range, string prefix) through real brokers:
    each subscriber gets exactly the published messages its filter selects, once."""
    run, checks = run_topology(tmp_path, "filters", FILTERED)
    for name in GD_CHECKS:
        assert checks[name]["passed"], checks[name]
    assert checks["complete"]["details"]["checked"] == 4  # the [k,eq,v] ones; the others are judged here
    key, logged_t = {}, {}  # (pubend, tick) -> k, wall ns it was logged
    for e in events(run, "g_logged"):
        key.update({(e["pubend"], t): k for t, k in zip(e["ticks"], e["keys"])})
        logged_t.update({(e["pubend"], t): e["t"] for t in e["ticks"]})
    settled = max(logged_t.values()) - 1_000_000_000  # what was logged 1 s before the last must be in
    want = {
        **{f"keyed-{i}": lambda pe, k, i=i: k == i for i in range(4)},
        "low-0": lambda pe, k: k < 2,
        "src-0": lambda pe, k: pe.endswith("/pubs-1") and k >= 1,
    }
    got: dict[str, list] = {c: [] for c in want}
    for e in events(run, "g_deliver"):
        got[e["client"]].append((e["pubend"], e["tick"]))
    for c, sel in want.items():
        assert len(got[c]) == len(set(got[c])), c  # once
        assert all(sel(pe, key[(pe, t)]) for pe, t in got[c]), c  # only what the filter selects
        expected = {pt for pt, k in key.items() if sel(pt[0], k) and logged_t[pt] <= settled}
        assert len(expected) > 20 and expected <= set(got[c]), (c, len(expected - set(got[c])))  # all of it


def test_dedicated_subscriber_connections_through_faults(tmp_path):
    """``connection: dedicated`` (Sec 4.1's "dedicated TCP connection" per subscriber): each SHB opens
    one connection per subscriber attached to it, the client process accepts them all, every
    delivery goes over its subscriber's connection, and the history checks pass through the smoke
    schedule's stall, crash, restart and cut."""
    text = SMOKE.read_text().replace(
        "subs: {role: subscriber, count: 2, attach: [s1, s2]}",
        "subs: {role: subscriber, count: 200, attach: [s1, s2], params: {connection: dedicated}}")
    assert "dedicated" in text
    run, checks = run_topology(tmp_path, "dedicated", text)
    for name in GD_CHECKS:
        assert checks[name]["passed"], checks[name]
    cfg = {n: json.loads((run.path / "configs" / f"{n}.json").read_text())["connections"] for n in ("s1", "s2", "subs", "p1")}
    assert cfg == {"s1": 100, "s2": 100, "subs": 200, "p1": 0}
    conns = events(run, "conns")
    most = {n: max((e["lanes_up"] for e in conns if e["node"] == n), default=0) for n in ("s1", "s2")}
    assert most == {"s1": 100, "s2": 100}  # one connection of its own per subscriber
    assert max(e["inbound"] for e in conns if e["node"] == "subs") >= 200
    assert not [e for e in conns if e["node"] == "p1"]  # no lanes, no conns events
    got = {e["client"] for e in events(run, "g_deliver")}
    assert got == {f"subs-{i}" for i in range(200)}
