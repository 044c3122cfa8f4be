"""What the benchmarks share (they run as scripts, so this directory is on ``sys.path``)."""

from __future__ import annotations


def pct(xs: list[float], p: float) -> float:
    """The ``p``-th percentile of ``xs``: the sample at rank round(p/100 * (n-1)) of the sorted values."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))]
