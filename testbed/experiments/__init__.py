"""Paper reproductions: grids of runs, a resumable run index, claims as data, one report.

A paper is a protocol's experiments part (``testbed/experiments/<protocol>.py``, or the
``EXPERIMENTS`` module of a protocol plugin; the registry in ``testbed.protocols`` finds both)
defining ``PAPER`` (a :class:`~testbed.experiments.grid.Paper`; or ``PAPERS``, a list of them): its figures, the grids of runs
they are drawn from, and ``analyze(ctx)`` (figures and claims from the finished runs, read through
``testbed.analysis``). More paper modules can be named in ``$TESTBED_EXPERIMENTS``
(comma-separated module names; the tests use it for a tiny paper).

    testbed reproduce {all|<paper> [<paper> ...]} [--scale quick|paper] [--fig N] [--points k=v,...] [--jobs J] [--cpu-budget CORES] [--out DIR]

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
        for paper in (getattr(mod, "PAPER", None), *getattr(mod, "PAPERS", ())):
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


def reproduce(target: str | list[str], *, scale: str = "quick", figs: list[int] | None = None,
              out_dir: str | Path = "reproductions", runs_dir: str | None = None, provider: str | None = None,
              progress: Callable[[str], None] = lambda s: None, points: dict[str, Any] | None = None,
              on_step: Callable[[dict[str, Any]], None] | None = None,
              spark_master: str | None = None, jobs: int | None = None,
              cpu_budget: float | None = None) -> Path:
    """Reproduce one paper, several (a list) or ``all``; returns the path of ``REPORT.md`` (``index.html`` beside it).

    Every chosen paper's pending runs are scheduled together (docs/experiments.md, "How runs are
    scheduled"): runs that measure CPU or throughput (``Paper.alone``) alone, the others side by
    side within ``cpu_budget`` cores (default: the machine's). ``jobs``: runs made at a time, at
    most (default: each paper's ``parallel``). Writes ``<out>/timing.json``: the wall time of the
    whole reproduction and each paper's (also printed)."""
    import json
    import time

    from testbed.errors import UsageError
    from testbed.experiments import report
    from testbed.experiments.runner import reproduce_papers

    have = papers()
    names = [target] if isinstance(target, str) else list(dict.fromkeys(target))
    if names == ["all"]:
        if figs:
            raise UsageError("--fig selects figures of one paper; not with `all`")
        chosen = list(have.values())
    else:
        bad = [n for n in names if n not in have]
        if bad or not names:
            raise UsageError(f"no reproduction for {', '.join(map(repr, bad)) or 'nothing'} "
                             f"(have: {', '.join(['all', *have])}; `all` alone)")
        if figs and len(names) > 1:
            raise UsageError("--fig selects figures of one paper; not with several")
        chosen = [have[n] for n in names]
    target = "all" if names == ["all"] else ",".join(names)
    out = Path(out_dir)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    s = reproduce_papers(chosen, scale, figs, out, runs_dir=runs_dir, provider=provider, progress=progress,
                         points=points, on_step=on_step, spark_master=spark_master, jobs=jobs, budget=cpu_budget)
    md, page = report.write_all(out)
    timing = {"target": target, "scale": scale, "started": started,
              "ended": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "wall_s": s.wall_s,
              "cpu_budget": s.budget, "jobs": jobs, "papers": s.papers}
    (out / "timing.json").write_text(json.dumps(timing, indent=1))
    progress(f"report: {md} and {page}")
    progress(timing_line(timing))
    if s.failed:
        if len(chosen) == 1:
            raise next(iter(s.failed.values()))
        from testbed.errors import RunError

        first = next(iter(s.failed.values()))
        raise RunError("reproduce: " + "; ".join(f"{n} failed ({type(e).__name__}: {e})" for n, e in s.failed.items())
                       + f" (the report covers the others: {md})") from first
    return md


def timing_line(timing: dict[str, Any]) -> str:
    """``reproduce``'s closing line: its wall time and each paper's (from its first run's start to
    its analysis's end; papers overlap, so they do not add up to the wall)."""
    parts = []
    for name, p in timing["papers"].items():
        if p.get("failed"):
            parts.append(f"{name} FAILED")
        elif p.get("wall_s") is not None:
            parts.append(f"{name} {p['wall_s']:.0f} s (at {p['start_s']:.0f}-{p['end_s']:.0f} s)")
        else:
            parts.append(f"{name} -")
    return (f"reproduce {timing['target']} ({timing['scale']}): wall time {timing['wall_s']:.0f} s "
            f"= {timing['wall_s'] / 60:.1f} min; per paper: " + ", ".join(parts))
