"""Paper reproductions: grids of runs, a resumable run index, claims as data, one report.

A paper is a protocol's experiments part (``testbed/experiments/<protocol>.py``, or the
``EXPERIMENTS`` module of a protocol plugin; the registry in ``testbed.protocols`` finds both)
defining ``PAPER`` (a :class:`~testbed.experiments.grid.Paper`): its figures, the grids of runs
they are drawn from, and ``analyze(ctx)`` (figures and claims from the finished runs, read through
``testbed.analysis``). More paper modules can be named in ``$TESTBED_EXPERIMENTS``
(comma-separated module names; the tests use it for a tiny paper).

    testbed reproduce {all|<paper>} [--scale quick|paper] [--fig N] [--points k=v,...] [--provider P] [--out DIR]

writes ``<out>/<paper>/`` per paper and ``<out>/REPORT.md`` + ``<out>/index.html`` over every paper
reproduced in ``<out>`` (see docs/architecture.md, "Experiments").
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Callable

from testbed.experiments.grid import Figure, Grid, Paper, Reference

__all__ = ["Figure", "Grid", "Paper", "Reference", "papers", "paper_names", "reproduce"]

ENV = "TESTBED_EXPERIMENTS"


def _modules() -> list[str]:
    from testbed import registry as protocols

    names = [p.experiments for p in protocols.registry() if p.experiments]
    names += [m.strip() for m in os.environ.get(ENV, "").split(",") if m.strip()]
    return names


def papers() -> dict[str, Paper]:
    """Every paper that can be reproduced, by name (sorted)."""
    out: dict[str, Paper] = {}
    for name in _modules():
        mod = importlib.import_module(name)
        paper = getattr(mod, "PAPER", None)
        if isinstance(paper, Paper):
            out[paper.name] = paper
    return dict(sorted(out.items()))


def paper_names() -> list[str]:
    """For the CLI's choices: the protocols with an experiments part, without importing them."""
    from testbed import registry as protocols

    names = protocols.reproducible()
    if os.environ.get(ENV):
        names = list(papers())
    return sorted(set(names))


def reproduce(target: str, *, scale: str = "quick", figs: list[int] | None = None,
              out_dir: str | Path = "reproductions", runs_dir: str | None = None, provider: str | None = None,
              progress: Callable[[str], None] = lambda s: None, points: dict[str, Any] | None = None,
              on_step: Callable[[dict[str, Any]], None] | None = None,
              spark_master: str | None = None, jobs: int | None = None) -> Path:
    """Reproduce one paper (or ``all``); returns the path of ``REPORT.md`` (``index.html`` beside it).
    ``jobs``: runs made at a time (default: each paper's ``parallel``)."""
    from testbed.errors import UsageError
    from testbed.experiments import report
    from testbed.experiments.grid import figure_list
    from testbed.experiments.runner import Tally, durations, pending, reproduce_paper

    have = papers()
    if target == "all":
        if figs:
            raise UsageError("--fig selects figures of one paper; not with `all`")
        chosen = list(have.values())
    elif target in have:
        chosen = [have[target]]
    else:
        raise UsageError(f"no reproduction for {target!r} (have: {', '.join(['all', *have])})")
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: at least 1")
    out = Path(out_dir)
    left = []  # one progress display over every paper: what each still has to run
    for p in chosen:
        _, work, todo = pending(p, scale, figure_list(p, figs), out / p.name, provider, points)
        left.append(durations(work, todo))
    tally = Tally(total=sum(map(len, left)))
    progress(f"reproduce {target} ({scale}): {tally.total} runs to make in {len(chosen)} paper(s)")
    failed: list[tuple[str, Exception]] = []
    for i, p in enumerate(chosen):
        tally.later = [d for later in left[i + 1:] for d in later]
        try:
            reproduce_paper(p, scale, figs, out, runs_dir=runs_dir, provider=provider, progress=progress,
                            points=points, on_step=on_step, spark_master=spark_master, tally=tally,
                            jobs=jobs)
        except Exception as e:  # one paper's failure does not cost the others (an interrupt does stop)
            if len(chosen) == 1:
                raise
            progress(f"{p.name}: FAILED: {type(e).__name__}: {e}")
            failed.append((p.name, e))
    md, page = report.write_all(out)
    progress(f"report: {md} and {page}")
    if failed:
        from testbed.errors import RunError

        raise RunError("reproduce: " + "; ".join(f"{n} failed ({type(e).__name__}: {e})" for n, e in failed)
                       + f" (the report covers the others: {md})") from failed[0][1]
    return md
