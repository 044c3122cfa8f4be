"""``testbed explore``: random fault schedules and topology variants, checked, and each failing
case shrunk to its minimum (docs/explore.md).

Layer: above ``api`` (it runs cases with ``testbed run``), below ``cli``. Parts:
:mod:`~testbed.explore.generate` (pure: schedules and variants drawn from a topology),
:mod:`~testbed.explore.shrink` (pure: the shrinker, given a way to run candidates),
:mod:`~testbed.explore.files` (topology text in and out), :mod:`~testbed.explore.check` (the
protocol's checks on a run, in one Spark session), :mod:`~testbed.explore.runner` (the
exploration directory, runs, resume, summary).
"""

from __future__ import annotations

from testbed.explore.runner import Result, explore

__all__ = ["Result", "explore"]
