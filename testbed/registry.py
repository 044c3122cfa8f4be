"""The protocol registry (controller side): which protocols exist, and where their parts are.

A protocol is one package. The built-in ones are ``testbed/protocols/<p>/``; a
researcher's own is a package of its own distribution. Both have the same shape
and are described by the same function (:func:`describe`), so there is one way a
protocol is found and its parts looked up:

=============  ==========================  =====================================================
part           module (under the package)  what it holds
=============  ==========================  =====================================================
topology       ``<pkg>.topology``          ``Params``, ``Placement``, ``ClientParams``,
                                           ``NODE_ROLES``, ``CLIENT_ROLES``, ``ACYCLIC``, optional
                                           ``check``, ``BUILDS_ON``, ``SCHEDULE``, ``graph_hooks``
                                           (see :mod:`testbed.topology.protocols`)
nodes          ``<pkg>.nodes``             ``NODE_CLASSES = {(kind, role|"*"): "module:Class"}``;
                                           stdlib + msgpack only (shipped to hosts)
events         ``<pkg>.nodes.events``      every event declared once with ``events.declare``
analysis       ``<pkg>.analysis``          ``checks.py``: ``CHECKS = [check, ...]``; optional
                                           ``figures.py`` (``FIGURES``), ``predict.py``,
                                           ``batch.py`` (``BATCH_PART``: checks batched over runs)
experiments    ``<pkg>.experiments``       optional: the paper's figures and claims (``PAPER``)
topologies     ``<pkg>/topologies/``       optional: the paper's topology files and templates
=============  ==========================  =====================================================

A package may name a part's module itself with the upper-case attribute
``TOPOLOGY``, ``NODES``, ``EVENTS``, ``ANALYSIS``, ``EXPERIMENTS`` (a string); a
part it does not name is looked up by the convention above.

Where protocols come from:

* built-in: every package ``testbed/protocols/<p>/`` (``<p>`` a Python identifier not starting
  with ``_``); its name is the folder's;
* external: the entry-point group ``testbed.protocols``, as pytest finds plugins::

    [project.entry-points."testbed.protocols"]
    myproto = "myproto"          # the protocol's name = the entry point's name

A protocol is registered when it has a topology module (so a topology file
naming it validates). Without a ``nodes`` part it is *declared, not runnable*:
it validates, and ``testbed up``/``run`` refuse it with a clear error. Once it
has a ``nodes`` part it must have every other part but ``experiments``
(``tests/unit/protocols`` asserts this for every registered protocol).
Loading a protocol's package must be cheap (strings, no Spark): node processes
import ``<pkg>/__init__.py`` on their way to ``<pkg>.nodes``. Node processes never
import this module: the node's class is rendered into its config
(``node_class``, "module:Class").

The registry is built once per process (:func:`registry`); :func:`reset`
forgets it (tests that install a protocol at run time).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from testbed.errors import TestbedError

ENTRY_POINT_GROUP = "testbed.protocols"
PARTS = ("topology", "nodes", "events", "analysis", "experiments")
REQUIRED_WHEN_RUNNABLE = ("nodes", "events", "analysis")
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_ROOT = Path(__file__).resolve().parent
BUILTIN_PACKAGE = "testbed.protocols"
BUILTIN_DIR = _ROOT / "protocols"


class ProtocolError(TestbedError):
    """A protocol is unknown, incomplete, or its entry point is broken."""


@dataclass(frozen=True)
class Protocol:
    """Where one protocol's parts live (module names; None = the part does not exist)."""

    name: str
    topology: str
    nodes: str | None = None
    events: str | None = None
    analysis: str | None = None
    experiments: str | None = None
    source: str = "builtin"
    package: str | None = None  # the protocol's package (None: an entry point naming a plain module)

    # -- parts ------------------------------------------------------------------------
    def topology_module(self) -> ModuleType:
        return importlib.import_module(self.topology)

    @property
    def builds_on(self) -> tuple[str, ...]:
        """The protocols whose nodes this one's reuse (``BUILDS_ON`` of its topology module, e.g.
        the pub/sub core): their events appear in its runs too."""
        return tuple(getattr(self.topology_module(), "BUILDS_ON", ()) or ())

    @property
    def runnable(self) -> bool:
        return self.nodes is not None

    def missing(self) -> list[str]:
        """Required parts that are absent (empty for a complete or a declared-only protocol)."""
        if not self.runnable:
            return []
        out = [p for p in REQUIRED_WHEN_RUNNABLE if getattr(self, p) is None]
        if self.analysis is not None and not _exists(f"{self.analysis}.checks"):
            out.append("analysis.checks")
        return out

    def node_classes(self) -> dict[tuple[str, str], str]:
        """``NODE_CLASSES`` of the nodes part ({} for a protocol that cannot run yet)."""
        if self.nodes is None:
            return {}
        return dict(getattr(importlib.import_module(self.nodes), "NODE_CLASSES", {}))

    def node_class_path(self, kind: str, role: str) -> str:
        """The "module:Class" a process of ``kind``/``role`` runs; ProtocolError if none."""
        if self.nodes is None:
            raise ProtocolError(f"protocol {self.name!r} has no node implementation yet "
                                f"(expected {self._where('nodes')}); it validates but cannot run")
        table = self.node_classes()
        for key in ((kind, role), (kind, "*")):
            if key in table:
                return table[key]
        raise ProtocolError(f"protocol {self.name!r}: no node class for kind={kind} role={role} "
                            f"in {self.nodes}.NODE_CLASSES")

    def events_module(self) -> ModuleType | None:
        return importlib.import_module(self.events) if self.events else None

    def checks(self) -> list[Callable[..., Any]]:
        """``CHECKS`` of ``<analysis>.checks`` ([] when the protocol has none)."""
        mod = self._optional(f"{self.analysis}.checks") if self.analysis else None
        return list(getattr(mod, "CHECKS", []) or [])

    def figures(self) -> list[Callable[..., Any]]:
        """``FIGURES`` of ``<analysis>.figures`` ([] when the protocol draws none of its own)."""
        mod = self._optional(f"{self.analysis}.figures") if self.analysis else None
        return list(getattr(mod, "FIGURES", []) or [])

    def batch_part(self) -> Any:
        """``BATCH_PART`` of ``<analysis>.batch`` (optional): checks computed over many runs at once
        (a :class:`testbed.analysis.batch_checks.BatchPart`), or None."""
        mod = self._optional(f"{self.analysis}.batch") if self.analysis else None
        return getattr(mod, "BATCH_PART", None)

    def predictor(self) -> ModuleType | None:
        """``<analysis>.predict`` (optional): ``predict(plan) -> dict`` and ``format_prediction(d)``,
        what a plan alone says about a run, without running nodes (``testbed predict``)."""
        return self._optional(f"{self.analysis}.predict") if self.analysis else None

    def experiments_module(self) -> ModuleType | None:
        return self._optional(self.experiments) if self.experiments else None

    def topologies_dir(self) -> Path | None:
        """``<package>/topologies/`` when the protocol ships topology files (None otherwise)."""
        if self.package is None:
            return None
        spec = importlib.util.find_spec(self.package)
        locs = list(spec.submodule_search_locations or []) if spec is not None else []
        for loc in locs:
            d = Path(loc) / "topologies"
            if d.is_dir():
                return d
        return None

    # -- helpers ----------------------------------------------------------------------
    def _where(self, part: str) -> str:
        if self.source == "builtin":
            return {"nodes": f"testbed/protocols/{self.name}/nodes/__init__.py",
                    "events": f"testbed/protocols/{self.name}/nodes/events.py",
                    "analysis": f"testbed/protocols/{self.name}/analysis/checks.py"}.get(part, part)
        return f"the {part} part of {self.source}"

    @staticmethod
    def _optional(name: str) -> ModuleType | None:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
                return None
            raise


class Registry:
    """name -> :class:`Protocol`, built-ins first (sorted), then entry points (sorted)."""

    def __init__(self, protocols: dict[str, Protocol]) -> None:
        self._p = protocols

    def __contains__(self, name: object) -> bool:
        return name in self._p

    def __iter__(self):
        return iter(self._p.values())

    def __len__(self) -> int:
        return len(self._p)

    def names(self) -> list[str]:
        return list(self._p)

    def get(self, name: str) -> Protocol:
        try:
            return self._p[name]
        except KeyError:
            raise ProtocolError(f"unknown protocol {name!r}; one of: {', '.join(self._p)}") from None

    def find(self, name: str) -> Protocol | None:
        return self._p.get(name)


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ModuleNotFoundError, ValueError):
        return False


def builtin_names() -> list[str]:
    """Every package ``testbed/protocols/<p>/`` (names starting with ``_`` excluded)."""
    return sorted(m.name for m in pkgutil.iter_modules([str(BUILTIN_DIR)])
                  if m.ispkg and not m.name.startswith("_") and NAME_RE.fullmatch(m.name))


def _builtin(name: str) -> Protocol:
    """A built-in protocol: its package described as an entry point's would be."""
    try:
        mod = importlib.import_module(f"{BUILTIN_PACKAGE}.{name}")
    except Exception as e:  # noqa: BLE001 -- say which protocol is broken
        raise ProtocolError(f"built-in protocol {name!r}: cannot import {BUILTIN_PACKAGE}.{name}: "
                            f"{type(e).__name__}: {e}") from e
    return describe(name, mod, "builtin")


def describe(name: str, obj: Any, source: str) -> Protocol:
    """The Protocol a package (built-in, or an entry point's object) describes (see the module
    docstring): each part the module it names, else the convention under the package."""
    if not NAME_RE.fullmatch(name):
        raise ProtocolError(f"{source}: protocol name {name!r} must match {NAME_RE.pattern}")
    base = obj.__name__ if isinstance(obj, ModuleType) else getattr(obj, "__module__", None)
    is_pkg = isinstance(obj, ModuleType) and hasattr(obj, "__path__")

    def part(attr: str, default: str | None) -> str | None:
        given = getattr(obj, attr, None)
        if given is not None:
            if not isinstance(given, str) or not given:
                raise ProtocolError(f"{source}: {attr} must be a module name (a string), not {given!r}")
            if not _exists(given):
                raise ProtocolError(f"{source}: {attr} = {given!r} cannot be imported")
            return given
        return default if default is not None and _exists(default) else None

    pkg = base if is_pkg else None
    topology = part("TOPOLOGY", f"{pkg}.topology" if pkg else None)
    if topology is None:
        raise ProtocolError(f"{source}: protocol {name!r} has no topology module "
                            f"(set TOPOLOGY = 'module' or provide {pkg or base}.topology)")
    nodes = part("NODES", f"{pkg}.nodes" if pkg else None)
    return Protocol(
        name=name, topology=topology, nodes=nodes,
        events=part("EVENTS", f"{nodes}.events" if nodes else None),
        analysis=part("ANALYSIS", f"{pkg}.analysis" if pkg else None),
        experiments=part("EXPERIMENTS", f"{pkg}.experiments" if pkg else None),
        source=source, package=pkg,
    )


def _external(known: set[str]) -> dict[str, Protocol]:
    from importlib.metadata import entry_points

    out: dict[str, Protocol] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        source = f"entry point {ep.name} = {ep.value}" + (f" ({dist})" if dist else "")
        if ep.name in known or ep.name in out:
            if ep.name in out and out[ep.name].source == source:
                continue  # the same distribution seen twice on the path
            raise ProtocolError(f"{source}: protocol {ep.name!r} is already registered")
        try:
            obj = ep.load()
        except Exception as e:  # noqa: BLE001 -- say which plugin is broken
            raise ProtocolError(f"{source}: cannot load: {type(e).__name__}: {e}") from e
        out[ep.name] = describe(ep.name, obj, source)
    return out


_REGISTRY: Registry | None = None


def registry() -> Registry:
    """Every protocol: built-ins (by convention), then entry points. Built once per process."""
    global _REGISTRY
    if _REGISTRY is None:
        found = {n: _builtin(n) for n in builtin_names()}
        found.update(_external(set(found)))
        _REGISTRY = Registry(found)
    return _REGISTRY


def reset() -> None:
    """Forget the registry (it is rebuilt on next use)."""
    global _REGISTRY
    _REGISTRY = None
    importlib.invalidate_caches()


def names() -> list[str]:
    return registry().names()


def get(name: str) -> Protocol:
    return registry().get(name)


# -- what the other layers ask -------------------------------------------------------------
def node_class_path(protocol: str, kind: str, role: str) -> str:
    """For render: the "module:Class" a process runs (rendered into its config as ``node_class``)."""
    return get(protocol).node_class_path(kind, role)


def checks_for(protocol: str) -> list[Callable[..., Any]]:
    """The history checks of ``protocol`` ([] for a protocol not registered here)."""
    p = registry().find(protocol)
    return p.checks() if p is not None else []


def figures_for(protocol: str) -> list[Callable[..., Any]]:
    """The protocol's own figures ([] for a protocol not registered here)."""
    p = registry().find(protocol)
    return p.figures() if p is not None else []


def _module_dir(module: str) -> tuple[Path | None, Path | None]:
    """(the ``__init__.py`` or module file, the package directory or None) of ``module``."""
    spec = importlib.util.find_spec(module)
    if spec is None:
        return None, None
    origin = Path(spec.origin) if spec.origin and spec.origin not in ("namespace", "built-in") else None
    locs = list(spec.submodule_search_locations or [])
    return origin, (Path(locs[0]) if locs else None)


def _tree(module: str) -> list[tuple[Path, str]]:
    """Every file of ``module`` (a package: its whole folder; a module: its file) and the
    ``__init__.py`` of each package above it, as (file, path by the module's dotted name)."""
    out: list[tuple[Path, str]] = []
    parts = module.split(".")
    for i in range(1, len(parts)):
        origin, _ = _module_dir(".".join(parts[:i]))
        if origin is not None and origin.name == "__init__.py":
            out.append((origin, "/".join(parts[:i]) + "/__init__.py"))
    origin, folder = _module_dir(module)
    rel = "/".join(parts)
    if folder is not None:
        for f in sorted(folder.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".pyo"):
                out.append((f, f"{rel}/{f.relative_to(folder).as_posix()}"))
    elif origin is not None:
        out.append((origin, rel + ".py"))
    return out


def node_code_files() -> list[tuple[Path, str]]:
    """What a node process imports, as (file, path in a bundle) sorted by path: the node runtime
    (``testbed/__init__.py``, ``testbed/nodes/**``) and every registered protocol's ``nodes``
    part with the packages above it (an external protocol's too). The node image and the
    Ansible bundle ship exactly these (stdlib + msgpack code only, by the import contracts)."""
    files: dict[str, Path] = {}
    for module in ["testbed.nodes", *(p.nodes for p in registry() if p.nodes)]:
        for f, rel in _tree(module):
            files.setdefault(rel, f)
    return sorted(((f, rel) for rel, f in files.items()), key=lambda x: x[1])


def batch_parts() -> list[Any]:
    """Every registered protocol's batch part (see :meth:`Protocol.batch_part`), in registry order."""
    return [bp for p in registry() if (bp := p.batch_part()) is not None]


def run_event_protocols(protocol: str | None) -> set[str] | None:
    """The event namespaces a run of ``protocol`` logs: the runtime's, its own and what it
    builds on (None when unknown: every namespace)."""
    p = registry().find(protocol) if protocol else None
    if p is None:
        return None
    return {"runtime", p.name, *p.builds_on}


def all_events() -> dict[str, Any]:
    """Every declared event type: the runtime's and every registered protocol's events module."""
    from testbed.nodes.runtime import events as E

    for p in registry():
        if p.events is not None:
            importlib.import_module(p.events)
    return E.all_events()


def reproducible() -> list[str]:
    """Protocols with an experiments part (``<pkg>.experiments`` or the package's
    ``EXPERIMENTS``): what ``testbed reproduce`` can run. Names only, nothing imported."""
    try:
        reg = registry()
    except ProtocolError:  # a broken plugin must not break the command line's parser
        reg = Registry({n: _builtin(n) for n in builtin_names()})
    return [p.name for p in reg
            if p.experiments is not None]


__all__ = ["ENTRY_POINT_GROUP", "PARTS", "Protocol", "ProtocolError", "Registry", "all_events", "batch_parts",
           "builtin_names", "checks_for", "describe", "figures_for", "get", "names",
           "node_class_path", "node_code_files", "registry", "reproducible", "reset", "run_event_protocols"]
