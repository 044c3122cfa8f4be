"""What a paper's reproduction is made of: grids of runs, figures drawn from them, scales.

A :class:`Grid` is one topology template run at a list of points (``--set`` values), each point
``repeats`` times (repeat ``r`` runs with ``repeat_index = r``, so every node draws from a different
seed). A :class:`Figure` names the grids it is drawn from and the numbers the paper states for it
(:class:`Reference`, drawn on our figure as markers labelled "paper"). A :class:`Paper` is the list
of figures and grids, plus ``analyze(ctx)``: read the finished runs, draw the figures, judge the
claims (``testbed/experiments/<paper>.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

SCALES = ("quick", "paper")
#: The cores a run of a paper that declares none is taken to keep busy (a whole one: cautious).
DEFAULT_RUN_CPU = 1.0


@dataclass(frozen=True)
class Reference:
    """A number the paper states for a figure: a point (x, y) or a horizontal line (x is None)."""

    y: float
    x: float | None = None
    series: str = ""  # which of our series it belongs to (legend text), if any
    note: str = ""

    def label(self) -> str:
        return "paper" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Grid:
    """One topology template x points x repeats.

    ``topology``: file name in the paper's topology directory; ``{scale}`` is replaced by the scale.
    ``points``: per scale, the list of ``--set`` points; None = the file's own ``sweep:``.
    ``set``: ``--set`` values common to every point (``scale`` is always added).
    ``repeats``: per scale, runs per point (seeds). ``analyze``: run the per-run Spark analysis
    (Parquet + checks.json in the run directory) right after the run.
    ``compute``: for grids whose entries are computed rather than one run each (a pure function
    of the plan, such as a figure's sizes computed from the placement; or an entry that makes runs
    of its own, such as a search): ``compute(plan, ctx) -> dict`` stored in the index instead of a
    run directory; ``ctx`` is the reproduction's :class:`testbed.experiments.runner.ComputeContext`.
    ``makes_runs``: a computed entry that makes runs of its own: the most it makes at once (when
    ``ctx.jobs`` allows), so the scheduler counts them against the CPU budget and the runs at a
    time (0: it makes none).
    ``alone``: the grid's runs measure CPU or throughput and must have the machine to themselves
    (None: the paper's :attr:`Paper.alone`; a dict: per scale, a scale not in it the paper's).
    ``cpu``: the cores one of its runs keeps busy, declared (None: the paper's :attr:`Paper.cpu`);
    the scheduler uses the cores measured on the grid's runs once it has them (docs/experiments.md,
    "How runs are scheduled").
    ``restore``: for a computed grid whose entries share state through ``ctx.memo`` (a search that
    later entries start from): ``restore(plan, row, ctx)`` is called for each of its entries taken
    from the run index, before any entry is computed, so that a resumed reproduction's memo holds
    what one sitting's would have.
    """

    name: str
    topology: str
    points: dict[str, list[dict[str, Any]]] | None = None
    set: dict[str, Any] = field(default_factory=dict)
    repeats: dict[str, int] = field(default_factory=lambda: {"quick": 3, "paper": 3})
    analyze: bool = False
    compute: Callable[[Any, Any], dict[str, Any]] | None = None
    pass_scale: bool = True  # add ``scale=<scale>`` to the --set values
    makes_runs: int = 0
    alone: bool | dict[str, bool] | None = None
    cpu: dict[str, float] | None = None  # per scale
    restore: Callable[[Any, dict[str, Any], Any], None] | None = None

    def topology_name(self, scale: str) -> str:
        return self.topology.replace("{scale}", scale)

    def repeats_at(self, scale: str) -> int:
        return int(self.repeats.get(scale, 1))


@dataclass(frozen=True)
class Figure:
    number: int
    title: str
    grids: tuple[str, ...]
    paper: str  # the paper's statements for this figure (EXPERIMENTS.md), as text
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True)
class Explanation:
    """Why one claim does not hold here, from numbers measured in the same reproduction.

    ``text`` is a ``str.format`` template over the evidence: the claim's own numbers (``mean``,
    ``spread``, ``n``, ``ci_low``, ``ci_high``, ``paper_value``, a comparison's ``worst`` point), the machine's load during the figure's runs
    (``load_1m_max``, ``load_1m_mean``, ``cpus``, ``load_runs``: from every run's manifest) and what
    the paper's ``analyze`` recorded for the figure (``ctx.measure(figure, name=value)``: a count, a
    broker queue, a CPU share). ``cites``: the evidence the cause rests on; if any of it was not
    measured in this reproduction (missing, None or nan) the claim is shown as "not explained"."""

    text: str
    cites: tuple[str, ...]

    def render(self, claim: dict[str, Any], evidence: dict[str, Any]) -> tuple[str | None, list[str]]:
        import math

        m = claim.get("measured") or {}
        ci = m.get("ci") or (None, None)
        values = {"mean": m.get("mean"), "spread": m.get("spread"), "n": m.get("n"), "ci_low": ci[0],
                  "ci_high": ci[1], "worst": (m.get("detail") or {}).get("worst"),
                  "paper_value": claim.get("paper_value"), **evidence}

        def bad(v: Any) -> bool:
            return v is None or (isinstance(v, float) and math.isnan(v))

        import string

        used = [f for _, f, _, _ in string.Formatter().parse(self.text) if f]
        # what the cause rests on, then every number the sentence prints: a claim with no value
        # (insufficient for want of points) has no mean to print, which is "not measured"
        missing = list(dict.fromkeys(k for k in (*self.cites, *(f.split(".")[0].split("[")[0] for f in used))
                                     if bad(values.get(k))))
        if missing:
            return None, missing
        try:
            return self.text.format(**values), []
        except (KeyError, IndexError, ValueError, TypeError) as e:
            return None, [f"template: {type(e).__name__}: {e}"]


@dataclass(frozen=True)
class Paper:
    name: str  # the protocol name (`testbed reproduce <name>`)
    title: str
    figures: tuple[Figure, ...]
    grids: tuple[Grid, ...]
    analyze: Callable[[Any], None]  # analyze(ctx: experiments.context.Context)
    topology_dir: str = ""  # default: the protocol name (see experiments/topologies.py)
    notes: str = ""  # where method and deviations are written up (docs/<p>.md)
    check_grids: tuple[str, ...] = ()  # grids that carry only the history checks (no figure)
    # Runs made at a time, per scale (default 1: one after the other). A paper that declares more
    # says why where it does: what one run costs the machine, and what sharing it changes in what
    # the runs measure. `testbed reproduce --jobs N` overrides it.
    parallel: dict[str, int] = field(default_factory=dict)
    # Why a claim does not hold here: claim id (``Claim.id``, e.g. ``fig9:0-901-lower-than-0-349``)
    # -> an :class:`Explanation` whose text is rendered with this reproduction's numbers and whose
    # cited causes must have been measured in it, else the report shows "not explained". Written
    # from what the runs showed, never a reason to change a tolerance or a setup. A legacy entry
    # ((figure, start of the sentence) -> a fixed string) is shown as "not explained" with its
    # text marked as an unmeasured note.
    explained: dict[Any, Any] = field(default_factory=dict)
    # Its runs measure CPU or throughput, so each must run with nothing else on the machine (no
    # other run, no analysis); a grid may say otherwise (``Grid.alone``). Runs not alone share the
    # machine with other papers' runs within the CPU budget (docs/experiments.md).
    alone: bool = False
    # The cores one run keeps busy, per scale, declared (measured where the paper says so); used
    # until the reproduction has measured the grid's own runs. Undeclared: DEFAULT_RUN_CPU.
    cpu: dict[str, float] = field(default_factory=dict)

    def explanation(self, claim: dict[str, Any], evidence: dict[str, Any]) -> dict[str, Any]:
        """``{"explanation": text or None, "not_measured": [...], "note": legacy text}`` for one
        claim (as data) that failed, had too few seeds or no data."""
        e = self.explained.get(claim.get("id"))
        if isinstance(e, Explanation):
            text, missing = e.render(claim, evidence)
            return {"explanation": text, **({"not_measured": missing} if missing else {})}
        for key, why in self.explained.items():
            if (isinstance(key, tuple) and key[0] == claim.get("figure")
                    and str(claim.get("sentence", "")).startswith(key[1])):
                return {"explanation": None, "note": str(why)}
        return {"explanation": None}

    def parallel_at(self, scale: str) -> int:
        return max(1, int(self.parallel.get(scale, 1)))

    def alone_for(self, grid: Grid, scale: str | None = None) -> bool:
        """Whether the grid's runs must run with nothing else at ``scale`` (a pure computed entry
        never is; a grid's per-scale ``alone`` without ``scale`` or without that scale: the paper's)."""
        if grid.compute is not None and not grid.makes_runs:
            return False
        if isinstance(grid.alone, dict):
            return bool(grid.alone.get(scale, self.alone))  # no scale (None): the paper's
        return self.alone if grid.alone is None else grid.alone

    def cpu_for(self, grid: Grid, scale: str) -> float:
        """The declared cores one run of the grid keeps busy at this scale."""
        if grid.cpu is not None and scale in grid.cpu:
            return float(grid.cpu[scale])
        return float(self.cpu.get(scale, DEFAULT_RUN_CPU))

    def figure(self, n: int) -> Figure:
        for f in self.figures:
            if f.number == n:
                return f
        raise KeyError(n)

    def grid(self, name: str) -> Grid:
        for g in self.grids:
            if g.name == name:
                return g
        raise KeyError(name)

    def grids_for(self, figs: list[int]) -> list[Grid]:
        """The grids the chosen figures need (file order), plus the check grids."""
        want = {g for f in self.figures if f.number in figs for g in f.grids} | set(self.check_grids)
        return [g for g in self.grids if g.name in want]

    def figures_of(self, grid: str) -> list[int]:
        return [f.number for f in self.figures if grid in f.grids]


def parse_points_filter(text: str | None) -> dict[str, Any]:
    """``--points 'rate=500,shape=0.901'`` -> {"rate": 500, "shape": 0.901} (values as YAML scalars)."""
    from testbed.errors import UsageError

    if not text:
        return {}
    import yaml

    out: dict[str, Any] = {}
    for part in text.split(","):
        k, sep, v = part.partition("=")
        k = k.strip()
        if not sep or not k:
            raise UsageError(f"--points {text!r}: expected key=value[,key=value...]")
        out[k] = yaml.safe_load(v.strip())
    return out


def matches(point: dict[str, Any], flt: dict[str, Any]) -> bool:
    """A point passes the filter when every filtered key it has equals the filter's value."""
    return all(point[k] == v for k, v in flt.items() if k in point)


def figure_list(paper: Paper, figs: list[int] | None) -> list[int]:
    from testbed.errors import UsageError

    have = [f.number for f in paper.figures]
    if not figs:
        return have
    bad = sorted(set(figs) - set(have))
    if bad:
        raise UsageError(f"{paper.name} has figures {have}, not {bad}")
    return sorted(set(figs))


def package_dir() -> Path:
    return Path(__file__).resolve().parent
