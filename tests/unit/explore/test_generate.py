"""The case generator of ``testbed explore``: every case it draws is one the format accepts,
faults keep the quiet tail free, draws are reproducible, and a topology with nothing to vary
says so."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from testbed.errors import TopologyError, UsageError
from testbed.explore.files import load_base, parse, to_yaml, validate_text
from testbed.explore.generate import (FAULT_KINDS, VARY_KINDS, Fault, apply_variant, base_topology, draw_case,
                                      nothing_to_vary, schedule_entries, tail_s)
from testbed.explore.runner import usable_variants
from testbed.topology.units import parse_time

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGIES = ROOT / "topologies"

# (file, --set values, draws): several protocols, sites, client shapes; 1500 cases in all
CORPUS = [
    ("smoke.yaml", {}, 500),
    ("gryphon/smoke.yaml", {"duration": "12s"}, 250),
    ("mobility/smoke.yaml", {}, 250),
    ("transactions/crash.yaml", {}, 250),
    ("ordering/bench-tm.yaml", {"rate": 2000, "duration": "12s"}, 250),
]


def _base(rel: str, set_vars: dict) -> dict:
    return base_topology(load_base(TOPOLOGIES / rel, set_vars)[0])


@pytest.mark.parametrize("rel,set_vars,draws", CORPUS, ids=[c[0] for c in CORPUS])
def test_every_generated_case_passes_validation(rel, set_vars, draws, tmp_path):
    base = _base(rel, set_vars)
    vary, _skipped = usable_variants(base, VARY_KINDS, str(tmp_path / "probe.yaml"))
    duration = parse_time(base["duration"])
    kinds_seen: set[str] = set()
    for i in range(draws):
        # half the cases with every usable variant, half with the base topology; seeds vary too
        case = draw_case(base, seed=1000 + i // 50, index=i, kinds=FAULT_KINDS,
                         vary=vary if i % 2 else (), max_faults=1 + i % 6)
        text = to_yaml(case.topology())
        try:
            plan = validate_text(text, f"{rel}#case{i}")
        except TopologyError as e:  # pragma: no cover - the failure message is the point
            pytest.fail(f"case {i} of {rel} rejected:\n{e}\n--- the case:\n{text}")
        assert plan.seed == case.seed
        for e in case.topology().get("faults", []):
            end = parse_time(e["at"]) + (parse_time(e["for"]) if "for" in e else 0.0)
            assert end <= duration - tail_s(duration) + 1e-9, (rel, i, e)  # the quiet tail stays quiet
        kinds_seen |= {f.kind for f in case.faults}
    assert kinds_seen == set(FAULT_KINDS), kinds_seen  # every kind was drawn somewhere


def test_draws_are_reproducible_and_differ_between_cases():
    base = _base("smoke.yaml", {})
    a = draw_case(base, 7, 3, vary=("links", "counts"))
    b = draw_case(base, 7, 3, vary=("links", "counts"))
    assert to_yaml(a.topology()) == to_yaml(b.topology())
    others = {to_yaml(draw_case(base, 7, i, vary=("links", "counts")).topology()) for i in range(10)}
    assert len(others) == 10


def test_yaml_round_trip_keeps_the_format_field_names():
    base = _base("smoke.yaml", {})
    case = draw_case(base, 5, 0, kinds=("crash", "set_link", "cut"), max_faults=6)
    t = case.topology()
    assert parse(to_yaml(t, "a header\nof two lines")) == t
    assert parse(to_yaml(t))["params"]["covering"] == "off"  # YAML 1.2: `off` stays a word
    for e in t["faults"]:
        assert set(e) <= {"at", "for", "crash", "restart", "stall", "pause", "cut", "close", "partition", "set_link"}


def test_crash_and_set_link_render_with_their_restart_and_restore():
    f = Fault("crash", 1.5, 2.0, ("b3",))
    assert f.entries() == [{"at": "1.5s", "crash": "b3"}, {"at": "3.5s", "restart": "b3"}]
    g = Fault("set_link", 0.5, 1.0, ("b1", "b2"), delay=0.25, jitter=0.01, restore=(0.04, 0.005))
    assert g.entries() == [{"at": "500ms", "set_link": {"nodes": ["b1", "b2"], "delay": "250ms", "jitter": "10ms"}},
                           {"at": "1.5s", "set_link": {"nodes": ["b1", "b2"], "delay": "40ms", "jitter": "5ms"}}]
    assert [e["at"] for e in schedule_entries([g, f])] == ["500ms", "1.5s", "1.5s", "3.5s"]


def test_nothing_to_vary_is_said_per_kind(tmp_path):
    base = _base("smoke.yaml", {})
    assert nothing_to_vary(base, "placement") == "the topology has no placement with a range|hash strategy"
    assert nothing_to_vary(base, "links") is None and nothing_to_vary(base, "counts") is None
    bare = {k: v for k, v in base.items() if k not in ("clients", "links")}
    assert nothing_to_vary(bare, "attach") == "the topology has no client groups"
    assert nothing_to_vary(bare, "links").startswith("the topology sets no link delay")
    with pytest.raises(UsageError, match="--vary 'speed'"):
        nothing_to_vary(base, "speed")
    # transactions fix each group's count (params.instances): counts is probed and skipped
    tx = _base("transactions/crash.yaml", {})
    keep, skipped = usable_variants(tx, ("counts", "links"), str(tmp_path / "p.yaml"))
    assert keep == ("links",)
    assert skipped and skipped[0].startswith("--vary counts: skipped: the protocol rejects a varied topology")


def test_variants_change_only_what_they_say():
    base = _base("ordering/bench-tm.yaml", {"rate": 2000, "duration": "12s"})
    rng = random.Random(1)
    seen = set()
    for _ in range(20):
        t, changed = apply_variant(base, ("placement",), rng)
        seen.add(t["placement"]["topic_managers"]["strategy"])
        assert {k: v for k, v in t.items() if k != "placement"} == {k: v for k, v in base.items() if k != "placement"}
        assert {k: v for k, v in t["placement"]["topic_managers"].items() if k != "strategy"} == \
            {k: v for k, v in base["placement"]["topic_managers"].items() if k != "strategy"}
    assert seen == {"range", "hash"}
    t, changed = apply_variant(base, ("counts",), random.Random(2))
    for g, c in base["clients"].items():
        assert max(1, c["count"] // 2) <= t["clients"][g]["count"] <= 2 * c["count"]


def test_too_short_a_run_is_a_clear_error():
    base = _base("smoke.yaml", {})
    base["duration"] = "5s"
    with pytest.raises(UsageError, match="duration 5s is too short to explore"):
        draw_case(base, 1, 0)


def test_throttle_is_drawn_only_when_asked_and_validates(tmp_path):
    from testbed.explore.generate import ALL_FAULT_KINDS
    from testbed.explore.runner import parse_kinds

    assert "throttle" not in FAULT_KINDS and "throttle" in ALL_FAULT_KINDS
    assert parse_kinds(None, ALL_FAULT_KINDS, "--faults", FAULT_KINDS) == FAULT_KINDS  # not by default
    assert parse_kinds("throttle", ALL_FAULT_KINDS, "--faults", FAULT_KINDS) == ("throttle",)
    base = _base("smoke.yaml", {})
    seen = []
    for i in range(60):
        case = draw_case(base, 11, i, kinds=("throttle", "crash"), max_faults=5)
        text = to_yaml(case.topology())
        plan = validate_text(text, f"throttle#case{i}")  # the format accepts every drawn schedule
        for f in case.faults:
            if f.kind == "throttle":
                assert 0.02 <= f.cpu <= 0.2 and f.target[0] in base["nodes"]
                seen.append(f)
        ops = [a.op for a in plan.actions]
        assert ops.count("throttle") == ops.count("unthrottle") == sum(f.kind == "throttle" for f in case.faults)
    assert len(seen) > 10
    assert seen[0].entries() == [{"at": seen[0].entries()[0]["at"], "throttle": seen[0].target[0],
                                  "cpu": seen[0].cpu, "for": seen[0].entries()[0]["for"]}]


def test_throttle_stays_within_the_host_cpu():
    base = _base("smoke.yaml", {})
    base["hosts"] = {"h1": {"cpu": 0.05}}
    for i in range(30):
        for f in draw_case(base, 3, i, kinds=("throttle",), max_faults=3).faults:
            assert f.cpu <= 0.05
