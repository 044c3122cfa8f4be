"""Every topology shipped in topologies/ validates, expands and describes."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.topology.describe import describe
from testbed.topology.loader import plans

ROOT = Path(__file__).resolve().parents[3] / "topologies"
FILES = sorted(ROOT.rglob("*.yaml"))


def test_there_are_shipped_topologies():
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"smoke.yaml", "examples/crash-restart.yaml", "examples/stall.yaml", "examples/pause.yaml",
            "examples/cut.yaml", "examples/partition.yaml", "examples/set-link.yaml"} <= names


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(ROOT).as_posix() for p in FILES])
def test_shipped_topology_is_valid(path):
    ps = plans(path)
    assert ps
    for p in ps:
        assert p.nodes and p.links
        assert describe(p).strip()


def test_smoke_shape():
    (p,) = plans(ROOT / "smoke.yaml")
    assert p.protocol == "pubsub" and len(p.sites) == 3
    assert sum(n.kind == "node" for n in p.nodes.values()) == 5
    roles = [n.clients.role for n in p.nodes.values() if n.clients]
    assert roles.count("publisher") == 2 and 2 <= roles.count("subscriber") <= 3
    assert {"stall", "cut", "crash", "restart", "pause"} <= {a.op for a in p.actions}
    attach = {a for n in p.nodes.values() if n.clients for a in n.clients.attach}
    crashed = {a.target[0] for a in p.actions if a.op == "crash"}
    assert not crashed & attach


@pytest.mark.parametrize("kind,ops", [
    ("crash-restart", {"crash", "restart"}), ("stall", {"stall", "unstall"}), ("pause", {"pause", "resume"}),
    ("cut", {"cut", "heal"}), ("partition", {"partition", "heal_partition"}), ("set-link", {"set_link"}),
])
def test_examples_show_their_fault(kind, ops):
    (p,) = plans(ROOT / "examples" / f"{kind}.yaml")
    assert {a.op for a in p.actions} == ops
    assert 10 <= p.duration_s <= 15
    assert 3 <= sum(n.kind == "node" for n in p.nodes.values()) <= 4
