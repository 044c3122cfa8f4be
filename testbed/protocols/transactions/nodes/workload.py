"""What the transaction scenarios share (clients.py: Fig 1b; advpub.py): the client group a
node hosts, and the coordinator's workload start."""

from __future__ import annotations

from typing import Any


def begin_workload(node: Any, t0_wall_ns: int, duration_s: float) -> None:
    """A coordinator node's workload start (the scenarios of this package): ``_begin_all`` at
    ``t0``; no transaction begins later than ``timeout`` before the end, so every begun one ends
    in the run."""
    node._running = True
    delay = max(0.0, (t0_wall_ns - node.rt.wall_ns()) / 1e9)
    node._last_begin_ns = node.rt.mono_ns() + int((delay + duration_s - node.timeout) * 1e9)
    node.rt.call_later(delay, node._begin_all)


def client_group(node: Any, roles: tuple[str, ...], scenario: str) -> tuple[str, str, list[str], dict[str, str]]:
    """The client group ``node`` hosts: (group name, role, its logical clients ``<group>-<i>``,
    {client: its broker}, the attach list taken round-robin). A bad role or an empty attach
    list is a ValueError naming the group."""
    g = node.config.get("clients") or {}
    group: str = g.get("name") or node.name
    role: str = g.get("role", "")
    if role not in roles:
        raise ValueError(f"clients {group}: in scenario {scenario} the role is one of {roles}, not {role!r}")
    count = int(g.get("count") or 0)
    attach = list(g.get("attach") or [])
    if count > 0 and not attach:
        raise ValueError(f"clients {group}: attach names no broker")
    clients = [f"{group}-{i}" for i in range(count)]
    return group, role, clients, {c: attach[i % len(attach)] for i, c in enumerate(clients)}
