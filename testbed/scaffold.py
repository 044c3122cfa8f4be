"""``testbed protocol new NAME``: the skeleton of a protocol package, ready to run.

A protocol is one package (see :mod:`testbed.registry`). The skeleton is the smallest complete
one: a topology module, a node (sends numbered ``hello`` messages to its neighbours at a rate and
logs what it sends and receives), its events, one history check (every ``hello`` received was
sent, once), a smoke topology and a test. It validates, runs and is checked as written; the
registry test accepts it. Two places:

* built-in (default, in a source checkout): ``testbed/protocols/<name>/`` and the test
  ``tests/unit/protocols/test_<name>_skeleton.py``;
* ``--external DIR``: a distribution of its own in ``DIR`` (``pyproject.toml`` declaring the
  ``testbed.protocols`` entry point, the package ``DIR/<name>/``, ``DIR/tests/``), installed
  with ``pip install -e DIR``.

Nothing is overwritten: an existing target is an error.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import UsageError

NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True)
class Written:
    package_dir: Path
    files: list[Path]
    how_to_run: str


def check_name(name: str) -> None:
    if not NAME_RE.fullmatch(name) or keyword.iskeyword(name):
        raise UsageError(f"protocol name {name!r}: a lower-case Python identifier "
                         f"(letters, digits, _; starting with a letter; at most 40 characters)")
    from testbed import registry

    try:
        known = registry.names()
    except registry.ProtocolError:
        known = registry.builtin_names()
    if name in known:
        raise UsageError(f"protocol {name!r} already exists (have: {', '.join(known)})")


def files_for(name: str, module: str) -> dict[str, str]:
    """The package's files (path inside the package -> text); ``module`` is its import name."""
    ev = name  # the events' namespace
    return {
        "__init__.py": f'''"""The {name} protocol (a skeleton made by ``testbed protocol new``: change what it does).

Its parts (found by :mod:`testbed.registry`): ``topology``, ``nodes`` (+ ``nodes.events``),
``analysis``, ``topologies/``. Import nothing here: node processes pass through this package
with the standard library and msgpack only.
"""
''',
        "topology.py": f'''"""Topology keys of ``{name}``: what a topology file may say under ``params``, ``placement`` and a
client group's ``params`` (see :mod:`testbed.topology.protocols` for every hook a module may define)."""

from __future__ import annotations

from pydantic import Field

from testbed.topology.schema import StrictModel


class Params(StrictModel):
    """Top-level ``params``: what every node reads from its config."""

    rate_per_s: float = Field(default=10.0, gt=0)  # hello messages per second to each neighbour


class Placement(StrictModel):
    """``placement`` (nothing to place)."""


class ClientParams(StrictModel):
    """A client group's ``params`` (none: this skeleton has no client processes)."""


NODE_ROLES = {{"node"}}
CLIENT_ROLES: set[str] = set()
ACYCLIC = None
''',
        "nodes/__init__.py": f'''"""The node side of ``{name}``: standard library + msgpack only (shipped to hosts).

``NODE_CLASSES`` maps (kind, role or "*") to the "module:Class" a process runs.
"""

NODE_CLASSES = {{
    ("node", "*"): "{module}.nodes.node:HelloNode",
}}
''',
        "nodes/events.py": f'''"""Events of ``{name}``, declared once: the Spark ingest builds its schemas from these."""

from testbed.nodes.runtime.events import declare

P = "{name}"
declare("{ev}_send", P, "A node sent a hello (t = the send call).", dst="str", seq="int")
declare("{ev}_recv", P, "A node received a hello.", src="str", seq="int")
''',
        "nodes/node.py": f'''"""A node that says hello: numbered messages to each neighbour at ``rate_per_s`` during the
workload, each send and receipt logged."""

from __future__ import annotations

import asyncio
from typing import Any

from {module}.nodes import events as _events  # noqa: F401  (declares the events)
from testbed.nodes.runtime.api import Node


class HelloNode(Node):
    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        params = self.config.get("params") or {{}}
        self.rate = float(params.get("rate_per_s", 10.0))
        self.neighbors: list[str] = list(self.config.get("neighbors") or [])
        self.seq = 0
        self.received = 0
        self._task: asyncio.Task | None = None

    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        if msg.get("k") == "hello":
            self.received += 1
            self.rt.log("{ev}_recv", src=src, seq=int(msg["seq"]))

    async def start_workload(self, t0_wall_ns: int, duration_s: float) -> None:
        self._task = self.rt.spawn(self._run(duration_s))

    async def _run(self, duration_s: float) -> None:
        loop = self.rt.loop
        start = loop.time()
        while loop.time() - start < duration_s:
            self.seq += 1
            for dst in self.neighbors:
                self.rt.log("{ev}_send", dst=dst, seq=self.seq)
                self.rt.send(dst, {{"k": "hello", "seq": self.seq}})
            await asyncio.sleep(1.0 / self.rate)

    async def stop_workload(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def status(self) -> dict[str, Any]:
        return {{"sent": self.seq, "received": self.received}}
''',
        "analysis/__init__.py": f'''"""Analysis of ``{name}``: its history checks (``checks.py``); figures (``figures.py``) and a
predictor (``predict.py``) may be added beside them."""
''',
        "analysis/checks.py": f'''"""History checks of ``{name}`` (on ``{ev}_send`` / ``{ev}_recv``).

``{ev}_no_phantom_or_duplicate``  every hello received was sent to that receiver, and received once.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from testbed.analysis.checks import CheckResult, summarize
from testbed.analysis.context import AnalysisContext


def check_received_once_and_sent(ctx: AnalysisContext) -> CheckResult:
    recv = ctx.df("{ev}_recv")
    sent = ctx.df("{ev}_send").select(F.col("node").alias("src"), F.col("dst").alias("node"), "seq")
    phantom = recv.join(sent, ["src", "node", "seq"], "left_anti").select(
        "node", "src", "seq", F.lit("never sent").alias("why"))
    dup = (recv.groupBy("node", "src", "seq").count().where(F.col("count") > 1)
           .select("node", "src", "seq", F.lit("received twice").alias("why")))
    return summarize("{ev}_no_phantom_or_duplicate", "every hello received was sent to it, and received once",
                     phantom.unionByName(dup), order=["node", "src", "seq"])


CHECKS = [check_received_once_and_sent]
''',
        "topologies/smoke.yaml": f'''# {name}: three nodes in a line say hello to their neighbours for 3 s.
#   testbed run topologies/{name}/smoke.yaml       (a built-in protocol, in a checkout)
version: 1
name: {name.replace("_", "-")}-smoke
protocol: {name}
duration: 3s
seed: 1

sites:
  s1: {{}}

nodes:
  n1: {{role: node, site: s1}}
  n2: {{role: node, site: s1, neighbors: [n1]}}
  n3: {{role: node, site: s1, neighbors: [n2]}}

params:
  rate_per_s: 20

links:
  default: {{delay: 2ms}}
''',
    }


def test_for(name: str, module: str) -> str:
    return f'''"""The {name} protocol's skeleton test: registered and complete, its smoke topology validates,
and its check fails on a history where a hello is received twice (a check that cannot fail
checks nothing)."""

from pathlib import Path

import pytest

import {module}

SMOKE = Path({module}.__file__).parent / "topologies" / "smoke.yaml"


def test_registered_and_complete():
    from testbed import registry

    registry.reset()
    p = registry.get("{name}")
    assert p.runnable and p.missing() == []
    assert registry.checks_for("{name}")


def test_smoke_topology_validates():
    from testbed import api

    [plan] = api.plans(str(SMOKE))
    assert plan.protocol == "{name}" and len(plan.nodes) == 3


@pytest.fixture(scope="module")
def spark():
    from testbed.analysis.session import spark_session

    return spark_session(app="{name}-skeleton-test")  # the worker's session if it has one; not stopped


@pytest.mark.spark
def test_check_fails_on_a_duplicate(spark):
    from {module}.analysis.checks import check_received_once_and_sent

    class Ctx:
        def df(self, ev):
            rows = {{"{name}_send": [("n1", "n2", 1)], "{name}_recv": [("n2", "n1", 1), ("n2", "n1", 1)]}}[ev]
            cols = ["node", "dst", "seq"] if ev.endswith("_send") else ["node", "src", "seq"]
            return spark.createDataFrame(rows, cols)

    assert not check_received_once_and_sent(Ctx()).passed
'''


def _write(root: Path, files: dict[str, str]) -> list[Path]:
    out = []
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        out.append(p)
    return out


def new_builtin(name: str, checkout: Path | None = None) -> Written:
    """The skeleton as a built-in protocol of the source checkout ``checkout`` (default: the one
    this ``testbed`` runs from)."""
    check_name(name)
    root = checkout or Path(__file__).resolve().parents[1]
    pkgs = root / "testbed" / "protocols"
    if not pkgs.is_dir() or not (root / "pyproject.toml").is_file():
        raise UsageError(f"{root} is not a testbed source checkout (no testbed/protocols/ beside a "
                         f"pyproject.toml): use --external DIR for a protocol package of its own")
    dest = pkgs / name
    test = root / "tests" / "unit" / "protocols" / f"test_{name}_skeleton.py"
    for p in (dest, test):
        if p.exists():
            raise UsageError(f"{p} exists already (nothing was written)")
    module = f"testbed.protocols.{name}"
    files = _write(dest, files_for(name, module))
    test.parent.mkdir(parents=True, exist_ok=True)
    test.write_text(test_for(name, module))
    return Written(dest, files + [test], f"testbed run {dest.relative_to(root) / 'topologies' / 'smoke.yaml'}")


def new_external(name: str, where: Path) -> Written:
    """The skeleton as a distribution of its own in ``where`` (created; must not hold one already)."""
    check_name(name)
    dest = where / name
    for p in (dest, where / "pyproject.toml"):
        if p.exists():
            raise UsageError(f"{p} exists already (nothing was written)")
    files = _write(dest, files_for(name, name))
    (where / "pyproject.toml").write_text(f'''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{name.replace("_", "-")}"
version = "0.1.0"
description = "The {name} protocol for testbed"
requires-python = ">=3.11"
dependencies = ["testbed", "msgpack>=1.0"]

[project.entry-points."testbed.protocols"]
{name} = "{name}"

[tool.setuptools.packages.find]
include = ["{name}*"]

[tool.setuptools.package-data]
"{name}" = ["topologies/*"]
''')
    tests = where / "tests" / f"test_{name}.py"
    tests.parent.mkdir(parents=True, exist_ok=True)
    tests.write_text(test_for(name, name).replace("@pytest.mark.spark\n", ""))
    return Written(dest, files + [where / "pyproject.toml", tests],
                   f"pip install -e {where} && testbed run {dest / 'topologies' / 'smoke.yaml'}")


__all__ = ["Written", "check_name", "files_for", "new_builtin", "new_external", "test_for"]
