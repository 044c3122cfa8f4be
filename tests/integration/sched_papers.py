"""Test-only papers for tests/integration/test_reproduce_schedule.py (named in $TESTBED_EXPERIMENTS):
two papers whose runs may share the machine (``sched-a``, ``sched-b``: two runs each, two at a time)
and one whose runs must run alone (``sched-alone``: two runs), all of the one-broker tiny topology.
``analyze`` records the runs it got; no Spark."""

from __future__ import annotations

from pathlib import Path

from testbed.experiments.grid import Figure, Grid, Paper

HERE = Path(__file__).resolve().parent


def analyze(ctx) -> None:
    ctx.numbers["runs"] = sorted(ctx.run_dirs("g").values())


def _paper(name: str, alone: bool, rates: list[int], repeats: int) -> Paper:
    return Paper(name=name, title=f"scheduling test paper {name}", topology_dir=str(HERE / "topologies" / "tiny"),
                 figures=(Figure(1, "runs", ("g",), "none"),), analyze=analyze, alone=alone,
                 parallel={"quick": 2}, cpu={"quick": 0.3},
                 grids=(Grid("g", "tiny.yaml", points={"quick": [{"rate": r} for r in rates]},
                             repeats={"quick": repeats}),))


PAPERS = [_paper("sched-a", False, [10, 20], 1), _paper("sched-b", False, [10, 20], 1),
          _paper("sched-alone", True, [10], 2)]
