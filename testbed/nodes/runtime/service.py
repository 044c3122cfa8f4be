"""A node's per-message service time: the cost of handling a message that the paper's brokers had
and ours lack (docs/topology.md, *Service time*).

With ``service`` set, the messages a node receives from other processes wait in one FIFO queue
and are handled one at a time; each holds the node for a time drawn from the configured
distribution (``exponential``: a memoryless server, M/M/1 when arrivals are Poisson; ``constant``)
with the configured mean. It is a delay model, not a CPU burn: the node's event loop stays free, so
its own timers, control requests and egress keep their timing; what it models is the queueing of
messages in front of a broker whose per-message work is slow. Messages a node sends itself are
not queued. Stdlib only (shipped to hosts).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, Callable

DISTRIBUTIONS = ("exponential", "constant")


def check(d: Any) -> str | None:
    """None when ``d`` is a valid service config (None or {"mean_s": > 0, "distribution": ...}), else why not."""
    if d is None:
        return None
    if not isinstance(d, dict) or set(d) - {"mean_s", "distribution"}:
        return "expected {mean_s: seconds, distribution: exponential|constant}"
    m = d.get("mean_s")
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 < m <= 10:
        return f"mean_s: expected seconds in (0, 10], got {m!r}"
    if d.get("distribution", "exponential") not in DISTRIBUTIONS:
        return f"distribution: expected one of {', '.join(DISTRIBUTIONS)}, got {d.get('distribution')!r}"
    return None


class ServiceQueue:
    """One server in front of ``handle(src, msg)`` (see the module doc). ``now()`` is the event loop's
    clock and ``call_at(when, fn)`` its timer; ``rng`` draws the service times."""

    def __init__(self, mean_s: float, distribution: str, rng: random.Random,
                 now: Callable[[], float], call_at: Callable[..., Any],
                 handle: Callable[[str, dict[str, Any]], None]) -> None:
        self.mean_s = float(mean_s)
        self.distribution = distribution
        self.rng = rng
        self.now = now
        self.call_at = call_at
        self.handle = handle
        self.busy_until = 0.0
        self.queue: deque[tuple[str, dict[str, Any]]] = deque()
        # since the last sample(): the longest queue, messages served, service time, waiting time
        self.max_queued = 0
        self.served = 0
        self.busy_s = 0.0
        self.wait_s = 0.0

    def draw(self) -> float:
        if self.distribution == "constant":
            return self.mean_s
        return self.rng.expovariate(1.0 / self.mean_s)

    def arrive(self, src: str, msg: dict[str, Any]) -> None:
        now = self.now()
        start = max(now, self.busy_until)
        s = self.draw()
        self.busy_until = start + s
        self.queue.append((src, msg))
        if len(self.queue) > self.max_queued:
            self.max_queued = len(self.queue)
        self.busy_s += s
        self.wait_s += start - now
        self.call_at(self.busy_until, self._done)

    def _done(self) -> None:
        src, msg = self.queue.popleft()
        self.served += 1
        self.handle(src, msg)

    def sample(self, interval_s: float) -> dict[str, Any]:
        """The ``service`` event's fields for the interval since the last sample (and reset)."""
        out = {"queued": len(self.queue), "max_queued": self.max_queued, "served": self.served,
               "busy": round(min(self.busy_s / interval_s, 1.0), 4) if interval_s > 0 else 0.0,
               "wait_ms": round(1000 * self.wait_s / self.served, 3) if self.served else 0.0}
        self.max_queued = len(self.queue)
        self.served = 0
        self.busy_s = 0.0
        self.wait_s = 0.0
        return out
