"""Golden tests for Topology -> Plan: links, rule order, faults, set_link accumulation, partitions."""

from __future__ import annotations

import json

import pytest

from testbed.topology.describe import describe
from testbed.topology.expand import expand
from testbed.topology.loader import load
from testbed.topology.plan import Action, LinkSpec, Plan

from .helpers import write

TOPO = """\
version: 1
name: x
protocol: pubsub
duration: 30s
seed: 5
sites: {ny: {}, rome: {}, oslo: {}}
hosts:
  h1: {address: 192.0.2.1, site: ny}
  h2: {address: 192.0.2.2, site: rome}
nodes:
  a1: {role: broker, site: ny}
  a2: {role: broker, site: ny, neighbors: [a1], host: h2}
  r1: {role: broker, site: rome, neighbors: [a1]}
  o1: {role: broker, site: oslo, neighbors: [r1]}
clients:
  pubs: {role: publisher, count: 4, attach: [a2, a1], rate: 5/s, size: 1KB}
  subs: {role: subscriber, count: 2, attach: r1, filter: "[class,eq,'STOCK']",
         params: {unsubscribe_at: 10s, resubscribe_at: 12s}}
links:
  default: {delay: 1ms}
  rules:
    - {sites: [ny, rome], delay: 100ms, jitter: 10ms, loss: 0.1%, rate: 100mbit}
    - {sites: [ny], delay: 5ms}
    - {nodes: [a1, r1], delay: 50ms}
    - {sites: [ny, rome], jitter: 20ms}
  clients: {delay: 2ms}
faults:
  - {at: 20s, set_link: {nodes: [a1, r1], loss: 5%}}
  - {at: 8s, stall: r1, for: 2.5s}
  - {at: 10.5s, crash: r1}
  - {at: 15s, restart: r1}
  - {at: 5s, cut: [a1, r1], for: 10s}
  - {at: 6s, cut: [a1, o1]}
  - {at: 22s, partition: [[ny, o1], [rome]], for: 3s}
  - {at: 25s, pause: o1, for: 1s}
  - {at: 26s, set_link: {sites: [ny, rome], delay: 200ms}}
  - {at: 27s, crash: o1}
params: {covering: active}
"""


@pytest.fixture
def plan(tmp_path) -> Plan:
    return expand(load(write(tmp_path, TOPO)))


def test_processes_hosts_and_overlay(plan):
    assert list(plan.nodes) == ["a1", "a2", "r1", "o1", "pubs", "subs"]
    assert plan.sites == ("ny", "rome", "oslo")
    assert {n: (p.kind, p.site, p.host) for n, p in plan.nodes.items()} == {
        "a1": ("node", "ny", "h1"), "a2": ("node", "ny", "h2"), "r1": ("node", "rome", "h2"),
        "o1": ("node", "oslo", "h1"),  # no host in its site: the first host
        "pubs": ("clients", "ny", "h2"),  # site and host of the first attach node
        "subs": ("clients", "rome", "h2"),
    }
    # neighbours are undirected: both ends list each other
    assert plan.nodes["a1"].neighbors == ("a2", "r1")
    assert plan.nodes["r1"].neighbors == ("a1", "o1")
    assert plan.nodes["o1"].neighbors == ("r1",)
    g = plan.nodes["pubs"].clients
    assert (g.count, g.attach, g.rate_per_s, g.size_bytes, g.filter) == (4, ("a2", "a1"), 5.0, 1024, None)
    assert g.extra["advertise"] == "[class,eq,'STOCK'],[price,>=,0],[price,<=,100]"
    assert plan.nodes["subs"].clients.extra == {"unsubscribe_at": 10.0, "resubscribe_at": 12.0}
    assert plan.params == {"covering": "active", "settle": 1.0}
    assert (plan.provider, plan.duration_s, plan.seed) == ("local", 30.0, 5)


def test_every_ordered_pair_has_a_link(plan):
    n = len(plan.nodes)
    assert len(plan.links) == n * (n - 1)
    assert all(k.split("->")[0] != k.split("->")[1] for k in plan.links)


def test_link_resolution_and_rule_order(plan):
    L = LinkSpec
    cross = L(delay_ms=100.0, jitter_ms=20.0, loss=0.001, rate_bps=100_000_000)
    assert plan.link("a2", "r1") == cross  # rule 1, then rule 4 overrides jitter only
    assert plan.link("r1", "a2") == cross  # both directions
    assert plan.link("a1", "r1") == L(delay_ms=50.0, jitter_ms=20.0, loss=0.001, rate_bps=100_000_000)  # 1, 3, 4
    assert plan.link("a1", "a2") == L(delay_ms=5.0)  # within ny
    assert plan.link("a1", "o1") == L(delay_ms=1.0)  # default
    # client <-> attach: default + clients; client <-> other nodes: site rules
    assert plan.link("pubs", "a1") == L(delay_ms=2.0)
    assert plan.link("a2", "pubs") == L(delay_ms=2.0)
    assert plan.link("pubs", "r1") == cross
    assert plan.link("subs", "r1") == L(delay_ms=2.0)
    assert plan.link("subs", "a1") == cross
    assert plan.link("pubs", "subs") == cross


def test_fault_timeline(plan):
    got = [(a.at_s, a.op, a.target, a.groups, a.window, a.fault) for a in plan.actions if a.op != "set_link"]
    ny_o1 = ("a1", "a2", "pubs", "o1")
    assert got == [
        (5.0, "cut", ("a1", "r1"), (), (5.0, 15.0), 4),
        (6.0, "cut", ("a1", "o1"), (), (6.0, 30.0), 5),  # no 'for': permanent
        (8.0, "stall", ("r1",), (), (8.0, 10.5), 1),  # no unstall: the crash at 10.5 ends the stall
        (10.5, "crash", ("r1",), (), (10.5, 15.0), 2),  # window ends at the restart
        (15.0, "heal", ("a1", "r1"), (), (5.0, 15.0), 4),  # ends of windows first at equal times
        (15.0, "restart", ("r1",), (), (15.0, 15.0), 3),
        (22.0, "partition", (), (ny_o1, ("r1", "subs")), (22.0, 25.0), 6),
        (25.0, "heal_partition", (), (ny_o1, ("r1", "subs")), (22.0, 25.0), 6),
        (25.0, "pause", ("o1",), (), (25.0, 26.0), 7),
        (26.0, "resume", ("o1",), (), (25.0, 26.0), 7),
        (27.0, "crash", ("o1",), (), (27.0, 30.0), 9),  # no restart: until the end
    ]
    assert [a.at_s for a in plan.actions] == sorted(a.at_s for a in plan.actions)
    assert plan.actions[0].source == "{at: 5s, cut: [a1, r1], for: 10s}"


def test_crash_inside_a_stall_or_pause_ends_it(tmp_path):
    from testbed.topology.loader import plans

    f = tmp_path / "t.yaml"
    f.write_text("version: 1\nname: t\nprotocol: pubsub\nduration: 30s\nsites:\n  a: {}\n"
                 "nodes:\n  b1: {role: broker, site: a}\n  b2: {role: broker, site: a, neighbors: [b1]}\n"
                 "faults:\n  - {at: 2s, stall: b1, for: 5s}\n  - {at: 4s, crash: b1}\n"
                 "  - {at: 9s, restart: b1}\n  - {at: 10s, pause: b2, for: 2s}\n  - {at: 12s, crash: b2}\n")
    (p,) = plans(str(f))
    got = [(a.at_s, a.op, a.target[0], a.window) for a in p.actions]
    assert got == [
        (2.0, "stall", "b1", (2.0, 4.0)),  # the held messages die with the process: no unstall
        (4.0, "crash", "b1", (4.0, 9.0)),
        (9.0, "restart", "b1", (9.0, 9.0)),
        (10.0, "pause", "b2", (10.0, 12.0)),  # a crash at the window's end also ends it: no resume
        (12.0, "crash", "b2", (12.0, 30.0)),
    ]


def test_set_link_carries_full_specs_accumulated(plan):
    sets = [a for a in plan.actions if a.op == "set_link"]
    assert [a.at_s for a in sets] == [20.0, 26.0]
    first, second = sets
    assert set(first.links) == {"a1->r1", "r1->a1"}
    assert first.links["a1->r1"] == LinkSpec(delay_ms=50.0, jitter_ms=20.0, loss=0.05, rate_bps=100_000_000)
    # the second change keeps the first one's loss on a1<->r1 and the initial specs elsewhere
    assert second.links["a1->r1"] == LinkSpec(delay_ms=200.0, jitter_ms=20.0, loss=0.05, rate_bps=100_000_000)
    assert second.links["a2->r1"] == LinkSpec(delay_ms=200.0, jitter_ms=20.0, loss=0.001, rate_bps=100_000_000)
    # every pair across ny and rome, both directions, client processes included
    ny, rome = {"a1", "a2", "pubs"}, {"r1", "subs"}
    assert set(second.links) == {f"{a}->{b}" for a in ny for b in rome} | {f"{b}->{a}" for a in ny for b in rome}
    # the initial link table is untouched
    assert plan.link("a1", "r1").loss == pytest.approx(0.001)


def test_plan_json_round_trip(plan):
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan
    assert all(isinstance(a, Action) for a in again.actions)


def test_provider_override_and_point(tmp_path):
    topo = load(write(tmp_path, TOPO))
    p = expand(topo, provider_override="docker", point={"k": 1}, repeat_index=2)
    assert (p.provider, p.point, p.repeat_index) == ("docker", {"k": 1}, 2)
    assert p.source_text == TOPO and p.rendered_text == TOPO


def test_no_hosts_means_one_local_host(tmp_path):
    text = TOPO.replace("hosts:\n  h1: {address: 192.0.2.1, site: ny}\n  h2: {address: 192.0.2.2, site: rome}\n", "")
    text = text.replace(", host: h2", "")
    p = expand(load(write(tmp_path, text)))
    assert list(p.hosts) == ["localhost"] and p.hosts["localhost"].address is None
    assert {n.host for n in p.nodes.values()} == {"localhost"}


def test_site_rule_within_one_site_forms(tmp_path):
    text = TOPO.replace("- {sites: [ny], delay: 5ms}", "- {sites: [ny, ny], delay: 5ms}")
    assert expand(load(write(tmp_path, text))).link("a1", "a2") == LinkSpec(delay_ms=5.0)


def test_describe_groups_links_and_lists_faults(plan):
    text = describe(plan)
    assert "x  protocol pubsub  provider local  duration 30s  seed 5" in text
    assert "ny <-> rome" in text and "100ms ±20ms normal loss 0.1% 100mbit" in text
    lines = text.splitlines()
    cross = [ln for ln in lines if ln.strip().startswith("ny <-> rome") and "100ms ±20ms" in ln]
    assert len(cross) == 1 and cross[0].endswith("(5 pairs)")  # a2,pubs x r1,subs + a1-subs
    assert any("crash" in ln and "r1" in ln and "{at: 10.5s, crash: r1}" in ln for ln in lines)
    assert any(ln.strip().startswith("22s  partition") and "a1,a2,pubs,o1 | r1,subs" in ln for ln in lines)
    assert "pubs" in text and "x4" in text


def test_cut_with_close_carries_the_flag_and_close_is_cut_only(tmp_path):
    from testbed.errors import TopologyError
    from testbed.topology.loader import plans

    base = TOPO.split("faults:")[0] if "faults:" in TOPO else TOPO
    f = tmp_path / "t.yaml"
    f.write_text(base + "faults:\n  - {at: 5s, cut: [a1, r1], for: 2s}\n"
                 "  - {at: 7s, cut: [a1, r1], close: true, for: 3s}\n")
    (plan,) = plans(f)
    got = [(a.at_s, a.op, a.close) for a in plan.actions]
    assert got == [(5.0, "cut", False), (7.0, "heal", False), (7.0, "cut", True), (10.0, "heal", False)]
    f.write_text(base + "faults:\n  - {at: 5s, stall: a1, close: true, for: 2s}\n")
    with pytest.raises(TopologyError, match="close"):
        plans(f)
