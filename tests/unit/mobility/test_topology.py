"""Topology keys of the mobility protocol: strict, located errors; the shipped files validate;
the workload templates have the covering structure of Fig 7."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import TopologyError
from testbed.protocols.mobility.nodes.workloads import TEMPLATES, assign, covered_count, template
from testbed.protocols.pubsub.nodes.filters import covers, parse
from testbed.topology.loader import plans
from testbed.topology.loader import load

ROOT = Path(__file__).resolve().parents[3]
from .harness import TOPOLOGY_HEAD as BASE


def errors(tmp_path: Path, params: str) -> list[str]:
    p = tmp_path / "t.yaml"
    p.write_text(BASE + params)
    with pytest.raises(TopologyError) as ei:
        load(p)
    return [line.split(":", 1)[1] for line in str(ei.value).splitlines()]


def ok(tmp_path: Path, params: str):
    p = tmp_path / "t.yaml"
    p.write_text(BASE + params)
    return load(p)


def test_defaults_and_derived_covering(tmp_path):
    t = ok(tmp_path, "  mobile: {m: {count: 4, start: [b1, b3], routes: [[b1, b3]]}}\n")
    p = t.protocol_params
    assert p.movement == "reconfiguration" and p.covering == "off" and p.move_timeout == 5.0
    assert p.mobile["m"].pause == 10.0 and p.mobile["m"].moving == "all"
    t = ok(tmp_path, "  movement: covering\n")
    assert t.protocol_params.covering == "retract"


@pytest.mark.parametrize("params, message", [
    ("  movement: teleport\n", "params.movement"),
    ("  movement: reconfiguration\n  covering: retract\n", "covering: off"),
    ("  mobile: {m: {count: 2, start: [b1, b9]}}\n", "unknown broker 'b9'"),
    ("  mobile: {m: {count: 2, start: [b1], routes: [[b2, b3]]}}\n", "on no route"),
    ("  mobile: {m: {count: 2, start: [b1], routes: [[b1, b1]]}}\n", "two different brokers"),
    ("  mobile: {m: {count: 2, pause: 10}}\n", "bare number"),
    ("  mobile: {m: {count: 2, wrkload: tree}}\n", "unknown key 'wrkload'"),
    ("  mobile: {pubs: {count: 2}}\n", "name of a node or client group"),
    ("  mobile: {m: {count: 2, moving: {templates: [11]}}}\n", "not in 1..10"),
    ("  mobile: {m: {count: 2, start_by: template}}\n", "start_by: template"),
    ("  mobile: {m: {count: 2, join: 20s}}\n", "join window 20s is not shorter than the run"),
])
def test_bad_keys_are_located_errors(tmp_path, params, message):
    errs = errors(tmp_path, params)
    assert len(errs) == 1, errs
    assert message in errs[0], errs
    line, col = errs[0].split(":")[:2]
    assert line in ("12", "13", "14") and int(col) >= 1  # at params or the offending key or value


@pytest.mark.parametrize("name, runs", [("smoke.yaml", 1)] + [
    (f"fig{n}-{s}.yaml", r) for s in ("quick", "paper")
    for n, r in (("08", 1), ("09", 4), ("10", 4), ("11", 1), ("12", 5), ("13", 4), ("14", 1))])
@pytest.mark.parametrize("movement", ["reconfiguration", "covering"])
def test_shipped_topologies_validate(name, runs, movement):
    ps = plans(str(ROOT / "topologies" / "mobility" / name), {"movement": movement}, None)
    assert len(ps) == runs
    for plan in ps:
        assert plan.protocol == "mobility" and plan.params["movement"] == movement
        assert plan.params["mobile"]
    if name.startswith("fig14-"):
        assert ps[0].links["b1->b3"].delay_ms == 50.0


def test_fig8_tree_paths_are_six_links():
    [plan] = plans(str(ROOT / "topologies" / "mobility" / "fig08-quick.yaml"), {}, None)
    from testbed.protocols.mobility.analysis.checks import tree_paths  # noqa: PLC0415  (analysis side, pure)

    path = tree_paths({n: list(v.neighbors) for n, v in plan.nodes.items() if v.kind == "node"})
    assert len(path("b1", "b13")) - 1 == 6 and len(path("b2", "b14")) - 1 == 6 and len(path("b1", "b12")) - 1 == 6


@pytest.mark.parametrize("brokers", [14, 20, 26, 32])
def test_fig13_grows_the_tree_and_keeps_the_paths(brokers):
    from testbed.protocols.mobility.analysis.checks import tree_paths  # noqa: PLC0415

    ps = plans(str(ROOT / "topologies" / "mobility" / "fig13-quick.yaml"), {"brokers": brokers}, None)
    for plan in ps:
        nodes = {n: list(v.neighbors) for n, v in plan.nodes.items() if v.kind == "node"}
        assert len(nodes) == brokers
        path = tree_paths(nodes)
        assert len(path("b1", "b12")) - 1 == 6 and len(path("b2", "b14")) - 1 == 6
        assert plan.params["mobile"]["cov"]["routes"] == [["b1", "b12"], ["b2", "b14"]]


@pytest.mark.parametrize("scale, per", [("quick", 2), ("paper", 10)])
def test_fig12_steps_add_movers_in_the_papers_order(scale, per):
    ps = plans(str(ROOT / "topologies" / "mobility" / f"fig12-{scale}.yaml"), {"movement": "covering"}, None)
    movers = {}
    for plan in ps:
        groups = plan.params["mobile"]
        brokers = [n for n, v in plan.nodes.items() if v.kind == "node"]
        moving = [c for g, spec in groups.items() for c in assign(dict(spec, name=g), brokers) if c["moves"]]
        movers[plan.point["step"]] = {(c["workload"], c["template"]) for c in moving}
        assert len(moving) == per * plan.point["step"]
    assert movers[1] == {("covered", 1)}
    assert movers[2] - movers[1] == {("tree", 1)} and movers[3] - movers[2] == {("chained", 1)}
    assert movers[4] - movers[3] == {("tree", 10)} and movers[5] - movers[4] == {("distinct", 1)}


def test_workload_templates_cover_as_fig7():
    f = {w: [parse(template(w, k)) for k in range(1, TEMPLATES + 1)] for w in ("covered", "chained", "tree", "distinct")}
    for w, fs in f.items():
        for k in range(TEMPLATES):
            n = sum(1 for j in range(TEMPLATES) if j != k and covers(fs[k], fs[j]))
            assert n == covered_count(w, k + 1), (w, k + 1)
    assert covered_count("covered", 1) == 9 and covered_count("tree", 1) == 9 and covered_count("distinct", 3) == 0
    assert covered_count("chained", 1) == 9 and covered_count("chained", 9) == 1


def test_assignment_is_deterministic_and_follows_start_by():
    g = {"name": "m", "count": 20, "workload": "random", "start": ["b1", "b2"], "start_by": "template",
         "routes": [["b1", "b13"], ["b2", "b14"]], "pause": 10.0, "moving": {"templates": [1]}}
    a = assign(g, ["b1", "b2", "b13", "b14"])
    assert a == assign(dict(g), ["b1", "b2", "b13", "b14"])
    for c in a:
        assert c["start"] == ("b1" if c["template"] % 2 else "b2")
        assert c["route"] == (["b1", "b13"] if c["start"] == "b1" else ["b2", "b14"])
        assert c["moves"] == (c["template"] == 1)
        assert 0 <= c["offset"] < 10.0


def test_every_repeat_draws_its_own_clients_and_every_party_of_a_run_the_same(tmp_path):
    """A grid point's repeats are independent draws (templates, offsets), and the brokers (node
    config), the validation hook and the analysis (plan.json) of one run agree on them."""
    import json

    from testbed.protocols.mobility.analysis.measure import clients_of
    from testbed.render.node_config import render_node_config
    from testbed.protocols.mobility.topology import hosted_clients

    g = {"name": "m", "count": 20, "workload": "random", "start": ["b1", "b2"], "pause": 10.0}
    brokers = ["b1", "b2"]
    r0, r1, r2 = (assign(g, brokers, r) for r in (0, 1, 2))
    assert r0 == assign(g, brokers)  # repeat 0 is the file's own draw
    assert r0 != r1 and r1 != r2 and r1 == assign(dict(g), brokers, 1)
    assert [c["template"] for c in r0] != [c["template"] for c in r1]

    p = tmp_path / "t.yaml"
    p.write_text(BASE + "  mobile: {m: {count: 12, start: [b1, b3], pause: 2s}}\n")
    import dataclasses

    [plan] = plans(str(p))
    for r in (0, 2):
        pr = dataclasses.replace(plan, repeat_index=r)
        cfg = render_node_config(pr, "run", "b1", listen=("127.0.0.1", 1), control=("127.0.0.1", 2), peers={},
                                 emulation="userspace", log_path="b1.jsonl", state_dir="st", secret=b"x" * 32)
        assert cfg["repeat_index"] == r
        via_plan_json = clients_of(json.loads(json.dumps(pr.to_dict())))
        brokers3 = ["b1", "b2", "b3"]
        spec = dict(pr.params["mobile"]["m"], name="m")
        assert {c["client"]: c["start"] for c in assign(spec, brokers3, r)} == \
            {c: v["start"] for c, v in via_plan_json.items()}
        assert hosted_clients(pr)  # the validate/graph hook draws for the plan's repeat too


def test_single_root_gives_template_1_to_client_0_only():
    g = {"name": "m", "count": 30, "workload": "covered", "assign": "single-root", "start": ["b1", "b2"],
         "start_by": "template", "moving": {"templates": [1]}}
    a = assign(g, ["b1", "b2"])
    assert [c["client"] for c in a if c["template"] == 1] == ["m-0"]
    assert [c["client"] for c in a if c["moves"]] == ["m-0"] and a[0]["start"] == "b1"
    assert {c["template"] for c in a[1:]} == set(range(2, 11))
