"""Plan -> DOT (``testbed graph``): clusters per site, labelled edges, the state at --at, protocol decorations.

Assertions on the DOT text itself; one test lays every shipped example out with
the real ``dot`` to catch syntax errors the text checks would miss.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from testbed.render.graph import plan_to_dot, q, state_at
from testbed.topology.loader import plans

ROOT = Path(__file__).resolve().parents[3]
TOPO = ROOT / "topologies"


def plan(name: str, **set_vars):
    return plans(str(TOPO / name), set_vars, None)[0]


def node_attrs(dot: str, name: str) -> str:
    m = re.search(rf'^\s*"{re.escape(name)}" \[(.*)\];$', dot, re.M)
    assert m, f"no node line for {name}"
    return m.group(1)


def edge_attrs(dot: str, a: str, b: str) -> str:
    m = re.search(rf'^\s*"{re.escape(a)}" -- "{re.escape(b)}" \[(.*)\];$', dot, re.M)
    assert m, f"no edge {a} -- {b}"
    return m.group(1)


def cluster_members(dot: str, cluster: str) -> list[str]:
    """Names of the node lines directly inside ``subgraph "cluster"`` (nested clusters included)."""
    lines = dot.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f'subgraph "{cluster}"'))
    depth, out = 0, []
    for line in lines[start:]:
        depth += line.count("{") - line.count("}")
        m = re.match(r'^\s*"([^"]+)" \[label=', line)
        if m:
            out.append(m.group(1))
        if depth == 0:
            break
    return out


def test_sites_are_clusters_holding_their_nodes_and_client_groups():
    dot = plan_to_dot(plan("smoke.yaml"))
    assert dot.startswith('graph "smoke" {')
    assert sorted(cluster_members(dot, "cluster_site_ny")) == ["b1", "b2", "pub-stock", "sub-bond"]
    assert sorted(cluster_members(dot, "cluster_site_rome")) == ["b3", "b4", "sub-cheap", "sub-fx"]
    assert sorted(cluster_members(dot, "cluster_site_tokyo")) == ["b5", "pub-bond"]
    assert 'label="pub-stock\\npublisher x2\\n20/s each"' in node_attrs(dot, "pub-stock")
    assert 'label="sub-cheap\\nsubscriber x3"' in node_attrs(dot, "sub-cheap")


def test_overlay_edges_once_each_labelled_with_their_link():
    dot = plan_to_dot(plan("smoke.yaml"))
    overlay = re.findall(r'^\s*"(b\d)" -- "(b\d)"', dot, re.M)
    assert sorted(overlay) == [("b1", "b2"), ("b1", "b3"), ("b1", "b5"), ("b3", "b4")]
    assert 'label="10ms ±2ms normal"' in edge_attrs(dot, "b1", "b2")  # within a site
    assert 'label="40ms ±5ms normal"' in edge_attrs(dot, "b1", "b3")  # across sites
    # clients attach to every broker of their list, with the client link
    assert 'label="1ms"' in edge_attrs(dot, "sub-bond", "b2") and edge_attrs(dot, "sub-bond", "b1")
    assert "dashed" not in dot  # no --at: nothing cut, nothing crashed


def test_at_a_time_shows_the_faults_in_effect_then():
    p = plan("smoke.yaml")
    # 8.5 s: b1-b5 cut (8 s for 2 s)
    dot = plan_to_dot(p, 8.5)
    e = edge_attrs(dot, "b1", "b5")
    assert 'style="dashed"' in e and 'label="CUT  40ms ±5ms normal"' in e
    assert "style" not in edge_attrs(dot, "b1", "b3")
    assert "at 8.5s of 20s: b1-b5 cut" in dot
    # 10.5 s: healed, b3 not yet crashed
    dot = plan_to_dot(p, 10.5)
    assert "dashed" not in dot and "no fault in effect" in dot
    # 12.5 s: b3 crashed (restart at 14 s); 16.2 s: b5 paused; 4.5 s: b3 stalled
    n = node_attrs(plan_to_dot(p, 12.5), "b3")
    assert "(crashed)" in n and 'fillcolor="#d0d0d0"' in n and "dashed" in n
    assert "(crashed)" not in node_attrs(plan_to_dot(p, 14.0), "b3")  # restart at exactly 14 s applies
    assert "(paused)" in node_attrs(plan_to_dot(p, 16.2), "b5")
    assert "(paused)" not in node_attrs(plan_to_dot(p, 17.5), "b5")
    assert "(stalled)" in node_attrs(plan_to_dot(p, 4.5), "b3")


def test_a_partition_dashes_every_edge_across_it_and_only_those():
    p = plan("examples/partition.yaml")
    dot = plan_to_dot(p, 5.0)
    assert "CUT" in edge_attrs(dot, "b1", "b3")  # east - west
    assert "CUT" not in edge_attrs(dot, "b1", "b2") and "CUT" not in edge_attrs(dot, "b3", "b4")
    assert "CUT" not in plan_to_dot(p, 7.5)  # healed after 3 s


def test_set_link_shows_the_new_values_at_that_time():
    p = plan("examples/set-link.yaml")
    before = plan_to_dot(p, 1.0)
    during = plan_to_dot(p, 5.0)
    cross = [(a, b) for a, b in re.findall(r'^\s*"([^"]+)" -- "([^"]+)"', during, re.M)
             if p.nodes[a].site != p.nodes[b].site]
    assert cross, "the example has an overlay edge across the two sites"
    a, b = cross[0]
    assert "120ms" not in edge_attrs(before, a, b)
    assert "120ms" in edge_attrs(during, a, b) and "loss 1%" in edge_attrs(during, a, b)


def test_state_replays_actions_in_order():
    p = plan("smoke.yaml")
    assert state_at(p, None).crashed == set()
    s = state_at(p, 13.0)
    assert s.crashed == {"b3"} and not s.cut and not s.paused
    assert state_at(p, 9.0).separated("b5", "b1") and not state_at(p, 9.0).separated("b1", "b3")


def test_ordering_marks_tm_servers_with_their_topics():
    dot = plan_to_dot(plan("ordering/smoke.yaml"))
    assert "TM: 10 topics 0-9 (range)" in node_attrs(dot, "tm1")
    assert "TM: 10 topics 10-19 (range)" in node_attrs(dot, "tm2")
    assert "TM:" not in node_attrs(dot, "b1")


def test_gryphon_cells_are_boxes_in_their_site_and_bundles_are_coloured_per_cell_pair():
    dot = plan_to_dot(plan("gryphon/smoke.yaml"))
    assert sorted(cluster_members(dot, "cluster_cell_ib1")) == ["b1", "b2"]
    assert sorted(cluster_members(dot, "cluster_site_lab")) == ["b1", "b2", "p1", "pubs", "s1", "s2", "subs"]
    e1, e2 = edge_attrs(dot, "b1", "p1"), edge_attrs(dot, "b2", "p1")
    assert "bundle ib1-p1" in e1 and "bundle ib1-p1" in e2
    colour = re.search(r'color="(#[0-9a-f]+)"', e1).group(1)
    assert f'color="{colour}"' in e2
    assert colour not in edge_attrs(dot, "b1", "s1")  # another bundle, another colour
    assert 'style="dotted"' in edge_attrs(dot, "b1", "b2") and "cell peers" in edge_attrs(dot, "b1", "b2")
    crashed = plan_to_dot(plan("gryphon/smoke.yaml"), 4.0)
    assert "(crashed)" in node_attrs(crashed, "b1")


def test_pubsub_has_no_protocol_decorations():
    dot = plan_to_dot(plan("smoke.yaml"))
    assert "cluster_cell" not in dot and "TM:" not in dot and "bundle" not in dot


def test_quoting_escapes_quotes_backslashes_and_newlines():
    assert q('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


@pytest.mark.parametrize("name", ["smoke.yaml", "ordering/smoke.yaml", "gryphon/smoke.yaml",
                                  "examples/partition.yaml", "examples/set-link.yaml"])
def test_dot_lays_out_the_source_without_complaint(name):
    p = plan(name)
    for at in (None, p.duration_s / 2):
        r = subprocess.run(["dot", "-Tsvg"], input=plan_to_dot(p, at), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and not r.stderr.strip(), r.stderr
        assert r.stdout.count('class="cluster"') >= len(p.sites)
