"""A test-only paper for tests/integration/test_reproduce.py (named in $TESTBED_EXPERIMENTS).

Two points (publish rate 10/s and 40/s) x 3 seeds of a one-broker pub/sub topology; the figure
is deliveries per run vs rate, with a "paper" marker; the claims are judged like a real paper's.
It reads the run directories' logs directly (no Spark), so a run costs only its own seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

from testbed.experiments import claims as C
from testbed.experiments.claims import Difference, Tolerance
from testbed.experiments.grid import Figure, Grid, Paper, Reference

HERE = Path(__file__).resolve().parent


def deliveries(run_dir: Path) -> int:
    n = 0
    for f in (Path(run_dir) / "logs").glob("*.jsonl"):
        for line in f.read_text().splitlines():
            if '"ev":"deliver"' in line.replace(" ", "") and json.loads(line).get("ev") == "deliver":
                n += 1
    return n


def analyze(ctx) -> None:
    from testbed.analysis.plots import series_plot

    by_rate: dict[int, list[float]] = {}
    for e in sorted(ctx.entries("rate"), key=lambda e: e.repeat):
        by_rate.setdefault(e.point["rate"], []).append(deliveries(e.run))
    series_plot(ctx.figure_path(1), "deliveries vs rate", "rate (msgs/s)", "deliveries",
                {"subscriber": by_rate}, [(r.x, r.y, r.label()) for r in ctx.references(1)])
    rates = sorted(by_rate)
    ctx.add(C.comparison(1, "more deliveries at the higher rate",
                         [Difference(f"{rates[-1]} vs {rates[0]}", tuple(by_rate[rates[-1]]),
                                     tuple(by_rate[rates[0]]), ">")], what="deliveries per run"),
            C.value(1, "about 20 deliveries at 10 msgs/s", by_rate.get(10, []), 20,
                    Tolerance("2 s of workload at 10/s, minus start-up", rel=0.5)),
            C.information(1, "a number set by hardware", by_rate.get(40, []), 80, "test of the information kind"))
    for e in ctx.entries("rate"):
        ctx.checks.append({"run": f"rate={e.point['rate']}/r{e.repeat}", "check": "delivered",
                           "passed": deliveries(e.run) > 0, "violations": 0})


PAPER = Paper(
    name="tiny",
    title="A tiny test paper",
    topology_dir=str(HERE / "topologies" / "tiny"),
    figures=(Figure(1, "deliveries vs rate", ("rate",), "about 20 deliveries at 10 msgs/s",
                    (Reference(20, 10, "subscriber", "about 20 at 10 msgs/s"),)),),
    grids=(Grid("rate", "tiny.yaml", points={"quick": [{"rate": 10}, {"rate": 40}],
                                             "paper": [{"rate": 10}, {"rate": 40}]}),),
    analyze=analyze,
)
