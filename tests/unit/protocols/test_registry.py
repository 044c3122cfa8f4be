"""The protocol registry: built-ins found by convention, every part present, entry points."""

from __future__ import annotations

import importlib
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from testbed import registry as P
from testbed.nodes.runtime import api as node_api
from testbed.nodes.runtime import events as E
from testbed.topology.protocols import PROTOCOLS, TOPOLOGY_ATTRS, client_params_model

ROOT = Path(P.__file__).resolve().parent


def test_builtins_are_the_protocol_packages_on_disk():
    on_disk = sorted(p.parent.name for p in (ROOT / "protocols").glob("*/__init__.py")
                     if not p.parent.name.startswith("_"))
    assert P.builtin_names() == on_disk
    for name in on_disk:  # each found as an entry point's package is: one way
        p = P.get(name)
        assert (p.package, p.source, p.topology) == (f"testbed.protocols.{name}", "builtin",
                                                    f"testbed.protocols.{name}.topology")
    assert {"pubsub", "ordering", "gryphon", "echo"} <= set(P.names())
    assert list(PROTOCOLS) == P.names()  # the loader's view is the registry's


@pytest.mark.parametrize("name", P.builtin_names())
def test_every_registered_protocol_has_every_part(name):
    p = P.get(name)
    topo = p.topology_module()
    for attr in TOPOLOGY_ATTRS:
        assert hasattr(topo, attr), f"{p.topology} lacks {attr}"
    assert issubclass(topo.Params, BaseModel) and issubclass(topo.Placement, BaseModel)
    assert topo.ACYCLIC in ("forest", "cells", None)
    if not p.runnable:
        # declared, not runnable: only the topology part exists yet; `up` refuses it
        assert (p.events, p.analysis) == (None, None), f"{name}: parts without a nodes part"
        with pytest.raises(P.ProtocolError, match="no node implementation yet"):
            p.node_class_path("node", sorted(topo.NODE_ROLES)[0])
        return
    assert p.missing() == []
    # nodes: every node role and every client role has a Node class
    for role in topo.NODE_ROLES:
        assert issubclass(node_api.load_class(p.node_class_path("node", role)), node_api.Node)
    for role in topo.CLIENT_ROLES:
        assert issubclass(node_api.load_class(p.node_class_path("clients", role)), node_api.Node)
        client_params_model(topo, role)
    # events: the module declares at least one event of its own
    before = set(E._REGISTRY)
    mod = p.events_module()
    declared = {n for n, et in E._REGISTRY.items() if et.protocol == name}
    assert mod is not None and declared, f"{p.events} declares no {name} event"
    assert before <= set(E._REGISTRY)
    # analysis: a non-empty CHECKS of callables; figures, if any, callables
    checks = p.checks()
    assert checks and all(callable(c) for c in checks)
    assert all(callable(f) for f in p.figures())


def _generic_files() -> list[Path]:
    """Every source file of the testbed package outside the protocol packages (test support,
    testbed/testing, is for the tests and names protocols as they do)."""
    out = []
    for f in sorted(ROOT.rglob("*")):
        rel = f.relative_to(ROOT)
        if f.is_file() and f.suffix in (".py", ".j2", ".yaml", ".json", ".toml") and "__pycache__" not in rel.parts \
                and rel.parts[0] not in ("protocols", "testing"):
            out.append(f)
    return out


def _name_hits(files: list[Path], names: list[str]) -> list[str]:
    """Every line of ``files`` naming one of ``names`` as a word."""
    import re

    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9])")
    return [f"{f.name}:{i}: {line.strip()}" for f in files
            for i, line in enumerate(f.read_text().splitlines(), 1) if pattern.search(line)]


def test_no_file_outside_a_protocol_package_names_a_protocol():
    """Generic code names no protocol (as a word, in code, strings or comments): a protocol is one
    folder, found by the registry. A generic word that is also a protocol's name is reworded."""
    files = _generic_files()
    assert len(files) > 80 and any(f.name == "registry.py" for f in files)
    names = P.builtin_names()
    assert {"echo", "pubsub", "ordering", "gryphon", "transactions", "mobility"} <= set(names)
    hits = _name_hits(files, names)
    assert hits == [], "\n".join(hits)


def test_the_grep_for_protocol_names_can_fail(tmp_path):
    """The matcher the test above uses sees a name planted in a generic file, and only as a word."""
    planted, other = tmp_path / "x.py", tmp_path / "y.py"
    planted.write_text('PROTOCOL = "gryphon"  # a special case\n')
    other.write_text("gryphonish = 1\nmy_gryphon = 2\n")
    assert _name_hits([planted, other], P.builtin_names()) == ['x.py:1: PROTOCOL = "gryphon"  # a special case']


def test_echo_is_registered_through_the_shape_alone():
    e = P.get("echo")
    assert (e.nodes, e.events, e.analysis) == ("testbed.protocols.echo.nodes", "testbed.protocols.echo.nodes.events",
                                               "testbed.protocols.echo.analysis")
    assert [c.__name__ for c in e.checks()] == ["check_fifo", "check_no_phantom"]
    assert P.node_class_path("echo", "node", "echo") == "testbed.protocols.echo.nodes.node:EchoNode"


def test_a_runnable_protocol_missing_parts_is_reported():
    assert P.Protocol("x", "t", nodes="n").missing() == ["events", "analysis"]
    assert P.Protocol("x", "t", nodes="testbed.protocols.echo.nodes", events="e",
                      analysis="testbed.protocols.echo.nodes").missing() == ["analysis.checks"]
    assert P.Protocol("x", "t").missing() == []  # declared only: nothing is required yet


def test_unknown_protocol_is_a_clear_error():
    with pytest.raises(P.ProtocolError, match=r"unknown protocol 'nope'; one of: .*pubsub"):
        P.get("nope")


def _write_toy(tmp_path: Path, pkg: str, *, topology: bool = True, runnable: bool = True) -> Path:
    """A toy protocol package in tmp: topology, nodes (reusing EchoNode), events, analysis."""
    root = tmp_path / "src"
    d = root / pkg
    (d / "nodes").mkdir(parents=True)
    (d / "analysis").mkdir()
    (d / "__init__.py").write_text('"""A toy protocol."""\n')
    if topology:
        (d / "topology.py").write_text(textwrap.dedent("""
            from testbed.topology.schema import StrictModel
            class Params(StrictModel):
                pass
            class Placement(StrictModel):
                pass
            class ClientParams(StrictModel):
                pass
            NODE_ROLES = {"echo"}
            CLIENT_ROLES = set()
            ACYCLIC = None
        """))
    if not runnable:
        shutil.rmtree(d / "nodes")
        shutil.rmtree(d / "analysis")
        return root
    (d / "nodes" / "__init__.py").write_text(
        'NODE_CLASSES = {("node", "*"): "testbed.protocols.echo.nodes.node:EchoNode"}\n')
    (d / "nodes" / "events.py").write_text(
        f'from testbed.nodes.runtime.events import declare\n'
        f'declare("{pkg}_hello", "{pkg}", "A toy event.", n="int")\n')
    (d / "analysis" / "__init__.py").write_text("")
    (d / "analysis" / "checks.py").write_text("def check_toy(ctx):\n    return None\nCHECKS = [check_toy]\n")
    return root


class _EP:
    """An importlib.metadata.EntryPoint look-alike (name, value, load)."""

    def __init__(self, name: str, value: str) -> None:
        self.name, self.value, self.dist = name, value, None

    def load(self):
        mod, _, attr = self.value.partition(":")
        m = importlib.import_module(mod)
        return getattr(m, attr) if attr else m


@pytest.fixture
def toy(tmp_path, monkeypatch):
    def install(pkg: str, eps: list[tuple[str, str]], **kw):
        root = _write_toy(tmp_path, pkg, **kw)
        monkeypatch.syspath_prepend(str(root))
        import importlib.metadata as md

        monkeypatch.setattr(md, "entry_points",
                            lambda group=None: [_EP(n, v) for n, v in eps] if group == P.ENTRY_POINT_GROUP else [])
        P.reset()
        return root

    yield install
    P.reset()
    for m in [m for m in sys.modules if m.startswith("zztoy")]:
        del sys.modules[m]


def test_entry_point_protocol_is_found_by_the_same_convention(toy):
    toy("zztoy", [("zztoy", "zztoy")])
    p = P.get("zztoy")
    assert p.source == "entry point zztoy = zztoy"
    assert (p.topology, p.nodes, p.events, p.analysis, p.experiments) == (
        "zztoy.topology", "zztoy.nodes", "zztoy.nodes.events", "zztoy.analysis", None)
    assert p.missing() == []
    assert "zztoy" in PROTOCOLS and PROTOCOLS["zztoy"].NODE_ROLES == {"echo"}
    assert P.node_class_path("zztoy", "node", "echo") == "testbed.protocols.echo.nodes.node:EchoNode"
    assert "zztoy_hello" in P.all_events()
    assert [c.__name__ for c in P.checks_for("zztoy")] == ["check_toy"]


def test_entry_point_without_topology_is_refused(toy):
    toy("zztoy", [("zztoy", "zztoy")], topology=False)
    with pytest.raises(P.ProtocolError, match="has no topology module"):
        P.registry()


def test_entry_point_may_not_shadow_a_builtin(toy):
    toy("zztoy", [("pubsub", "zztoy")])
    with pytest.raises(P.ProtocolError, match="'pubsub' is already registered"):
        P.registry()


def test_entry_point_that_fails_to_load_names_itself(toy):
    toy("zztoy", [("zzbroken", "zztoy_no_such_module")])
    with pytest.raises(P.ProtocolError, match="entry point zzbroken = zztoy_no_such_module: cannot load"):
        P.registry()
    assert {"ordering", "gryphon"} <= set(P.reproducible())  # the CLI parser still builds
    from testbed import cli

    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0


def test_entry_point_parts_may_be_named_explicitly(toy, tmp_path):
    root = toy("zztoy", [])
    (root / "zztoy_desc.py").write_text('TOPOLOGY = "zztoy.topology"\nNODES = "zztoy.nodes"\n'
                                        'ANALYSIS = "zztoy.analysis"\n')
    import importlib.metadata as md

    md.entry_points = lambda group=None: [_EP("zzdesc", "zztoy_desc")] if group == P.ENTRY_POINT_GROUP else []
    P.reset()
    p = P.get("zzdesc")
    assert (p.topology, p.nodes, p.events, p.analysis) == ("zztoy.topology", "zztoy.nodes",
                                                           "zztoy.nodes.events", "zztoy.analysis")
    (root / "zztoy_bad.py").write_text('TOPOLOGY = "zztoy.nope"\n')
    md.entry_points = lambda group=None: [_EP("zzbad", "zztoy_bad")] if group == P.ENTRY_POINT_GROUP else []
    P.reset()
    with pytest.raises(P.ProtocolError, match="TOPOLOGY = 'zztoy.nope' cannot be imported"):
        P.registry()


def test_node_runtime_loads_the_rendered_class_and_rejects_bad_paths():
    from testbed.protocols.echo.nodes.node import EchoNode

    assert node_api.resolve("whatever", "node", "x", "testbed.protocols.echo.nodes.node:EchoNode") is EchoNode
    assert node_api.resolve("echo", "node", "echo") is EchoNode  # no node_class: testbed.protocols.<p>.nodes
    with pytest.raises(ValueError, match="expected 'module:Class'"):
        node_api.load_class("testbed.protocols.echo.nodes.node")
    with pytest.raises(TypeError, match="not a Node subclass"):
        node_api.load_class("testbed.nodes.runtime.api:Runtime")


def test_node_side_event_discovery_agrees_with_the_registry():
    """nodes/runtime/events.all_events finds the built-in events modules by the same convention."""
    assert E.builtin_event_modules() == sorted(p.events for p in P.registry() if p.events)
    declared = P.all_events()
    for p in P.registry():
        if p.events:
            assert any(et.protocol == p.name for et in declared.values()), p.name
    assert {"node_start", "workload", "publish", "o_notify", "g_deliver", "echo_recv"} <= set(declared)


TOY_TOPOLOGY = """
version: 1
name: toy
protocol: zztoy
duration: 2s
sites: {s1: {}}
nodes:
  n1: {role: echo, site: s1}
"""


def test_a_declared_protocol_validates_but_up_refuses_it_before_starting_anything(toy, tmp_path):
    from testbed import api

    toy("zztoy", [("zztoy", "zztoy")], runnable=False)
    p = P.get("zztoy")
    assert not p.runnable and p.missing() == [] and p.checks() == []
    topo = tmp_path / "toy.yaml"
    topo.write_text(TOY_TOPOLOGY)
    assert "protocol zztoy" in api.validate(str(topo))
    runs = tmp_path / "runs"
    with pytest.raises(P.ProtocolError, match="protocol 'zztoy' has no node implementation yet"):
        api.up(str(topo), runs_dir=str(runs), schedule=False)
    (run,) = [d for d in runs.iterdir() if d.is_dir() and d.name.startswith("toy-")]
    assert not list((run / "logs").glob("*.jsonl"))  # no node was started
