"""Userspace link emulation in the sender's egress queue, one link per destination.

A frame handed to :meth:`Egress.send` goes through, in order:

1. **up/down** -- the destination is down while *any* reason holds it down
   (``cut``, ``partition:<id>``, ``config`` for a spec with ``up: false``);
   a down link drops at egress (``drop`` reason ``link-down``). The check is
   made when the frame is sent: frames already in the delay line when a link
   goes down still arrive (as with an egress firewall rule in front of a netem
   qdisc).
2. **loss** -- Bernoulli: each frame is lost with probability ``loss``
   (reason ``loss``).
3. **rate** -- serialization delay ``size_bytes * 8 / rate_bps`` on a per-link
   departure clock: ``start = max(now, free_at)``, ``free_at = start + ser``.
4. **delay** -- ``due = free_at + d`` where ``d`` is drawn from the link's delay
   distribution (below), clamped at 0.
5. **FIFO** -- unless ``reorder``, ``due = max(due, last due on this link)``, so
   a frame never overtakes an earlier one (netem's tfifo would reorder on
   jitter; we keep FIFO unless asked, as the topology contract says).
6. **stall** -- while the node is stalled nothing is released; on unstall
   everything already due goes out at once in due order; a crash while
   stalled loses what is held (it is only in this process's memory).

Settings changed at run time (:meth:`Egress.set_link`) apply to frames sent
after the change; frames already queued keep their due time.

Delay distributions, as netem defines them. netem draws
``delay = mu + sigma * t`` where ``mu`` = delay, ``sigma`` = jitter and ``t``
comes from a table made by iproute2 (``netem/maketable.c``, ``pareto.c``,
``paretonormal.c``; entries are ``t * NETEM_DIST_SCALE`` (8192) in a signed
16-bit range, so ``|t| <= 32767/8192 ~= 4``) and looked up by a uniform random
index in the kernel's ``tabledist()`` (``net/sched/sch_netem.c``):

* ``constant`` (or jitter == 0): ``d = mu`` (tabledist returns mu when sigma is 0).
* ``uniform`` (no table): ``d ~ U[mu - sigma, mu + sigma)``.
* ``normal``: ``t = Phi^-1(u)``, the standard normal quantile, u ~ U(0,1)
  (clipped to +-4 like the table).
* ``pareto``: ``t = ((1 - u)^(-1/a) - 1.5) * 4/3`` with ``a = 3`` (a Pareto
  with x_m = 1, mean 1.5, variance 3/4, shifted to mean 0), capped at
  32767/8192. Its std is sqrt(3/4) * 4/3 ~= 1.155 before the cap, so "jitter"
  is not exactly the standard deviation for pareto (as in netem).
* ``paretonormal``: ``t = (Phi^-1(u) + 3 * pareto(u)) / 4`` -- the same u for
  both parts (paretonormal.c walks both tables with one index), i.e. a 1:3
  blend of the normal and pareto quantiles.

Negative draws are clamped to 0 (a frame cannot leave before it was sent).
In ``kernel`` emulation mode (tc netem applies delay/loss/rate) only up/down
and stall act here.

The timer: asyncio rounds epoll timeouts *up* to whole milliseconds, which
would make releases late by 0..1 ms. The node runs on a ``select()``-based
loop (microsecond timeouts, see ``node_main``) and the release timer fires at
``due - early``, releasing every frame with ``due <= now + early``; the
scheduling error (release - due) is recorded per link in a histogram and
reported by the ``status`` control op. With the millisecond-granularity
fallback (epoll, many peers) ``early`` is half a millisecond.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, fields, replace
from typing import Any, Callable

DISTRIBUTIONS = ("constant", "uniform", "normal", "pareto", "paretonormal")
NETEM_DIST_SCALE = 8192
TABLE_MAX = 32767 / NETEM_DIST_SCALE  # ~4.0: the signed 16-bit table range
PARETO_A = 3.0


@dataclass(frozen=True)
class LinkSpec:
    """Egress emulation of one link (the node-side twin of the Plan's LinkSpec)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    distribution: str = "normal"
    loss: float = 0.0
    rate_bps: int | None = None
    reorder: bool = False
    up: bool = True

    @classmethod
    def from_dict(cls, d: dict[str, Any], base: "LinkSpec | None" = None) -> "LinkSpec":
        """Validate ``d`` and merge it over ``base`` (keys absent from ``d`` keep base's values)."""
        if not isinstance(d, dict):
            raise ValueError(f"link spec must be a map, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"link spec: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        vals: dict[str, Any] = {}
        for k, v in d.items():
            if k in ("delay_ms", "jitter_ms", "loss"):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                    raise ValueError(f"link spec: {k} must be a number >= 0, got {v!r}")
                if k == "loss" and v > 1:
                    raise ValueError(f"link spec: loss is a fraction 0..1, got {v!r}")
                v = float(v)
            elif k == "rate_bps":
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0):
                    raise ValueError(f"link spec: rate_bps must be a number > 0 or null, got {v!r}")
            elif k == "distribution":
                if v not in DISTRIBUTIONS:
                    raise ValueError(f"link spec: distribution must be one of {', '.join(DISTRIBUTIONS)}, got {v!r}")
            elif k in ("reorder", "up"):
                if not isinstance(v, bool):
                    raise ValueError(f"link spec: {k} must be true or false, got {v!r}")
            vals[k] = v
        return replace(base or cls(), **vals)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# --- pure sampling ------------------------------------------------------------------

_inv_cdf: Callable[[float], float] | None = None


def normal_quantile(u: float) -> float:
    """Phi^-1(u) for 0 < u < 1 (statistics.NormalDist, imported lazily)."""
    global _inv_cdf
    if _inv_cdf is None:
        from statistics import NormalDist

        _inv_cdf = NormalDist().inv_cdf
    return _inv_cdf(u)


def pareto_t(u: float) -> float:
    """netem's pareto table value at quantile u (iproute2 netem/pareto.c), in units of sigma."""
    x = ((1.0 - u) ** (-1.0 / PARETO_A) - 1.5) * (4.0 / 3.0)
    return x if x < TABLE_MAX else TABLE_MAX


def dist_t(distribution: str, u: float) -> float:
    """The table value ``t`` of ``distribution`` at quantile ``u`` (0 < u < 1)."""
    if distribution == "normal":
        t = normal_quantile(u)
        return max(-TABLE_MAX, min(TABLE_MAX, t))
    if distribution == "pareto":
        return pareto_t(u)
    if distribution == "paretonormal":
        n = max(-TABLE_MAX, min(TABLE_MAX, normal_quantile(u)))
        return (n + 3.0 * pareto_t(u)) / 4.0
    if distribution == "uniform":
        return 2.0 * u - 1.0
    if distribution == "constant":
        return 0.0
    raise ValueError(f"unknown delay distribution {distribution!r}")


def sample_delay_s(spec: LinkSpec, rng: random.Random) -> float:
    """One delay draw in seconds (>= 0) for ``spec``."""
    mu = spec.delay_ms
    sigma = spec.jitter_ms
    if sigma <= 0.0 or spec.distribution == "constant":
        return mu / 1000.0
    u = rng.random()
    while u <= 0.0:  # random() is in [0, 1); the quantiles need (0, 1)
        u = rng.random()
    if spec.distribution == "normal":
        t = rng.gauss(0.0, 1.0)  # same law as Phi^-1(u), cheaper
        t = -TABLE_MAX if t < -TABLE_MAX else (TABLE_MAX if t > TABLE_MAX else t)
    else:
        t = dist_t(spec.distribution, u)
    d = mu + sigma * t
    return d / 1000.0 if d > 0.0 else 0.0


class LinkState:
    """The pure per-link decisions: loss, departure clock, delay, FIFO. Time in seconds.

    ``plain`` is true while the spec emulates nothing (no loss, rate, delay or jitter, or
    ``userspace`` off): then :meth:`admit` hands out ``max(now, last_due)`` and draws nothing,
    which lets :meth:`Egress.send` pass a frame on without calling it."""

    __slots__ = ("peer", "_spec", "userspace", "free_at", "last_due", "plain")

    def __init__(self, peer: str, spec: LinkSpec, userspace: bool = True) -> None:
        self.peer = peer
        self.userspace = userspace
        self.spec = spec
        self.free_at = 0.0  # departure clock: when the emulated wire is free again
        self.last_due = 0.0  # the latest due time handed out (FIFO floor)

    @property
    def spec(self) -> LinkSpec:
        return self._spec

    @spec.setter
    def spec(self, spec: LinkSpec) -> None:
        self._spec = spec
        self.plain = not self.userspace or (spec.loss <= 0.0 and not spec.rate_bps
                                            and spec.delay_ms <= 0.0 and spec.jitter_ms <= 0.0)

    def admit(self, now: float, size: int, rng: random.Random) -> float | None:
        """The due time of a frame of ``size`` bytes sent at ``now``, or None if it is lost."""
        spec = self._spec
        if not self.userspace:
            due = now
        else:
            if spec.loss > 0.0 and rng.random() < spec.loss:
                return None
            if spec.rate_bps:
                start = now if now > self.free_at else self.free_at
                self.free_at = start + size * 8.0 / spec.rate_bps
                due = self.free_at
            else:
                due = now
            if spec.delay_ms > 0.0 or spec.jitter_ms > 0.0:
                due += sample_delay_s(spec, rng)
        if not spec.reorder and due < self.last_due:
            due = self.last_due
        if due > self.last_due:
            self.last_due = due
        return due


class DownReasons:
    """Per-peer set of reasons holding a link down; a peer is down while any reason holds."""

    def __init__(self) -> None:
        self._by_peer: dict[str, set[str]] = {}

    def is_down(self, peer: str) -> bool:
        return bool(self._by_peer.get(peer))

    def add(self, peer: str, reason: str) -> bool:
        """Hold ``peer`` down for ``reason``. True if the peer went from up to down."""
        s = self._by_peer.setdefault(peer, set())
        was_up = not s
        s.add(reason)
        return was_up

    def remove(self, peer: str, reason: str) -> bool:
        """Release ``reason`` on ``peer``. True if the peer went from down to up."""
        s = self._by_peer.get(peer)
        if not s or reason not in s:
            return False
        s.discard(reason)
        if not s:
            del self._by_peer[peer]
            return True
        return False

    def remove_everywhere(self, reason: str) -> list[str]:
        """Release ``reason`` on every peer holding it; the peers that came back up."""
        came_up = []
        for peer in [p for p, s in self._by_peer.items() if reason in s]:
            if self.remove(peer, reason):
                came_up.append(peer)
        return came_up

    def peers_with(self, reason: str) -> list[str]:
        return sorted(p for p, s in self._by_peer.items() if reason in s)

    def snapshot(self) -> dict[str, list[str]]:
        return {p: sorted(s) for p, s in sorted(self._by_peer.items())}


class ErrorHistogram:
    """Scheduling error (release - due) in 10 us bins from -2 ms to +50 ms (overflow clamps)."""

    BIN_US = 10
    LO_US = -2000
    HI_US = 50000
    ZERO_BIN = (0 - LO_US) // BIN_US  # where an error of exactly 0 falls

    def __init__(self) -> None:
        self.counts = [0] * ((self.HI_US - self.LO_US) // self.BIN_US + 1)
        self.n = 0
        self.max_us = -math.inf
        self.sum_us = 0.0

    def add(self, err_s: float) -> None:
        us = err_s * 1e6
        i = int((us - self.LO_US) // self.BIN_US)
        if i < 0:
            i = 0
        elif i >= len(self.counts):
            i = len(self.counts) - 1
        self.counts[i] += 1
        self.n += 1
        self.sum_us += us
        if us > self.max_us:
            self.max_us = us

    def add_zero(self) -> None:
        """``add(0.0)``, cheaper: a frame released exactly when due (a link that emulates nothing)."""
        self.counts[self.ZERO_BIN] += 1
        self.n += 1
        if self.max_us < 0.0:
            self.max_us = 0.0

    def merge(self, other: "ErrorHistogram") -> None:
        for i, c in enumerate(other.counts):
            if c:
                self.counts[i] += c
        self.n += other.n
        self.sum_us += other.sum_us
        self.max_us = max(self.max_us, other.max_us)

    def percentile_us(self, p: float) -> float | None:
        """The upper edge of the bin holding the p-th percentile (p in 0..100)."""
        if not self.n:
            return None
        rank = max(1, math.ceil(self.n * p / 100.0))
        acc = 0
        for i, c in enumerate(self.counts):
            acc += c
            if acc >= rank:
                return float(self.LO_US + (i + 1) * self.BIN_US)
        return float(self.HI_US)

    def summary(self) -> dict[str, Any]:
        if not self.n:
            return {"n": 0}
        return {"n": self.n, "mean_us": round(self.sum_us / self.n, 1), "p50_us": self.percentile_us(50),
                "p99_us": self.percentile_us(99), "max_us": round(self.max_us, 1)}


# --- the asyncio part ---------------------------------------------------------------------

class _Link:
    __slots__ = ("state", "heap", "seq", "timer", "timer_when", "hist")

    def __init__(self, state: LinkState) -> None:
        self.state = state
        self.heap: list[tuple[float, int, bytes]] = []
        self.seq = 0
        self.timer: Any = None
        self.timer_when = math.inf
        self.hist = ErrorHistogram()


class Egress:
    """Every destination's emulated egress link, the down-reason sets and the stall switch.

    ``deliver(peer, frames)`` hands released frames (in order) to the transport;
    ``on_drop(peer, reason, count)`` reports frames dropped here.
    """

    def __init__(self, loop: Any, rng: random.Random, deliver: Callable[[str, list[bytes]], None],
                 on_drop: Callable[[str, str, int], None], *, userspace: bool = True,
                 early_s: float = 0.0001) -> None:
        self.loop = loop
        self.rng = rng
        self.deliver = deliver
        self.on_drop = on_drop
        self.userspace = userspace
        self.early_s = early_s
        self.links: dict[str, _Link] = {}
        self.down = DownReasons()
        self.stalled = False

    def link(self, peer: str) -> _Link:
        ln = self.links.get(peer)
        if ln is None:
            ln = self.links[peer] = _Link(LinkState(peer, LinkSpec(), self.userspace))
        return ln

    def set_link(self, peer: str, spec: LinkSpec) -> None:
        self.link(peer).state.spec = spec
        if spec.up:
            self.down.remove(peer, "config")
        else:
            self.down.add(peer, "config")

    def spec(self, peer: str) -> LinkSpec:
        return self.link(peer).state.spec

    # the hot path
    def send(self, peer: str, frame: bytes) -> None:
        if self.down.is_down(peer):
            self.on_drop(peer, "link-down", 1)
            return
        ln = self.links.get(peer) or self.link(peer)
        now = self.loop.time()
        st = ln.state
        if st.plain and now >= st.last_due and not ln.heap and not self.stalled:
            # what admit would do (due = now, nothing drawn) and release at once with error 0
            st.last_due = now
            ln.hist.add_zero()
            self.deliver(peer, [frame])
            return
        due = st.admit(now, len(frame), self.rng)
        if due is None:
            self.on_drop(peer, "loss", 1)
            return
        if not ln.heap and not self.stalled and due <= now + self.early_s:
            ln.hist.add(now - due)
            self.deliver(peer, [frame])
            return
        ln.seq += 1
        heapq.heappush(ln.heap, (due, ln.seq, frame))
        if not self.stalled and due < ln.timer_when:
            self._arm(peer, ln, due)

    def _arm(self, peer: str, ln: _Link, due: float) -> None:
        if ln.timer is not None:
            ln.timer.cancel()
        ln.timer_when = due
        ln.timer = self.loop.call_at(due - self.early_s, self._fire, peer, ln)

    def _fire(self, peer: str, ln: _Link) -> None:
        ln.timer = None
        ln.timer_when = math.inf
        if self.stalled:
            return
        self._release(peer, ln, self.loop.time())

    def _release(self, peer: str, ln: _Link, now: float) -> None:
        heap = ln.heap
        limit = now + self.early_s
        out = []
        add = ln.hist.add
        pop = heapq.heappop
        while heap and heap[0][0] <= limit:
            due, _, frame = pop(heap)
            add(now - due)
            out.append(frame)
        if out:
            self.deliver(peer, out)
        if heap:
            self._arm(peer, ln, heap[0][0])

    # stall
    def held(self) -> int:
        return sum(len(ln.heap) for ln in self.links.values())

    def stall(self) -> int:
        """Hold all egress; returns the number of frames queued now."""
        self.stalled = True
        for ln in self.links.values():
            if ln.timer is not None:
                ln.timer.cancel()
                ln.timer = None
                ln.timer_when = math.inf
        return self.held()

    def unstall(self) -> int:
        """Release what is due (in due order) and resume; returns the number held at unstall."""
        held = self.held()
        self.stalled = False
        now = self.loop.time()
        for peer, ln in self.links.items():
            self._release(peer, ln, now)
        return held

    def sched_summary(self) -> dict[str, Any]:
        total = ErrorHistogram()
        per = {}
        for peer, ln in self.links.items():
            if ln.hist.n:
                per[peer] = ln.hist.summary()
                total.merge(ln.hist)
        return {"all": total.summary(), "links": per}

    def close(self) -> int:
        """Cancel timers; returns the number of frames still held (lost)."""
        held = self.held()
        for ln in self.links.values():
            if ln.timer is not None:
                ln.timer.cancel()
                ln.timer = None
            ln.heap.clear()
        return held
