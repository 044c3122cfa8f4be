"""Jergler et al., multi-client transactions: Figs 5-9 (EXPERIMENTS.md section B, spec
/work/shared/specs/TRANSACTIONS.md section 4) as grids and claims.

  base         reproduce.yaml: line of 3 brokers, 1 instance, sequential; D-TX, D-TXNI, S-TX x 3 seeds
               (Fig 5, and the 3-broker / 1-thread / 1-instance point of Figs 6-8)
  fig6         reproduce.yaml: overlays single, tree5, tree9 x 3 placements, one seed each (FIG6_REPEATS)
  fig7 / fig8  reproduce.yaml: TXC threads / scenario instances > 1, x 3 seeds
  fig9         fig9.yaml: regular events + dispatch rounds, D-TX, D-TXNI, S-TX x 3 seeds
  wait-*       BL-WAIT, computed entries (``search``): per configuration (line3; the other overlays;
               threads; instances) the wait search (bisection over multiples of 50 ms, the probe at
               w - 50 ms failed), then one sample per placement x seed at the wait found

Every run is read back with ``testbed.protocols.transactions.analysis.measure`` (one Spark job over all
runs); the history checks run on every run, batched (``analysis/batch.py``). Claims are judged over
the seeds as testbed/experiments/claims.py says.

The modules: ``grids`` (constants, configurations, every figure's points), ``wait`` (BL-WAIT's wait
search, the computed entries), ``claims`` (pure: series in, claims out), ``analyze`` (the runs read
back, figures, claims); this package assembles ``PAPER`` and re-exports their names.
"""
from __future__ import annotations

from testbed.experiments.grid import Figure, Grid, Paper, Reference

from testbed.protocols.transactions.experiments.analyze import (  # noqa: F401  (the paper's names, as one module had them)
    CHECKED,
    _figs_of_key,
    analyze,
)
from testbed.protocols.transactions.experiments.claims import (  # noqa: F401  (the paper's names, as one module had them)
    EXPLAINED,
    Series,
    _FEW,
    check_row,
    ratio_tol,
    _order_at,
    _ratio,
    _t,
    claims_5,
    claims_6,
    claims_7,
    claims_8,
    claims_9,
    claims_checks,
    claims_wait,
)
from testbed.protocols.transactions.experiments.grids import (  # noqa: F401  (the paper's names, as one module had them)
    CALIBRATION,
    CHECKS_REQUIRED,
    COUNTS,
    FIG6_REPEATS,
    Config,
    FIG9,
    LABEL,
    OVERLAYS,
    PARALLEL,
    CPU,
    PLACEMENTS,
    SCALES,
    SEEDS,
    STEP_MS,
    TOL,
    TXS,
    TX_VARIANTS,
    VARIANTS,
    WAIT_GRIDS,
    WAIT_GROUPS,
    WAIT_START_MS,
    _NAME,
    calibrated_tol,
    _STATED,
    _fig6_points,
    _points,
    _wait_points,
    config_name,
    configs,
    point_of,
    tx_count,
)
from testbed.protocols.transactions.experiments.resume import restore
from testbed.protocols.transactions.experiments.wait import (  # noqa: F401  (the paper's names, as one module had them)
    _FAILED_LOCK,
    _bisect,
    _next_mid,
    _prober,
    bisect_wait,
    nearest_wait,
    search,
    search_from,
)

PAPER = Paper(
    name="transactions",
    title="Jergler et al., multi-client transactions in distributed publish/subscribe systems",
    notes="docs/transactions.md",
    explained=EXPLAINED,
    figures=(
        Figure(5, "latency and throughput of the four approaches (3 brokers, sequential)",
               ("base", "wait-line3"), _STATED[5],
               (Reference(570, None, "D-TX", "D-TX about 570 ms"), Reference(190, None, "BL-WAIT", "BL-WAIT about 190 ms"))),
        Figure(6, "latency and throughput vs overlay size (1, 3, 5, 9 brokers)", ("base", "fig6", "wait-line3", "wait-overlays"),
               _STATED[6], (Reference(410, 1, "D-TX", "D-TX about 410 ms"), Reference(911, 9, "D-TX", "about 911 ms"),
                            Reference(60, 9, "S-TX", "S-TX about 60 ms"))),
        Figure(7, "latency and throughput vs TXC threads", ("base", "fig7", "wait-line3", "wait-threads"), _STATED[7]),
        Figure(8, "latency and throughput vs scenario instances (4-40 clients)",
               ("base", "fig7", "fig8", "wait-line3", "wait-threads", "wait-instances"), _STATED[8]),
        Figure(9, "inbound regular-event rate at the agents over time, dispatch windows", ("fig9",), _STATED[9]),
    ),
    grids=(
        Grid("base", "reproduce.yaml", points={s: _points(s, None, [0], "seq") for s in SCALES},
             repeats={s: SEEDS for s in SCALES}),
        Grid("fig6", "reproduce.yaml", points={s: _fig6_points(s) for s in SCALES}, repeats=FIG6_REPEATS),
        Grid("fig7", "reproduce.yaml", points={s: _points(s, "threads", [n for n in COUNTS[s] if n > 1], "conc")
                                               for s in SCALES}, repeats={s: SEEDS for s in SCALES}),
        Grid("fig8", "reproduce.yaml", points={s: _points(s, "instances", [n for n in COUNTS[s] if n > 1], "conc")
                                               for s in SCALES}, repeats={s: SEEDS for s in SCALES}),
        Grid("fig9", "fig9.yaml", points={s: [{"variant": v, **FIG9[s]} for v in TX_VARIANTS] for s in SCALES},
             repeats={s: SEEDS for s in SCALES}),
        *(Grid(g, "reproduce.yaml", points={s: _wait_points(g, s) for s in SCALES},
               repeats=FIG6_REPEATS if g == "wait-overlays" else {s: SEEDS for s in SCALES},
               compute=search, restore=restore, makes_runs=2) for g in WAIT_GRIDS),  # a search probes in pairs (wait._prober)
    ),
    analyze=analyze,
    parallel=PARALLEL,
    cpu=CPU,
)
