"""Knowledge and curiosity streams (Bhola et al., Sec 2-3). Pure, stdlib only.

Ticks are integer milliseconds of wall-clock time at the pubend (a nack range
in ticks is a duration in ms, as the paper measures it). Per tick:

* knowledge: Q (unknown) | D (data, payload known) | F (final: silence, a
  filtered D, or a D no longer needed). A stream stores its non-Q ticks as an
  :class:`IntervalSet` ``known`` plus the D ticks' payloads.
* curiosity: N (default) | C (nacked, a downstream needs it) | A (acked).
  The A ticks are always a prefix ``[0, acked)`` (acks carry one timestamp);
  any tick below it is F/A and its payload is forgotten.

Knowledge messages on the wire: ``{"k": "km", "pe": P, "f": [[a, b], ...],
"d": [[tick, msg], ...], "rt": bool}`` -- F intervals (the "past" prefix and
the silence around a D) and D ticks. First-time messages (rt false) and
retransmissions (rt true) are treated as Sec 3.1 says (see :func:`project`).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Any, Callable

from testbed.protocols.gryphon.nodes.ticks import IntervalSet, chop

Interval = tuple[int, int]
DTick = tuple[int, dict[str, Any]]


class KnowledgeStream:
    """The knowledge + A-prefix of one stream (an istream, a subend's stream, a pubend's)."""

    __slots__ = ("known", "data", "dticks", "acked")

    def __init__(self) -> None:
        self.known = IntervalSet()
        self.data: dict[int, dict[str, Any]] = {}
        self.dticks: list[int] = []  # sorted D ticks whose payload is held
        self.acked = 0

    def is_q(self, t: int) -> bool:
        return t >= self.acked and not self.known.contains(t)

    def accumulate(self, f: list[Interval], d: list[DTick]) -> tuple[list[Interval], list[DTick]]:
        """Least upper bound with new knowledge; returns (new F intervals, new D ticks)."""
        new_d: list[DTick] = []
        for t, m in d:
            if t < self.acked or self.known.contains(t):
                continue
            self.known.add(t, t + 1)
            self.data[t] = m
            if not self.dticks or t > self.dticks[-1]:
                self.dticks.append(t)
            else:
                insort(self.dticks, t)
            new_d.append((t, m))
        new_f: list[Interval] = []
        for a, b in f:
            a = max(a, self.acked)
            if a < b:
                new_f.extend(self.known.add(a, b))
        return new_f, new_d

    def d_in(self, a: int, b: int) -> list[int]:
        i = bisect_left(self.dticks, a)
        j = bisect_left(self.dticks, b)
        return self.dticks[i:j]

    def lookup(self, a: int, b: int) -> tuple[list[Interval], list[DTick], list[Interval]]:
        """Split [a, b) into (F intervals, D ticks, Q intervals) by this stream's knowledge."""
        f: list[Interval] = []
        q: list[Interval] = []
        if a < self.acked:
            f.append((a, min(b, self.acked)))
            a = min(b, self.acked)
        if a >= b:
            return f, [], q
        dts = self.d_in(a, b)
        d = [(t, self.data[t]) for t in dts]
        for x, y in self.known.intersect(a, b):
            cur = x
            for t in (t for t in dts if x <= t < y):
                if t > cur:
                    f.append((cur, t))
                cur = t + 1
            if cur < y:
                f.append((cur, y))
        q = self.known.gaps(a, b)
        return f, d, q

    def ack(self, t: int) -> bool:
        """Advance the A prefix to ``t``: ticks below become F and their payloads are forgotten."""
        if t <= self.acked:
            return False
        self.acked = t
        self.known.add(0, t)
        i = bisect_left(self.dticks, t)
        for x in self.dticks[:i]:
            self.data.pop(x, None)
        del self.dticks[:i]
        return True

    def end(self) -> int:
        """One past the latest non-Q tick (0 when nothing is known)."""
        return max(self.known.end() or 0, self.acked)


class CuriousSet:
    """C ticks with the time they became C (for the istream's forgetting)."""

    __slots__ = ("ticks", "_since")

    def __init__(self) -> None:
        self.ticks = IntervalSet()
        self._since: list[tuple[int, int, float]] = []

    def add(self, a: int, b: int, now: float) -> list[Interval]:
        new = self.ticks.add(a, b)
        for x, y in new:
            self._since.append((x, y, now))
        return new

    def clear(self, a: int, b: int) -> None:
        self.ticks.remove(a, b)

    def forget_older(self, now: float, age: float) -> None:
        """Forget C ticks that are older than ``age`` (so a repeated nack appears fresh)."""
        keep = []
        for x, y, t0 in self._since:
            if now - t0 >= age:
                self.ticks.remove(x, y)
            else:
                keep.append((x, y, t0))
        self._since = keep

    def below(self, t: int) -> None:
        self.ticks.remove_below(t)


class OStream:
    """``ostream[P, c]``: the filter edge to one downstream cell, its A prefix and C ticks."""

    __slots__ = ("cell", "acked", "curious", "filter", "last_d")

    def __init__(self, cell: str, match: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.cell = cell
        self.acked = 0
        self.curious = IntervalSet()
        self.filter = match  # None: everything passes
        self.last_d = -1  # the latest D tick sent down this edge first-time

    def passes(self, m: dict[str, Any]) -> bool:
        return self.filter is None or self.filter(m.get("a") or {})

    def effective_ack(self, ist: KnowledgeStream) -> int:
        """The A prefix extended over ticks that are F for this cell (silence or filtered D)."""
        t = max(self.acked, ist.acked)
        while True:
            end = ist.known.run_end(t)
            if end == t:
                return t
            stop = end
            for x in ist.d_in(t, end):
                if self.passes(ist.data[x]):
                    stop = x
                    break
            if stop < end:
                return stop
            t = end


def silence_before(o: OStream, ist: KnowledgeStream, t: int) -> list[Interval]:
    """The F ticks of this edge between the last D sent down it and ``t``: known ticks of the
    istream that are silence or D filtered out for this cell (the "F" of ``F*DF*`` is the
    silence since the previous D *of this ostream*, not of the pubend)."""
    lo = max(o.last_d + 1, o.acked)
    if lo >= t:
        return []
    out: list[Interval] = []
    keep = [x for x in ist.d_in(lo, t) if o.passes(ist.data[x])]  # D for this cell: not F
    for a, b in ist.known.intersect(lo, t):
        cur = a
        for x in keep:
            if a <= x < b:
                if x > cur:
                    out.append((cur, x))
                cur = x + 1
        if cur < b:
            out.append((cur, b))
    return out


def project(o: OStream, f: list[Interval], d: list[DTick], rt: bool) -> tuple[list[Interval], list[DTick]] | None:
    """What of a knowledge message goes down to ostream ``o`` (Sec 3.1); None if nothing.

    First-time: D ticks that pass the filter always go; a filtered D becomes F; a
    message that is (or became) pure silence goes only if it overlaps a C tick.
    Retransmitted: only ticks the cell is curious about (a D the cell is not
    curious about is removed, i.e. becomes Q). Sent ticks stop being C.
    """
    fo: list[Interval] = []
    do: list[DTick] = []
    for t, m in d:
        if t < o.acked:
            continue
        if o.passes(m):
            do.append((t, m))
        else:
            fo.append((t, t + 1))
    for a, b in f:
        a = max(a, o.acked)
        if a < b:
            fo.append((a, b))
    if rt:
        do = [(t, m) for t, m in do if o.curious.contains(t)]
        fc: list[Interval] = []
        for a, b in fo:
            fc.extend(o.curious.intersect(a, b))
        fo = fc
        if not do and not fo:
            return None
    elif not do:
        if not any(o.curious.overlaps(a, b) for a, b in fo):
            return None
    for t, _ in do:
        o.curious.remove(t, t + 1)
    for a, b in fo:
        o.curious.remove(a, b)
    if o.acked > 0 and not rt:
        fo.insert(0, (0, o.acked))  # the F* prefix of past ticks
    return fo, do


# --------------------------------------------------------------------------- subends
class SubendStream:
    """A subend: doubt horizon, gapless in-order delivery, nack/ack generation (Sec 2.3, 3.2).

    Times (``now``) are seconds on a monotonic clock; ticks are pubend ms.
    """

    def __init__(self, *, gct: float, nrt_min: float, nrt_max: float = 30.0, dct: float | None = None,
                 chunk: int = 500) -> None:
        self.k = KnowledgeStream()
        self.td = 0  # doubt horizon: every tick < td is resolved (D delivered or F)
        self.expected = 0  # ticks < expected are expected to be non-Q (AckExpected / DCT)
        self.gct = gct
        self.nrt_min = nrt_min
        self.nrt_max = nrt_max
        self.dct = dct
        self.chunk = chunk
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.rto = nrt_min
        # gap entries: [lo, hi, seen, nacked_at or None, tries]
        self.entries: list[list[Any]] = []
        self.delivered = 0

    # -- knowledge -----------------------------------------------------------
    def accumulate(self, f: list[Interval], d: list[DTick]) -> list[DTick]:
        """Take a knowledge message; return the D ticks now deliverable, in tick order."""
        self.k.accumulate(f, d)
        return self._advance()

    def _advance(self) -> list[DTick]:
        end = self.k.known.run_end(self.td)
        if end <= self.td:
            return []
        out = [(t, self.k.data[t]) for t in self.k.d_in(self.td, end)]
        self.td = end
        self.k.ack(end)  # delivered / silent ticks are A at the subend
        self.delivered += len(out)
        return out

    # -- curiosity -----------------------------------------------------------
    def expect(self, t: int, now: float, reason: str) -> list[tuple[int, int, str]]:
        """Ticks < t should be known now (AckExpected, DCT): nack the Q ones immediately."""
        if t > self.expected:
            self.expected = t
        self._rebuild(now)
        out = []
        for e in self.entries:
            if e[0] < t and (e[3] is None or now - e[3] >= self.nrt_min / 2):
                hi = min(e[1], t)
                for a, b in chop(e[0], hi, self.chunk):
                    out.append((a, b, reason))
                e[3] = now
                e[4] = max(e[4], 1)
        return out

    def _rebuild(self, now: float) -> None:
        hi = max(self.k.end(), self.expected)
        gaps = self.k.known.gaps(self.td, hi) if hi > self.td else []
        old = self.entries
        new: list[list[Any]] = []
        covered_old = [False] * len(old)
        for a, b in gaps:
            cur = a
            for i, e in enumerate(old):
                x, y = max(a, e[0]), min(b, e[1])
                if x < y:
                    covered_old[i] = True
                    if x > cur:
                        new.append([cur, x, now, None, 0])
                    new.append([x, y, e[2], e[3], e[4]])
                    cur = max(cur, y)
            if cur < b:
                new.append([cur, b, now, None, 0])
        new.sort(key=lambda e: e[0])
        # Karn: sample the nack round trip only from entries resolved after one nack
        for i, e in enumerate(old):
            if not covered_old[i] and e[3] is not None and e[4] == 1:
                self._sample(now - e[3])
        self.entries = new

    def _sample(self, r: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = r, r / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - r)
            self.srtt = 0.875 * self.srtt + 0.125 * r
        self.rto = min(self.nrt_max, max(self.nrt_min, self.srtt + 4 * self.rttvar))

    def check(self, now: float, now_tick: int) -> list[tuple[int, int, str]]:
        """Timer: nacks due by GCT (new gaps), NRT (repeats, with backoff) and DCT."""
        out: list[tuple[int, int, str]] = []
        if self.dct is not None and now_tick - self.td > self.dct * 1000:
            out.extend(self.expect(now_tick - int(self.dct * 1000), now, "dct"))
        self._rebuild(now)
        for e in self.entries:
            if e[3] is None:
                if now - e[2] >= self.gct:
                    reason = "gct"
                else:
                    continue
            else:
                wait = min(self.nrt_max, self.rto * (2 ** max(0, e[4] - 1)))
                if now - e[3] < wait:
                    continue
                reason = "nrt"
            for a, b in chop(e[0], e[1], self.chunk):
                out.append((a, b, reason))
            e[3] = now
            e[4] += 1
        return out

    def gap_ticks(self) -> int:
        return sum(e[1] - e[0] for e in self.entries)
