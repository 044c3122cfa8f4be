"""Topology rules of ``echo``, the runtime's own test protocol (see protocols/__init__.py).

Every node is an :class:`testbed.protocols.echo.nodes.node.EchoNode`: during the workload it
sends numbered pings to ``targets`` (default: its neighbours) at ``rate_per_s``
each; with ``echo: true`` each ping is answered with a pong. Its parts are found
by convention like any protocol's (``protocols/echo/nodes/``, ``protocols/echo/analysis/``); nothing
central names it.
"""

from __future__ import annotations

from pydantic import Field, StrictBool, StrictInt

from testbed.topology.schema import Name, StrictModel


class Params(StrictModel):
    """Top-level ``params`` of an echo topology (the keys EchoNode reads)."""

    targets: list[Name] | None = None
    rate_per_s: float = Field(default=100.0, ge=0)  # 0 = as fast as possible
    size: StrictInt = Field(default=0, ge=0)
    echo: StrictBool = False
    log_each: StrictBool = True
    forward_to: Name | None = None


class Placement(StrictModel):
    """``placement`` of an echo topology (nothing to place)."""


class ClientParams(StrictModel):
    """A client group's ``params`` (none)."""


NODE_ROLES = {"echo"}
CLIENT_ROLES: set[str] = set()
ACYCLIC = None


def check(topology) -> list:
    """``targets`` and ``forward_to`` name nodes of the file."""
    problems = []
    p = topology.protocol_params
    for i, t in enumerate(p.targets or []):
        if t not in topology.nodes:
            problems.append(topology.problem(("params", "targets", i), f"no node named {t!r}"))
    if p.forward_to is not None and p.forward_to not in topology.nodes:
        problems.append(topology.problem(("params", "forward_to"), f"no node named {p.forward_to!r}"))
    return problems
