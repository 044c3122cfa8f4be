"""The pub/sub core's extension points: public API, broker handler table, RoutingTable.clone()."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import testbed.protocols.pubsub.nodes as core
from testbed.protocols.pubsub.nodes import Broker, RoutingTable, parse

from .harness import FakeRuntime, Sim, topology

ROOT = Path(core.__file__).resolve().parents[4]  # the checkout (testbed/protocols/pubsub/nodes/__init__.py)


def test_public_api_exports_resolve():
    for name in core.__all__:
        assert getattr(core, name) is not None, name
    with pytest.raises(AttributeError):
        core.nope  # noqa: B018


def _package_of(module: str) -> str:
    return module if (ROOT / module.replace(".", "/")).is_dir() else module.rsplit(".", 1)[0]


def test_no_node_package_imports_another_packages_private_names():
    """In the node runtime, every protocol's nodes and topology module, ``from testbed.<pkg>.<mod>
    import _name`` from another package is forbidden: protocols use each other's public API."""
    bad = []
    files = list((ROOT / "testbed" / "nodes").rglob("*.py")) + list(
        (ROOT / "testbed" / "protocols").glob("*/nodes/**/*.py")) + list(
        (ROOT / "testbed" / "protocols").glob("*/topology.py"))
    assert len(files) > 30
    for path in files:
        own = ".".join(path.relative_to(ROOT).parent.parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("testbed."):
                for a in node.names:
                    if a.name.startswith("_") and _package_of(node.module) != own:
                        bad.append(f"{path.relative_to(ROOT)}: from {node.module} import {a.name}")
    assert bad == []


def _table():
    t = RoutingTable(["n1", "n2"], "active")
    t.advertise("a1", parse("[x,>=,0]"), "n1")
    t.subscribe("s1", parse("[x,>,5]"), "n2")
    t.subscribe("s2", parse("[x,>,7]"), "n2")
    return t


def _state(t: RoutingTable):
    return (dict((k, (e.filter.text, e.hop)) for k, e in t.srt.items()),
            dict((k, (e.filter.text, e.hop)) for k, e in t.prt.items()),
            {h: list(d) for h, d in t.wanted.items()}, {h: list(d) for h, d in t.sent.items()},
            {h: list(d) for h, d in t.advs_by_hop.items()}, t.sizes())


def test_clone_is_equal_then_independent_both_ways():
    t = _table()
    c = t.clone()
    assert _state(c) == _state(t) and c.route({"x": 9}) == t.route({"x": 9}) == {"n2"}
    before = _state(t)
    # change the clone: the original is untouched
    c.unsubscribe("s1", "n2")
    c.subscribe("s3", parse("[x,<,1]"), "n1")
    c.advertise("a2", parse("[y,>=,0]"), "n2")
    c.prt["s2"].hop = "zz"  # even entries are separate objects
    assert _state(t) == before
    assert t.route({"x": 9}) == {"n2"} and t.route({"x": 0}) == set()
    assert c.route({"x": 0}) == {"n1"}
    # change the original: the clone is untouched
    after_c = _state(c)
    t.unadvertise("a1", "n1")
    t.unsubscribe("s2", "n2")
    assert _state(c) == after_c and c.route({"x": 9}) == {"n2"}


def test_clone_copies_tentative_entries_and_the_change_log():
    t = RoutingTable(["n1", "n2"], "off")  # tentative entries are for covering off
    t.advertise("a1", parse("[x,>=,0]"), "n1")
    t.subscribe("s2", parse("[x,>,7]"), "n2")
    t.changes = []
    t.cause = "m1"
    t.prepare_sub("m1", "s2", parse("[x,>,5]"), "n1")
    c = t.clone()
    assert set(c.tentative) == set(t.tentative) and c.changes == t.changes and c.cause == "m1"
    c.abort_sub("m1", "s2")
    assert ("m1", "s2") in t.tentative and ("m1", "s2") not in c.tentative
    assert len(c.changes) > len(t.changes)  # the clone's log grew, the original's did not
    t.commit_sub("m1", "s2", None)
    assert t.prt["s2"].hop == "n1" and c.prt["s2"].hop == "n2"


def test_clone_of_an_empty_table_and_outputs_match():
    t = _table()
    c = t.clone()
    assert [(o.dst, o.kind, o.id) for o in c.subscribe("s4", parse("[x,>,1]"), "n2")] == \
           [(o.dst, o.kind, o.id) for o in t.subscribe("s4", parse("[x,>,1]"), "n2")]
    e = RoutingTable([]).clone()
    assert e.sizes() == {"srt": 0, "prt": 0, "covered": 0, "sent": 0, "retired": 0}


class CountingBroker(Broker):
    """A protocol on the core: one new message kind and a replaced handler, nothing else."""

    HANDLERS = {"ping": "on_ping", "unadv": "on_unadv_counted"}

    def __init__(self, rt):
        super().__init__(rt)
        self.pings: list[str] = []
        self.unadvs = 0

    def on_ping(self, src, msg):
        self.pings.append(src)

    def on_unadv_counted(self, src, msg):
        self.unadvs += 1
        self.on_unadv(src, msg)


class OverridingBroker(Broker):
    """The other style: override on_message and hand the rest to super()."""

    def __init__(self, rt):
        super().__init__(rt)
        self.mine = 0

    def on_message(self, src, msg):
        if msg.get("k") == "mine":
            self.mine += 1
            return
        super().on_message(src, msg)


def test_handler_tables_merge_along_the_mro():
    t = CountingBroker.handler_table()
    assert t["ping"] == "on_ping" and t["unadv"] == "on_unadv_counted" and t["sub"] == "on_sub"
    assert Broker.handler_table() == Broker.HANDLERS  # the base is unchanged


def _line(cls):
    """Two brokers of class ``cls`` (a subclass is what a protocol's NODE_CLASSES would name)."""
    sim = Sim(topology({"b1": ["b2"], "b2": ["b1"]}, {}))
    for name, cfg in sim.configs.items():
        rt = FakeRuntime(sim, name, cfg)
        sim.rts[name], sim.nodes[name] = rt, cls(rt)
        sim.drive(sim.nodes[name].start())
    return sim


def test_subclass_handles_new_kinds_and_the_base_still_routes():
    sim = _line(CountingBroker)
    b1 = sim.nodes["b1"]
    b1.on_message("b2", {"k": "ping"})
    b1.on_message("b2", {"k": "adv", "id": "a", "f": "[x,>=,0]"})
    b1.on_message("b2", {"k": "unadv", "id": "a"})
    b1.on_message("b2", {"k": "nope"})
    assert b1.pings == ["b2"] and b1.unadvs == 1
    c = b1.status()
    assert (c["adv_in"], c["unadv_in"], c["bad"], c["srt"]) == (1, 1, 1, 0)


def test_subclass_overriding_on_message_and_calling_super_still_works():
    sim = _line(OverridingBroker)
    b1 = sim.nodes["b1"]
    b1.on_message("b2", {"k": "mine"})
    b1.on_message("b2", {"k": "adv", "id": "a", "f": "[x,>=,0]"})
    assert b1.mine == 1 and b1.status()["srt"] == 1


def test_a_handler_table_naming_no_method_fails_at_construction():
    class Broken(Broker):
        HANDLERS = {"x": "no_such_method"}

    with pytest.raises(TypeError, match=r"HANDLERS\['x'\] names no method 'no_such_method'"):
        _line(Broken)
