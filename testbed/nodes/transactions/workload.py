"""What the transaction scenarios' coordinators share (clients.py: Fig 1b; advpub.py)."""

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
