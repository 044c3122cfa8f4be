"""Figs 4-5's backlog evidence on hand-made numbers: the remote latency's slow seconds and the SHB's
busiest 5 s (``measure.slow_seconds``, ``measure.peak_share``), as Fig 5's failure explanations cite
them (the paper-scale reference of 2026-11-28: one GD seed at 16,000 subscribers with a median of
483.6 ms against 116.5 and 119.8 ms)."""

import math

from testbed.protocols.gryphon.analysis.measure import peak_share, slow_seconds


def test_a_backlog_is_the_seconds_above_twice_the_runs_usual_second():
    steady = [112.0, 115.0, 113.0, 118.0, 111.0] * 6  # 30 s near 112 ms: no slow second
    assert slow_seconds(steady) == (0, 118.0)
    backlog = steady[:16] + [302.0, 513.0, 867.0, 1157.0, 1430.0, 1063.0] + steady[:8]
    assert slow_seconds(backlog) == (6, 1430.0)
    # the usual second is the run's own (10th percentile): a run slow all along has no backlog
    assert slow_seconds([x * 4 for x in steady]) == (0, 472.0)
    empty = slow_seconds([])
    assert empty[0] == 0 and math.isnan(empty[1])
    assert slow_seconds([float("nan"), 100.0, 300.0]) == (1, 300.0)


def test_peak_share_is_the_busiest_window_of_cumulative_cpu_samples():
    # one sample a second: 0.7 core for 10 s, then 0.95 core for 5 s, then 0.6
    t, c, xs = 0.0, 0.0, []
    for rate in [0.7] * 10 + [0.95] * 5 + [0.6] * 10:
        xs.append((t, c))
        t, c = t + 1.0, c + rate
    xs.append((t, c))
    assert math.isclose(peak_share(xs), 95.0, rel_tol=1e-9)
    # an event loop that stalls (samples 2 s apart) is measured over the samples' own times
    assert math.isclose(peak_share([(0.0, 0.0), (2.0, 1.8), (4.0, 3.6)]), 90.0, rel_tol=1e-9)
    assert math.isnan(peak_share([(0.0, 0.0)]))
    assert peak_share([(0.0, 0.0), (1.0, 0.5)], window_s=5.0) == 50.0
