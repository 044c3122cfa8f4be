"""Tick ranges: sorted, disjoint, half-open integer intervals ``[lo, hi)``.

Gryphon streams are keyed by ticks (here: milliseconds since the workload
start, so a nack range is a duration in ms as in the paper). Knowledge and
curiosity are stored as interval sets rather than per tick. Pure, stdlib only.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Iterable, Iterator


class IntervalSet:
    """A set of integers stored as sorted disjoint half-open intervals."""

    __slots__ = ("_lo", "_hi")

    def __init__(self, intervals: Iterable[tuple[int, int]] = ()) -> None:
        self._lo: list[int] = []
        self._hi: list[int] = []
        for a, b in intervals:
            self.add(a, b)

    # -- queries -------------------------------------------------------------
    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(zip(self._lo, self._hi))

    def __len__(self) -> int:
        return len(self._lo)

    def __bool__(self) -> bool:
        return bool(self._lo)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IntervalSet) and self._lo == other._lo and self._hi == other._hi

    def __repr__(self) -> str:
        return f"IntervalSet({list(self)})"

    def intervals(self) -> list[tuple[int, int]]:
        return list(zip(self._lo, self._hi))

    def size(self) -> int:
        return sum(b - a for a, b in zip(self._lo, self._hi))

    def contains(self, t: int) -> bool:
        i = bisect_right(self._lo, t) - 1
        return i >= 0 and t < self._hi[i]

    def covers(self, a: int, b: int) -> bool:
        """True if every tick of [a, b) is in the set (an empty range is covered)."""
        if a >= b:
            return True
        i = bisect_right(self._lo, a) - 1
        return i >= 0 and self._hi[i] >= b

    def first(self) -> int | None:
        return self._lo[0] if self._lo else None

    def end(self) -> int | None:
        """One past the last tick in the set."""
        return self._hi[-1] if self._hi else None

    def run_end(self, t: int) -> int:
        """The end of the run of consecutive members starting at ``t`` (``t`` if t is not a member)."""
        i = bisect_right(self._lo, t) - 1
        if i >= 0 and t < self._hi[i]:
            return self._hi[i]
        return t

    def overlaps(self, a: int, b: int) -> bool:
        if a >= b:
            return False
        i = bisect_left(self._hi, a + 1)
        return i < len(self._lo) and self._lo[i] < b

    def intersect(self, a: int, b: int) -> list[tuple[int, int]]:
        """The members within [a, b), as intervals."""
        out: list[tuple[int, int]] = []
        if a >= b:
            return out
        i = bisect_left(self._hi, a + 1)
        while i < len(self._lo) and self._lo[i] < b:
            out.append((max(a, self._lo[i]), min(b, self._hi[i])))
            i += 1
        return out

    def gaps(self, a: int, b: int) -> list[tuple[int, int]]:
        """The non-members within [a, b), as intervals."""
        out: list[tuple[int, int]] = []
        cur = a
        for x, y in self.intersect(a, b):
            if x > cur:
                out.append((cur, x))
            cur = y
        if cur < b:
            out.append((cur, b))
        return out

    # -- updates -------------------------------------------------------------
    def add(self, a: int, b: int) -> list[tuple[int, int]]:
        """Add [a, b); return the parts that were new."""
        if a >= b:
            return []
        new = self.gaps(a, b)
        if not new:
            return new
        i = bisect_left(self._hi, a)  # first interval that ends at or after a (touching merges)
        j = bisect_right(self._lo, b)  # first interval that starts after b
        if i < j:
            a = min(a, self._lo[i])
            b = max(b, self._hi[j - 1])
        self._lo[i:j] = [a]
        self._hi[i:j] = [b]
        return new

    def remove(self, a: int, b: int) -> None:
        """Remove [a, b)."""
        if a >= b:
            return
        i = bisect_right(self._hi, a)  # first interval ending after a
        j = bisect_left(self._lo, b)  # first interval starting at or after b
        if i >= j:
            return
        los: list[int] = []
        his: list[int] = []
        if self._lo[i] < a:
            los.append(self._lo[i])
            his.append(a)
        if self._hi[j - 1] > b:
            los.append(b)
            his.append(self._hi[j - 1])
        self._lo[i:j] = los
        self._hi[i:j] = his

    def remove_below(self, t: int) -> None:
        if self._lo and self._lo[0] < t:
            self.remove(self._lo[0], t)


MAX_PIECES = 256  # a nack range is chopped into at most this many pieces (see chop)


def chop(a: int, b: int, size: int, max_pieces: int = MAX_PIECES) -> list[tuple[int, int]]:
    """Split [a, b) into pieces of at most ``size`` ticks (the paper chops large nack ranges), and
    at most ``max_pieces`` of them: wider pieces for a wider range. A subend that never heard of a
    pubend (its subscribers match none of its messages, so no knowledge reached it) and then gets
    an AckExpected has a doubt horizon at tick 0: the range up to now is ~1.7e12 ticks, which in
    500-tick pieces was 3.4e9 nacks and took 14 GB before the process was killed."""
    if a >= b:
        return []
    if size <= 0:
        return [(a, b)]
    size = max(size, -(-(b - a) // max_pieces))
    return [(x, min(b, x + size)) for x in range(a, b, size)]
