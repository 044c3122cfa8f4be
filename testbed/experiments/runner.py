"""Run papers' grids (the only place that calls ``testbed.api`` to run points), then analyse.

``reproduce_papers`` enumerates every (grid, point, repeat) the chosen papers' figures need, reuses
what each paper's run index has, and puts the rest of every paper in one scheduler pool
(:mod:`testbed.experiments.schedule`: runs marked alone with nothing beside them, the others
together within a CPU budget), with a progress line per run (figure, point, repeat, ETA); a
paper's finished runs go to its ``analyze(ctx)`` as soon as they are all done. ``analyze`` reads run
directories only (through ``testbed.analysis``) and records figures, claims, checks and numbers
in the :class:`Context`; the runner writes them to ``<out>/<paper>/`` (``result.json``,
``claims.json``, ``checks.json``, ``report.md``), each paper's results stamped with the code, the
machine, the load and the wall time (:mod:`testbed.experiments.stamp`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from testbed.experiments import topologies
from testbed.experiments.claims import Claim, summary
from testbed.experiments.grid import Grid, Paper, figure_list, matches
from testbed.experiments.index import RunIndex, code_version, run_finished, run_key

if TYPE_CHECKING:
    from testbed.experiments.schedule import Item

Progress = Callable[[str], None]
OVERHEAD_S = 15.0  # bring-up + drain + teardown of one run, before any run was measured


@dataclass(frozen=True)
class Entry:
    """One finished (grid, point, repeat): a run directory, or a computed row."""

    grid: str
    point: dict[str, Any]
    repeat: int
    key: str
    run: Path | None = None
    row: dict[str, Any] | None = None
    reused: bool = False


@dataclass
class Work:
    grid: Grid
    plan: Any
    path: Path
    set_vars: dict[str, Any]
    key: str


@dataclass
class Context:
    """What ``Paper.analyze`` gets and fills."""

    paper: Paper
    scale: str
    figs: list[int]
    out: Path
    entries_by_grid: dict[str, list[Entry]]
    progress: Progress
    spark_master: str | None = None
    claims: list[Claim] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[int, str] = field(default_factory=dict)  # figure -> png path relative to out
    figure_parts: dict[int, list[str]] = field(default_factory=dict)  # figure -> more panels (e.g. "ab")
    numbers: dict[str, Any] = field(default_factory=dict)
    evidence: dict[int, dict[str, Any]] = field(default_factory=dict)  # figure -> measured causes
    get_spark: Callable[[], Any] | None = None  # the reproduction's shared session (started on first use)
    _spark: Any = None

    @property
    def fig_dir(self) -> Path:
        (self.out / "figures").mkdir(parents=True, exist_ok=True)
        return self.out / "figures"

    @property
    def data_dir(self) -> Path:
        (self.out / "data").mkdir(parents=True, exist_ok=True)
        return self.out / "data"

    def wants(self, *figs: int) -> bool:
        return any(f in self.figs for f in figs)

    def entries(self, grid: str) -> list[Entry]:
        return self.entries_by_grid.get(grid, [])

    def run_dirs(self, grid: str) -> dict[str, str]:
        """A name per run (``<grid>/<point>/r<repeat>``) -> its directory."""
        return {entry_name(e): str(e.run) for e in self.entries(grid) if e.run is not None}

    @property
    def spark(self):
        if self._spark is None and self.get_spark is not None:
            self.progress(f"{self.paper.name}: Spark for the analysis (the reproduction's session)")
            self._spark = self.get_spark()
        if self._spark is None:
            from testbed.analysis.session import spark_session

            self.progress(f"{self.paper.name}: starting Spark for the analysis")
            self._spark = spark_session(self.spark_master, app=f"testbed-reproduce-{self.paper.name}")
        return self._spark

    def read_runs(self, grid: str, ev: str):
        """Event type ``ev`` of every run of ``grid`` as one DataFrame (``run_id`` = the run
        directory's name): one Spark job over the runs' stored Parquet, not one per run
        (:func:`testbed.analysis.batch.read_runs`; runs not ingested yet are ingested first)."""
        from testbed.analysis.batch import read_runs

        return read_runs(self.spark, list(self.run_dirs(grid).values()), ev)

    def figure_path(self, n: int, part: str = "") -> Path:
        """Where figure ``n`` is drawn; ``part`` (e.g. ``"ab"``): a further image of the same figure
        (``figures/fig<n><part>.png``), shown in the report after the main one. Every figure goes
        through here, so it reaches REPORT.md and index.html."""
        if part:
            rel = f"figures/fig{n}{part}.png"
            if rel not in self.figure_parts.setdefault(n, []):
                self.figure_parts[n].append(rel)
            return self.fig_dir / f"fig{n}{part}.png"
        self.figures[n] = f"figures/fig{n}.png"
        return self.fig_dir / f"fig{n}.png"

    def add(self, *claims: Claim) -> None:
        """Add claims; a claim is one sentence of the paper, once: a second claim with the same id
        (``fig<N>:<sentence>``) is an error of the paper's module."""
        have = {c.id for c in self.claims}
        for c in claims:
            if c.id in have:
                raise ValueError(f"{self.paper.name}: claim {c.id!r} added twice (a claim is one sentence "
                                 "of the paper, once; a check of the runs goes to the checks table)")
            have.add(c.id)
            self.claims.append(c)

    def measure(self, figure: int, **values: Any) -> None:
        """Record what this reproduction measured for a figure, for its claims' explanations
        (``Explanation.cites``): a count, a queue length, a CPU share."""
        self.evidence.setdefault(figure, {}).update(values)

    def references(self, n: int):
        return self.paper.figure(n).references


def point_label(point: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(point.items())) or "-"


def entry_name(e: Entry) -> str:
    return f"{e.grid}/{point_label(e.point)}/r{e.repeat}"


Cost = tuple[float, bool] | None  # (workload duration, analysed per run) of a run; None: computed entry


def eta_s(costs: list[Cost], overheads: dict[bool, list[float]]) -> float:
    """Seconds left: each run costs its workload duration plus an overhead (bring-up, drain,
    teardown, and for analysed grids the per-run Spark analysis): the mean overhead measured so far
    on runs of the same kind, else on any run, else OVERHEAD_S; a computed entry about a second."""
    every = [x for v in overheads.values() for x in v]

    def over(analysed: bool) -> float:
        xs = overheads.get(analysed) or every
        return sum(xs) / len(xs) if xs else OVERHEAD_S

    return sum(1.0 if c is None else c[0] + over(c[1]) for c in costs)


def _fmt_s(s: float) -> str:
    s = max(0, int(round(s)))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _points(grid: Grid, scale: str, flt: dict[str, Any], path: Path, provider: str | None):
    """Every (plan of repeat 0, --set values) of the grid at this scale, filtered."""
    from testbed import api

    base = dict(grid.set)
    if grid.pass_scale:
        base["scale"] = scale
    sets = [{**base, **p} for p in grid.points[scale]] if grid.points is not None else [base]
    seen = set()
    for sv in sets:
        for plan in api.plans(str(path), sv, provider):
            if plan.repeat_index != 0:
                continue
            full = {**sv, **plan.point}
            point = {k: v for k, v in full.items() if k != "scale"}
            if not matches(point, flt):
                continue
            ident = json.dumps(full, sort_keys=True, default=str)
            if ident in seen:
                continue
            seen.add(ident)
            yield plan, full, point


def plan_work(paper: Paper, scale: str, figs: list[int], provider: str | None,
              flt: dict[str, Any] | None = None) -> list[tuple[Work, dict[str, Any], int]]:
    """Everything the figures need: (work, point, repeat), in grid order."""
    out = []
    for grid in paper.grids_for(figs):
        path = topologies.find(paper.topology_dir or paper.name, grid.topology_name(scale))
        code = code_version(include_analysis=grid.compute is not None)
        if grid.compute is not None:  # the compute function's own module is part of its code
            import hashlib
            import inspect

            code += hashlib.sha256(Path(inspect.getfile(grid.compute)).read_bytes()).hexdigest()[:16]
        for plan, sv, point in _points(grid, scale, flt or {}, path, provider):
            for r in range(grid.repeats_at(scale)):
                p = dataclasses.replace(plan, repeat_index=r)
                key = run_key(p.rendered_text, sv, p.seed, r, p.provider, code,
                              "compute" if grid.compute else "run")
                out.append((Work(grid, p, path, sv, key), point, r))
    return out


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, so the run being made is torn down (``finally``) and the
    index keeps what finished. Only in the main thread."""
    try:
        old = signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@dataclass
class Tally:
    """Progress over a whole ``reproduce`` (every paper): runs left, overheads measured so far."""

    total: int = 0
    done: int = 0
    measured: dict[bool, list[float]] = field(default_factory=lambda: {True: [], False: []})  # overheads
    eta: Callable[[], float] = lambda: 0.0  # seconds left (the scheduler's estimate)


def pending(paper: Paper, scale: str, figs: list[int], out: Path, provider: str | None,
            flt: dict[str, Any] | None = None) -> tuple[RunIndex, list, list[int]]:
    """The run index, every (work, point, repeat) the figures need, and the indices of those not in it."""
    index = RunIndex(out / f"index-{scale}.json")
    work = plan_work(paper, scale, figs, provider, flt)

    def have(w: Work) -> dict[str, Any] | None:
        e = index.get(w.key)
        if e is None:
            return None
        if w.grid.compute is not None:
            return e if "row" in e else None
        return e if run_finished(e.get("run"), analyzed=w.grid.analyze) else None

    return index, work, [i for i, (w, _, _) in enumerate(work) if have(w) is None]


PHASES = ("up", "settle", "workload", "drain", "collect", "down", "other")


def run_phases(manifest: dict[str, Any], settle_s: float, duration_s: float, elapsed_s: float) -> dict[str, float]:
    """Where one run's wall time went (seconds): ``up`` (bring-up), ``settle`` (the wait before
    the workload), ``workload`` (its duration), ``drain`` (the rest of the schedule: start lead,
    warm-up past the duration, drain), ``collect`` (logs), ``down`` (teardown), ``other`` (the
    rest of ``elapsed_s``: run files, failed attempts, a per-run analysis). Pure."""
    up = float(manifest.get("up_s") or 0.0)
    sched = manifest.get("schedule_s")
    sched = float(sched) if sched is not None else settle_s + duration_s
    out = {"up": up, "settle": min(settle_s, sched), "workload": min(duration_s, max(0.0, sched - settle_s)),
           "collect": float(manifest.get("collect_s") or 0.0), "down": float(manifest.get("down_s") or 0.0)}
    out["drain"] = max(0.0, sched - out["settle"] - out["workload"])
    out["other"] = max(0.0, elapsed_s - sum(out.values()))
    return {k: round(out[k], 2) for k in PHASES}


def phase_line(phases: dict[str, dict[str, float]]) -> str:
    """``stats["phases"]`` (grid -> runs, wall_s and seconds per phase) as one line per grid and the total."""
    lines, tot = [], {k: 0.0 for k in ("runs", "wall_s", *PHASES)}
    for g, p in phases.items():
        for k in tot:
            tot[k] += p.get(k, 0.0)
        lines.append(f"  {g}: {int(p['runs'])} runs, {p['wall_s']:.0f} s: "
                     + ", ".join(f"{k} {p.get(k, 0.0):.0f}" for k in PHASES))
    if len(lines) > 1:
        lines.append(f"  all runs: {int(tot['runs'])} runs, {tot['wall_s']:.0f} s: "
                     + ", ".join(f"{k} {tot[k]:.0f}" for k in PHASES))
    return "\n".join(lines)


def durations(work: list, todo: list[int]) -> list[Cost]:
    return [None if work[j][0].grid.compute is not None else (work[j][0].plan.duration_s, work[j][0].grid.analyze)
            for j in todo]


#: How often a run that raised (failed to come up, to start its workload, to collect) is tried
#: again before the reproduction stops. Such an error is the testbed's, not the protocol's (a
#: protocol's misbehaviour shows in the checks of a finished run): on a loaded machine a node busy
#: with start-up can miss a control timeout. Every failed attempt is kept in the index entry
#: (``failed_attempts``: the error), so a retried point is visible in the data.
RUN_ATTEMPTS = 2
MADE_BY_COMPUTE = "made-by-compute"  # the kind of a run a computed entry made (a search's probe) in the index
#: Made runs analysed together (``api.analyze_runs``: the checks every run shares and the metrics
#: one set of Spark jobs for the batch, ~1 s per small run instead of ~3 s alone; docs/analysis.md).
#: A run is in the run index once analysed, so an interrupted reproduction makes at most this
#: many runs again when resumed.
ANALYZE_BATCH = 8


def _run_once_more_on_error(api, w, root: Path, progress: Progress, entry: dict[str, Any],
                            stopping: Callable[[], bool] = lambda: False):
    """``stopping()`` true: the reproduction is being interrupted (its runs were stopped), so a run
    that failed is not tried again."""
    from testbed.errors import TestbedError

    for attempt in range(1, RUN_ATTEMPTS):
        try:
            return api.run_one(w.plan, str(w.path), w.set_vars, root, lambda s: None, lambda e: None)
        except TestbedError as e:
            if stopping():
                raise
            entry.setdefault("failed_attempts", []).append({"error": f"{type(e).__name__}: {e}"})
            progress(f"  the run failed ({type(e).__name__}: {e}); trying it again ({attempt + 1}/{RUN_ATTEMPTS})")
    return api.run_one(w.plan, str(w.path), w.set_vars, root, lambda s: None, lambda e: None)


@dataclass
class ComputeContext:
    """What a computed grid entry is given, ``Grid.compute(plan, ctx)``: what it may need of the
    reproduction making it, explicitly (no module state, no context variables).

    ``jobs``: runs this reproduction makes at a time (a computed entry that makes runs of its own,
    e.g. a wait search, may make two at once when it is more than 1); ``runs_dir``: the root its
    runs go under (``--runs-dir``, else ``$TESTBED_RUNS``, else ./runs); ``memo``: shared by the
    paper's computed entries of this one reproduction (a search made once, reused by its samples);
    :meth:`spark`: the reproduction's Spark session, made on first use (and stopped with it);
    :meth:`run`: make one run, tried again once when it fails to come up, as the runner does.
    ``index``: the paper's run index; with it every run :meth:`run` makes is recorded there under
    its own key (kind ``made-by-compute``), and a finished one is reused, so a search interrupted
    with its reproduction (the end of a sitting) resumes where it stopped instead of probing again."""

    paper: str = ""
    scale: str = "quick"
    provider: str | None = None
    jobs: int = 1
    runs_dir: Path = field(default_factory=lambda: _default_runs_root())
    memo: dict[str, Any] = field(default_factory=dict)
    get_spark: Callable[[], Any] | None = None
    stopping: Callable[[], bool] = lambda: False  # the reproduction is being interrupted: no retry
    index: RunIndex | None = None
    reused_runs: int = 0  # runs :meth:`run` took from the index instead of making them

    def spark(self) -> Any:
        if self.get_spark is not None:
            return self.get_spark()
        from testbed.analysis.session import spark_session

        return spark_session()

    def run(self, plan: Any, path: str, set_vars: dict[str, Any], root: Path,
            failed: list[dict[str, Any]] | None = None) -> Path:
        """One run of ``plan`` (from the topology ``path`` with ``set_vars``) under ``root``; a run that
        raises (it did not come up) is made again, up to RUN_ATTEMPTS, each failure appended to
        ``failed`` as ``{"error": ...}``."""
        if self.stopping():  # the reproduction is being interrupted: no new run
            raise KeyboardInterrupt("the reproduction is being interrupted")
        key = None
        if self.index is not None:
            key = run_key(plan.rendered_text, set_vars, plan.seed, plan.repeat_index, plan.provider,
                          code_version(False), MADE_BY_COMPUTE)
            e = self.index.get(key) or {}
            if run_finished(e.get("run")):
                self.reused_runs += 1
                return Path(e["run"])
        t = time.monotonic()
        made = self._make(plan, path, set_vars, root, failed)
        if self.stopping():  # cut by the interrupt (its nodes stopped early): neither judged nor recorded
            from testbed.runs.rundir import RunDir

            RunDir(made).update_manifest(status="interrupted")
            raise KeyboardInterrupt(f"{made.name}: stopped by the interrupt")
        if key is not None:
            self.index.put(key, {"kind": MADE_BY_COMPUTE, "paper": self.paper, "run": str(made),
                                 "set": set_vars, "repeat": plan.repeat_index,
                                 "elapsed_s": round(time.monotonic() - t, 2),
                                 "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        return made

    def _make(self, plan: Any, path: str, set_vars: dict[str, Any], root: Path,
              failed: list[dict[str, Any]] | None) -> Path:
        from testbed import api
        from testbed.errors import TestbedError

        quiet = lambda *a: None  # noqa: E731
        for _ in range(1, RUN_ATTEMPTS):
            try:
                return Path(api.run_one(plan, path, set_vars, root, quiet, quiet).path)
            except TestbedError as e:
                if self.stopping():
                    raise
                if failed is not None:
                    failed.append({"error": f"{type(e).__name__}: {e}"})
        return Path(api.run_one(plan, path, set_vars, root, quiet, quiet).path)


def _default_runs_root() -> Path:
    from testbed.runs.rundir import runs_root

    return runs_root(None)


def load_evidence(run_dirs: list[Path]) -> dict[str, Any]:
    """The machine's load while these runs measured, from their manifests (``load_avg``: the
    1-minute load average when each workload ended): max, mean, the cores, how many runs had it."""
    ends, cpus = [], None
    for d in run_dirs:
        got = run_load(d)
        if got is not None:
            ends.append(got[0])
            cpus = got[1] or cpus
    if not ends:
        return {}
    return {"load_1m_max": max(ends), "load_1m_mean": sum(ends) / len(ends), "cpus": cpus,
            "load_runs": len(ends)}


# When a figure's points were measured at loads too different to compare them as they are: the
# points' mean 1-minute loads differ by at least the machine's cores, i.e. one point's runs shared
# the CPU with a whole machine's worth more runnable work than another's. Latency grows with load
# (a calibrated latency moved 123 ms between idle and load 17-22, docs/results/README.md), so a comparison between such
# points includes the load's effect, which no claim corrects. Said under the figure, never judged.
UNEVEN_LOAD_CORES = 1.0


def measured_runs(e: Entry) -> list[Path]:
    """The runs an entry's values come from: its run, or for a computed entry the ``sample`` run its
    row names (a search's: its probes only choose the value the sample measures at), else none."""
    if e.run is not None:
        return [Path(e.run)]
    sample = (e.row or {}).get("sample")
    if isinstance(sample, dict) and isinstance(sample.get("run"), str) and sample["run"]:
        return [Path(sample["run"])]
    return []


def run_load(run: Path) -> tuple[float, int | None] | None:
    """(the 1-minute load when the run's workload ended, the machine's cores) from its manifest."""
    try:
        la = json.loads((Path(run) / "manifest.json").read_text()).get("load_avg") or {}
    except (OSError, ValueError):
        return None
    if not la.get("end"):
        return None
    return float(la["end"][0]), la.get("cpus")


def figure_loads(paper: Paper, figs: list[int], entries: dict[str, list[Entry]],
                 cores: int | None = None) -> dict[int, dict[str, Any]]:
    """Per figure: the load its points were measured at (each point: its grid and point, the runs
    with a recorded load, their mean and max 1-minute load), the cores, and ``uneven`` when the
    points' means differ by at least ``UNEVEN_LOAD_CORES`` x the cores."""
    out: dict[int, dict[str, Any]] = {}
    for f in paper.figures:
        if f.number not in figs:
            continue
        groups: dict[tuple[str, str], list[float]] = {}
        n_cores = cores
        for g in f.grids:
            for e in entries.get(g, []):
                label = point_label(e.point)
                for r in measured_runs(e):
                    got = run_load(r)
                    if got is None:
                        continue
                    groups.setdefault((g, label), []).append(got[0])
                    n_cores = n_cores or got[1]
        if not groups:
            continue
        n_cores = int(n_cores or machine_cores())
        points = [{"grid": g, "point": p, "runs": len(v), "load_mean": round(sum(v) / len(v), 2),
                   "load_max": round(max(v), 2)} for (g, p), v in groups.items()]
        means = [x["load_mean"] for x in points]
        out[f.number] = {"cores": n_cores, "points": points, "lowest": min(means), "highest": max(means),
                         "uneven": len(points) > 1 and max(means) - min(means) >= UNEVEN_LOAD_CORES * n_cores}
    return out


def figure_evidence(ctx: Context, entries: dict[str, list[Entry]]) -> dict[int, dict[str, Any]]:
    """Per figure: the load during its grids' runs plus what ``analyze`` measured for it."""
    out = {}
    for f in ctx.paper.figures:
        runs = [e.run for g in f.grids for e in entries.get(g, []) if e.run is not None]
        out[f.number] = {**load_evidence(runs), **ctx.evidence.get(f.number, {})}
    return out


def _explained(paper: Paper, c: Claim, evidence: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A claim as data; one that failed (or had too few seeds, or no data) carries the paper's
    explanation of why it does not hold here rendered with this reproduction's numbers
    (``Paper.explained[claim id]``), or None: not explained."""
    from testbed.experiments.claims import _json

    d = _json(c.to_dict())
    if c.verdict in ("fail", "insufficient", "no data"):
        d.update(paper.explanation(d, (evidence or {}).get(c.figure, {})))
    return d


def relative_paths(obj: Any, base: Path) -> Any:
    """``obj`` (JSON-like) with every string that is an absolute path of an existing file or
    directory made relative to ``base`` (keys too); other strings are left as they are."""
    root = Path(base).resolve()

    def fix(s: str) -> str:
        if s.startswith(os.sep) and "\n" not in s and len(s) < 4096:
            try:
                if Path(s).exists():
                    return os.path.relpath(s, root)
            except OSError:
                pass
        return s

    if isinstance(obj, dict):
        return {(fix(k) if isinstance(k, str) else k): relative_paths(v, base) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [relative_paths(v, base) for v in obj]
    return fix(obj) if isinstance(obj, str) else obj


#: The cores a paper's analysis or a batch of per-run analyses is taken to keep busy (Spark's
#: local executor and pyplot in this process).
ANALYSIS_CPU = 1.0
#: Order of the scheduler (lower first): a batch of per-run analyses (its runs reach the index),
#: the runs that must run alone, a paper's analysis, the runs that share the machine.
RANK_BATCH, RANK_ALONE, RANK_ANALYSIS, RANK_SHARED = 0, 1, 2, 3
#: Added to the cores measured on a run's node processes (``run_cpu``) for the controller's part
#: of the run (bring-up, the schedule, collection), which the node logs do not see: an assumption
#: (one paper's quick run: 0.3 core in all, the processes' CPU time as its experiments module
#: records it, against 0.2 in its node logs).
CONTROLLER_CPU = 0.1


#: The window over which a long run's cores are taken at their highest (``run_cpu``): a run whose
#: load grows as its clients join keeps less over its whole length than in its workload, so it is
#: counted by its busiest stretch and the budget keeps such runs apart by itself (measured:
#: docs/experiments.md, "CPU budget"). A run no longer than the window: its whole-run mean.
CPU_WINDOW_S = 20.0


def run_cpu(run_dir: str | Path) -> float | None:
    """The cores a finished run's node processes kept busy, from the ``cpu`` events of their logs
    (cumulative user + system CPU time, about once a second). A run whose bring-up and schedule
    (manifest ``up_s`` + ``schedule_s``) last at most ``CPU_WINDOW_S``: their CPU time summed over
    that span. A longer one: the highest mean over any ``CPU_WINDOW_S`` of it (the nodes' CPU time
    binned by second; ``peak_cores``). None when the run has no such events (or no manifest)."""
    d = Path(run_dir)
    try:
        m = json.loads((d / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    span = float(m.get("up_s") or 0.0) + float(m.get("schedule_s") or 0.0)
    if span <= 0:
        return None
    logs = sorted((d / "logs").glob("*.jsonl"))
    if span > CPU_WINDOW_S:
        series = [s for s in (_cpu_series(log) for log in logs) if s]
        return round(peak_cores(series, CPU_WINDOW_S), 3) if series else None
    total, seen = 0.0, False
    for log in logs:
        last = _last_cpu_event(log)
        if last is not None:
            total += float(last.get("user_s") or 0.0) + float(last.get("sys_s") or 0.0)
            seen = True
    return round(total / span, 3) if seen else None


def _cpu_series(log: Path) -> list[tuple[float, float]]:
    """[(t in s, CPU seconds so far)] of a node's ``cpu`` events, in log order."""
    out = []
    try:
        with log.open("rb") as f:
            for line in f:
                if b'"ev":"cpu"' in line:
                    try:
                        r = json.loads(line)
                        out.append((float(r["t"]) / 1e9, float(r.get("user_s") or 0.0) + float(r.get("sys_s") or 0.0)))
                    except (ValueError, KeyError, TypeError):
                        continue
    except OSError:
        return []
    return out


def peak_cores(series: list[list[tuple[float, float]]], window_s: float) -> float:
    """The highest mean cores over any ``window_s`` of the nodes' CPU, each node's cumulative series
    ``[(t_s, cpu_s)]`` binned by second: each step's CPU time falls in the second its sample ends in
    (a node's first sample, its start-up, in its own second). Series shorter than the window: their
    whole span."""
    start = min(s[0][0] for s in series)
    bins: dict[int, float] = {}
    for s in series:
        prev = 0.0
        for t, c in s:
            k = int(t - start)
            bins[k] = bins.get(k, 0.0) + max(0.0, c - prev)
            prev = c
    n = max(bins) + 1
    per_s = [bins.get(i, 0.0) for i in range(n)]
    w = max(1, int(round(window_s)))
    if n <= w:
        return sum(per_s) / max(1.0, max(t for s in series for t, _ in s) - start)
    run = best = sum(per_s[:w])
    for i in range(w, n):
        run += per_s[i] - per_s[i - w]
        best = max(best, run)
    return best / w


def _last_cpu_event(log: Path) -> dict[str, Any] | None:
    """The last ``"ev":"cpu"`` record of a node's log, read from its end."""
    try:
        size = log.stat().st_size
        with log.open("rb") as f:
            tail = 16384
            while True:
                f.seek(max(0, size - tail))
                lines = f.read().splitlines()
                for line in reversed(lines[1:] if size > tail else lines):
                    if b'"ev":"cpu"' in line:
                        try:
                            return json.loads(line)
                        except ValueError:
                            continue
                if tail >= size:
                    return None
                tail *= 4
    except OSError:
        return None


class Shared:
    """What the papers of one reproduction share: one Spark session (started at first use, by any
    thread; made the active session of every thread that asks for it, so ``api.analyze_runs`` in
    a worker thread reuses it and does not stop it) and the progress tally."""

    def __init__(self, spark_master: str | None, tally: Tally) -> None:
        import threading

        self.spark_master = spark_master
        self.tally = tally
        self.spark: Any = None
        self._lock = threading.Lock()
        self.stopping = threading.Event()  # set when the reproduction is interrupted

    def get_spark(self) -> Any:
        from testbed.analysis.session import activate, spark_session

        with self._lock:
            if self.spark is None:
                self.spark = spark_session(self.spark_master, app="testbed-reproduce")
        activate(self.spark)
        return self.spark

    def adopt(self) -> None:
        """In a worker thread: the session, if started, is this thread's active one too (code that
        asks ``getActiveSession()`` then reuses it instead of making and stopping its own)."""
        with self._lock:
            spark = self.spark
        if spark is not None:
            from testbed.analysis.session import activate

            activate(spark)

    def stop(self) -> None:
        if self.spark is not None:
            self.spark.stop()
            self.spark = None


class PaperWork:
    """One paper of a reproduction as scheduler items: its pending runs and computed entries, the
    batches of per-run analyses its made runs need, and its analysis (figures, claims, result
    files), which starts once every other item of the paper is done."""

    def __init__(self, paper: Paper, scale: str, figs: list[int] | None, out_dir: Path, *, runs_dir: str | None,
                 provider: str | None, progress: Progress, points: dict[str, Any] | None,
                 on_step: Callable[[dict[str, Any]], None] | None, shared: Shared, jobs: int | None) -> None:
        from testbed.runs.rundir import runs_root

        self.paper, self.scale, self.provider, self.points = paper, scale, provider, points
        self.progress, self.on_step, self.shared = progress, on_step, shared
        self.figs = figure_list(paper, figs)
        self.out_dir = Path(out_dir)
        self.out = self.out_dir / paper.name
        self.out.mkdir(parents=True, exist_ok=True)
        self.index, self.work, self.todo = pending(paper, scale, self.figs, self.out, provider, points)
        self.jobs = max(1, jobs if jobs is not None else paper.parallel_at(scale))  # its runs at a time
        self.stats: dict[str, Any] = {"points": len(self.work), "ran": 0, "reused": len(self.work) - len(self.todo),
                                      "run_s": 0.0, "jobs": self.jobs, "phases": {}}
        self.root = runs_root(runs_dir) / f"reproduce-{paper.name}-{scale}"
        self.root.mkdir(parents=True, exist_ok=True)
        self.waiting: list[tuple[Work, dict[str, Any], Any, float]] = []  # made runs to analyse in a batch
        self.started: list[int] = []  # indices into todo, in the order they started
        self.cctx = ComputeContext(paper=paper.name, scale=scale, provider=provider, jobs=self.jobs,
                                   runs_dir=runs_root(runs_dir), get_spark=shared.get_spark,
                                   stopping=shared.stopping.is_set, index=self.index)
        pending_ix = set(self.todo)
        for i, (w, _, _) in enumerate(self.work):  # what the entries taken from the index left in the memo
            if w.grid.restore is not None and i not in pending_ix:
                row = (self.index.get(w.key) or {}).get("row")
                if row is not None:
                    w.grid.restore(w.plan, row, self.cctx)
        self.cores: dict[str, list[float]] = {}  # grid -> cores measured per run (the index's, then ours)
        for w, _, _ in self.work:
            e = self.index.get(w.key) or {}
            if e.get("cpu_cores") is not None:
                self.cores.setdefault(w.grid.name, []).append(float(e["cpu_cores"]))
        self.t0: float | None = None
        self.t_runs: float | None = None
        self.t_end: float | None = None
        self.load_start: Any = None
        self.result: Path | None = None
        self.by_grid: dict[str, list[tuple[Item, Work]]] = {}  # its items, to re-cost as runs are measured

    # -- costs -----------------------------------------------------------------------------------
    def cpu_of(self, w: Work) -> float:
        """Cores one item of ``w``'s grid keeps busy: the mean measured on the grid's runs (this
        reproduction's or the index's), else the declared; a search making runs that many times
        the runs it makes at once; a pure computed entry a tenth of a core."""
        g = w.grid
        if g.compute is not None and not g.makes_runs:
            return 0.1
        xs = self.cores.get(g.name)
        one = sum(xs) / len(xs) + CONTROLLER_CPU if xs else self.paper.cpu_for(g, self.scale)
        return one * self.slots_of(w)

    def slots_of(self, w: Work) -> int:
        """Runs at a time the item counts for: a computed entry that makes runs the most it makes at
        once (``Grid.makes_runs``, at most the paper's jobs), any other one (a pure computed entry
        too: made one at a time when the paper makes runs one at a time)."""
        if self._makes_runs(w):
            return max(1, min(self.jobs, int(w.grid.makes_runs)))
        return 1

    @staticmethod
    def _makes_runs(w: Work) -> bool:
        return w.grid.compute is not None and bool(w.grid.makes_runs)

    def left(self) -> list[Cost]:
        done = set(self.started)
        return durations(self.work, [i for i in self.todo if i not in done])

    # -- items -----------------------------------------------------------------------------------
    def items(self) -> list[Item]:
        from testbed.experiments.schedule import Item

        out = []
        # the computed entries that make runs (searches and their samples) first: they run one after
        # another (exclusive, below), so behind the grids' runs their chain is the paper's longest
        # path (a paper-scale wait search: 3-5 probe pairs of up to 15 min); the runs fill the
        # slots beside it. A pure computed entry keeps its place.
        chain = sorted(range(len(self.todo)), key=lambda k: not self._makes_runs(self.work[self.todo[k]][0]))
        pos = {k: n for n, k in enumerate(chain)}
        for k, i in enumerate(self.todo):
            w = self.work[i][0]
            alone = self.paper.alone_for(w.grid, self.scale)
            entry: dict[str, Any] = {}
            out.append(item := Item(
                name=f"{self.paper.name}:{entry_name(Entry(w.grid.name, self.work[i][1], self.work[i][2], w.key))}",
                group=self.paper.name, cpu=self.cpu_of(w), alone=alone, slots=self.slots_of(w),
                kind="compute" if w.grid.compute is not None else "run",
                exclusive=f"compute:{self.paper.name}" if w.grid.compute is not None else "",
                rank=RANK_ALONE if alone else RANK_SHARED, order=pos[k] / len(self.todo),
                start=(lambda i=i, entry=entry: entry.update(self.announce(i))),
                do=(lambda w=w, entry=entry: self.compute(w, entry) if w.grid.compute is not None
                    else self.make(w, entry)),
                done=(lambda res, w=w, entry=entry: self.made(w, entry, res))))
            self.by_grid.setdefault(w.grid.name, []).append((item, w))
        out.append(Item(name=f"{self.paper.name}:analysis", group=self.paper.name, cpu=ANALYSIS_CPU, slots=0,
                        kind="analysis", exclusive="analysis", last=True, rank=RANK_ANALYSIS,
                        start=self.analysis_starts,
                        do=self.analyze, done=lambda res: None))
        return out

    def _begin(self) -> None:
        if self.t0 is None:
            from testbed.experiments import stamp as stamps

            self.t0 = time.monotonic()
            self.load_start = stamps.load_now()
            self.progress(f"{self.paper.name} ({self.scale}): {len(self.work)} runs needed, {self.stats['reused']} "
                          f"reused from the index, {len(self.todo)} to run"
                          + (f", {self.jobs} at a time" if self.jobs > 1 and self.todo else ""))

    def announce(self, i: int) -> dict[str, Any]:
        """The progress line and step of ``work[i]`` as it starts; its index entry so far."""
        self._begin()
        self.started.append(i)
        tally = self.shared.tally
        w, point, r = self.work[i]
        eta = tally.eta()
        tally.done += 1
        figs_of = self.paper.figures_of(w.grid.name)
        step = {"paper": self.paper.name, "figures": figs_of, "grid": w.grid.name, "point": point,
                "repeat": r, "repeats": w.grid.repeats_at(self.scale), "n": tally.done, "of": tally.total,
                "eta_s": round(eta, 1)}
        if self.on_step:
            self.on_step(step)
        what = ("Figs " + ",".join(map(str, figs_of))) if figs_of else "checks"
        pt = " ".join(f"{k}={v}" for k, v in sorted(point.items())) or "-"
        self.progress(f"{self.paper.name} {what} (grid {w.grid.name}) point {pt} repeat {r + 1}/"
                      f"{w.grid.repeats_at(self.scale)}: {tally.done}/{tally.total}, ETA {_fmt_s(eta)}")
        return {"grid": w.grid.name, "point": point, "repeat": r, "topology": w.path.name, "set": w.set_vars}

    # -- in a worker thread ----------------------------------------------------------------------
    def make(self, w: Work, entry: dict[str, Any]) -> tuple[Any, float, float | None]:
        """One run, up to teardown; returns it, its wall time and the cores its nodes kept busy."""
        from testbed import api

        t = time.monotonic()
        rd = _run_once_more_on_error(api, w, self.root, self.progress, entry, self.shared.stopping.is_set)
        if self.shared.stopping.is_set():  # stopped from outside while being made: not a finished run
            rd.update_manifest(status="interrupted")
            raise KeyboardInterrupt(f"{rd.path.name}: stopped by the interrupt")
        return rd, time.monotonic() - t, run_cpu(rd.path)

    def compute(self, w: Work, entry: dict[str, Any]) -> tuple[None, float, None]:
        self.shared.adopt()
        t = time.monotonic()
        entry["row"] = w.grid.compute(w.plan, self.cctx)
        if self.shared.stopping.is_set():  # computed while the reproduction stopped (from cut runs?): not kept
            raise KeyboardInterrupt(f"a computed entry of {w.grid.name}: stopped by the interrupt")
        return None, time.monotonic() - t, None

    # -- in the scheduling thread ----------------------------------------------------------------
    def made(self, w: Work, entry: dict[str, Any], res: tuple[Any, float, float | None]) -> list[Item]:
        """Record a made run or computed entry; a run its grid wants analysed waits for a batch,
        which becomes an item once ANALYZE_BATCH wait or no other run of the paper is left."""
        rd, dt, cores = res
        if cores is not None:
            entry["cpu_cores"] = cores
            self.cores.setdefault(w.grid.name, []).append(cores)
            for item, wi in self.by_grid.get(w.grid.name, []):  # the grid's items not started yet cost what was measured
                item.cpu = self.cpu_of(wi)
        self.t_runs = time.monotonic()  # the last made so far
        if rd is not None and w.grid.analyze:
            self.waiting.append((w, entry, rd, dt))
        else:
            self.record(w, entry, rd, dt)
        if self.waiting and (len(self.waiting) >= ANALYZE_BATCH or self._all_made()):
            return [self.batch_item()]
        return []

    def _all_made(self) -> bool:
        return len(self.started) == len(self.todo) and self.shared.running_runs(self.paper.name) == 0

    def batch_item(self) -> Item:
        from testbed.experiments.schedule import Item

        batch = self.waiting[:]
        self.waiting.clear()

        def run() -> float:
            t = time.monotonic()
            self.shared.get_spark()
            from testbed import api

            if len(batch) > 1:
                self.progress(f"{self.paper.name}: analysing {len(batch)} runs at once")
            api.analyze_runs([str(rd.path) for _, _, rd, _ in batch], spark_master=self.shared.spark_master)
            return (time.monotonic() - t) / len(batch)

        def done(share: float) -> None:
            for w, entry, rd, dt in batch:
                self.record(w, entry, rd, dt + share)

        return Item(name=f"{self.paper.name}:analyse {len(batch)} runs", group=self.paper.name, cpu=ANALYSIS_CPU,
                    slots=0, kind="analysis", exclusive="analysis", rank=RANK_BATCH, do=run, done=done)

    def record(self, w: Work, entry: dict[str, Any], rd: Any, dt: float) -> None:
        """Record a made (and, if its grid wants it, analysed) run, or a computed entry, in the index."""
        if rd is not None:
            entry["run"] = str(rd.path)
            self.shared.tally.measured[w.grid.analyze].append(max(0.0, dt - w.plan.duration_s))
            from testbed.faults.schedule import settle_s

            entry["phases"] = run_phases(rd.manifest, settle_s(w.plan), w.plan.duration_s, dt)
            g = self.stats["phases"].setdefault(w.grid.name, {"runs": 0, "wall_s": 0.0})
            g["runs"] += 1
            g["wall_s"] = round(g["wall_s"] + dt, 2)
            for k, v in entry["phases"].items():
                g[k] = round(g.get(k, 0.0) + v, 2)
        entry["elapsed_s"] = round(dt, 2)
        entry["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.stats["ran"] += 1
        self.stats["run_s"] += dt
        self.index.put(w.key, entry)

    def analysis_starts(self) -> None:
        self._begin()
        if self.t_runs is None:
            self.t_runs = time.monotonic()

    # -- the paper's analysis (a worker thread) --------------------------------------------------
    def entries(self) -> dict[str, list[Entry]]:
        by_grid: dict[str, list[Entry]] = {g.name: [] for g in self.paper.grids_for(self.figs)}
        todo = set(self.todo)
        for i, (w, point, r) in enumerate(self.work):
            e = self.index.get(w.key) or {}
            by_grid[w.grid.name].append(Entry(w.grid.name, point, r, w.key,
                                              Path(e["run"]) if e.get("run") else None, e.get("row"),
                                              reused=i not in todo))
        return by_grid

    def analyze(self) -> Path:
        """The paper's ``analyze`` over its finished runs, then its result files."""
        self.shared.adopt()
        paper, stats = self.paper, self.stats
        stats["run_s"] = round(stats["run_s"], 1)
        entries = self.entries()
        t1 = time.monotonic()
        ctx = Context(paper, self.scale, self.figs, self.out, entries, self.progress, self.shared.spark_master,
                      get_spark=self.shared.get_spark)
        paper.analyze(ctx)
        self.t_end = time.monotonic()
        t0 = self.t0 if self.t0 is not None else t1
        self.result = write_result(self, ctx, entries, runs_s=(self.t_runs or t1) - t0, analysis_s=self.t_end - t1,
                                   total_s=self.t_end - t0)
        return self.result


def write_result(pw: PaperWork, ctx: Context, entries: dict[str, list[Entry]], *, runs_s: float,
                 analysis_s: float, total_s: float) -> Path:
    """``<out>/<paper>/result.json``, ``claims.json``, ``checks.json``, ``report.md``; the paper's wall
    time and phases printed."""
    from testbed.experiments import report
    from testbed.experiments import stamp as stamps

    paper, stats, out, scale, figs = pw.paper, pw.stats, pw.out, pw.scale, pw.figs
    evidence = figure_evidence(ctx, entries)
    loads = figure_loads(paper, figs, entries)
    timings = {"runs_s": round(runs_s, 1), "analysis_s": round(analysis_s, 1),
               "total_s": round(total_s, 1)}
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    used = [pw.index.get(e.key) or {} for es in entries.values() for e in es]
    runs = [e.run for es in entries.values() for e in es if e.run is not None]
    stamp = stamps.stamp(scale=scale, figures=figs, wall_s=timings["total_s"], load_runs=load_evidence(runs),
                         load_start=pw.load_start, runs_elapsed_s=sum(float(u.get("elapsed_s") or 0) for u in used),
                         provider=pw.provider, jobs=stats.get("jobs"), points_filter=pw.points, date=created)
    result = {
        "paper": paper.name, "title": paper.title, "scale": scale, "figures": figs, "stamp": stamp,
        "points_filter": pw.points or {}, "notes": paper.notes,
        "created": created,
        "timings": timings, "stats": stats,
        "figure_info": [{"number": f.number, "title": f.title, "paper": f.paper,
                         "image": ctx.figures.get(f.number), "more_images": ctx.figure_parts.get(f.number, []),
                         "references": [dataclasses.asdict(r) for r in f.references],
                         **({"load": loads[f.number]} if f.number in loads else {})}
                        for f in paper.figures if f.number in figs],
        "claims": [_explained(paper, c, evidence) for c in ctx.claims],
        "summary": summary(ctx.claims),
        "checks": ctx.checks,
        "numbers": ctx.numbers,
        "runs": [{"name": entry_name(e), "grid": e.grid, "point": e.point, "repeat": e.repeat,
                  "run": str(e.run) if e.run else None, "reused": e.reused}
                 for es in entries.values() for e in es],
    }
    from testbed.experiments.claims import _json

    # no path of this machine in what is written: run directories relative to the reproduction
    # directory (where REPORT.md is), so a reproduction moved or shipped with its runs still reads
    result = relative_paths(_json(result), pw.out_dir)
    (out / "result.json").write_text(json.dumps(_json(result), indent=1, default=str))
    (out / "claims.json").write_text(json.dumps(_json(stamps.claims_document(result)), indent=1))
    (out / "checks.json").write_text(json.dumps(_json(result["checks"]), indent=1, default=str))
    (out / "report.md").write_text(report.paper_markdown(_json(result), link_prefix=""))
    wait_s = timings["total_s"] - timings["runs_s"] - timings["analysis_s"]
    pw.progress(f"{paper.name}: {len(ctx.claims)} claims, {len(ctx.checks)} checks, "
                f"{stats['ran']} runs made, {stats['reused']} reused ({timings['total_s']} s)")
    pw.progress(f"{paper.name}: wall time {timings['total_s']:.0f} s = runs and computed entries "
                f"{timings['runs_s']:.0f} s + analysis {timings['analysis_s']:.0f} s"
                + (f" + waiting for the analysis's turn {wait_s:.0f} s" if wait_s >= 1 else "")
                + "; the runs made, by grid (seconds per phase, summed over runs"
                + (f", {stats['jobs']} made at a time" if stats["jobs"] > 1 else "")
                + "):" + ("\n" + phase_line(stats["phases"]) if stats["phases"] else " none"))
    return out / "result.json"


def machine_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class Scheduled:
    """What :func:`reproduce_papers` did: per paper its result (or its error) and times."""

    wall_s: float
    budget: float
    jobs: int | None
    papers: dict[str, dict[str, Any]]
    failed: dict[str, BaseException]


def reproduce_papers(chosen: list[Paper], scale: str, figs: list[int] | None, out_dir: Path, *,
                     runs_dir: str | None = None, provider: str | None = None, progress: Progress = lambda s: None,
                     points: dict[str, Any] | None = None, on_step: Callable[[dict[str, Any]], None] | None = None,
                     spark_master: str | None = None, jobs: int | None = None,
                     budget: float | None = None) -> Scheduled:
    """Every chosen paper's pending runs, computed entries and analyses in one scheduler pool
    (:mod:`testbed.experiments.schedule`): runs marked alone one at a time with nothing beside them,
    the others together within ``budget`` cores (default: the machine's) and each paper's
    ``parallel`` (``jobs``: at most that many runs at a time in all, and per paper); a paper's
    analysis as soon as its runs are done, in one Spark session. One paper's failure costs only its
    own pending work."""
    from testbed import api
    from testbed.errors import UsageError
    from testbed.experiments.grid import SCALES
    from testbed.experiments.schedule import Pool, execute

    if scale not in SCALES:
        raise UsageError(f"unknown scale {scale!r} ({' or '.join(SCALES)})")
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: at least 1")
    if budget is not None and budget <= 0:
        raise UsageError(f"--cpu-budget {budget}: more than 0 cores")
    budget = float(budget if budget is not None else machine_cores())
    t0 = time.monotonic()
    tally = Tally()
    shared = Shared(spark_master, tally)
    works = [PaperWork(p, scale, figs, out_dir, runs_dir=runs_dir, provider=provider, progress=progress,
                       points=points, on_step=on_step, shared=shared, jobs=jobs) for p in chosen]
    tally.total = sum(len(pw.todo) for pw in works)
    pool = Pool()
    for pw in works:
        pool.add(pw.items())

    def running_runs(group: str) -> int:
        return sum(1 for i in pool.running if i.group == group and i.kind != "analysis")

    def eta() -> float:
        """Seconds left: the alone papers' runs one after the other, the others' divided by the runs
        that fit at once (the budget over their cores, at most the sum of their runs at a time)."""
        alone, shared_s, cores, at_once = 0.0, 0.0, [], 0
        for pw in works:
            left = pw.left()
            if not left:
                continue
            s = eta_s(left, tally.measured)
            if pw.paper.alone:
                alone += s
            else:
                shared_s += s
                cores += [pw.cpu_of(w) for w, _, _ in pw.work if w.grid.compute is None][:1]
                at_once += pw.jobs
        if shared_s:
            per = max(0.05, sum(cores) / len(cores)) if cores else 1.0
            k = max(1.0, min(float(jobs or at_once), budget / per, float(at_once)))
            shared_s /= k
        return alone + shared_s

    shared.running_runs = running_runs  # type: ignore[attr-defined]
    tally.eta = eta  # type: ignore[method-assign]
    caps = {pw.paper.name: pw.jobs for pw in works}
    by_name = {pw.paper.name: pw for pw in works}
    progress(f"reproduce ({scale}): {tally.total} runs to make in {len(works)} paper(s), by a budget of "
             f"{budget:g} cores" + (f", --jobs {jobs}" if jobs else "")
             + (f"; alone (nothing beside them): {', '.join(p.name for p in chosen if p.alone)}"
                if any(p.alone for p in chosen) else ""))

    def on_fail(item, e: BaseException) -> None:
        progress(f"{item.group}: FAILED ({item.name}): {type(e).__name__}: {e}")

    def on_interrupt(running) -> None:
        shared.stopping.set()  # a run failing because it was stopped is not tried again
        for g in sorted({i.group for i in running if i.kind != "analysis"}):
            progress(f"stopping the run(s) of {g} being made")
            try:
                api.down(all_runs=True, runs_dir=str(by_name[g].root))
            except Exception as e:  # noqa: BLE001 - the runs' own teardown still runs in their threads
                progress(f"  stopping them: {type(e).__name__}: {e}")
        api.stop_schedules()  # their threads stop waiting for the planned end and tear the runs down

    try:
        with _sigterm_interrupts():
            failed = execute(pool, budget=budget, jobs=jobs, caps=caps, on_fail=on_fail, on_interrupt=on_interrupt)
    finally:
        shared.stop()
    wall = time.monotonic() - t0
    papers_out = {}
    for pw in works:
        d: dict[str, Any] = {"result": str(pw.result) if pw.result else None,
                             "runs_made": pw.stats["ran"], "reused": pw.stats["reused"]}
        if pw.t0 is not None:
            d["start_s"] = round(pw.t0 - t0, 1)
            if pw.t_runs is not None:
                d["runs_done_s"] = round(pw.t_runs - t0, 1)
            if pw.t_end is not None:
                d["end_s"] = round(pw.t_end - t0, 1)
                d["wall_s"] = round(pw.t_end - pw.t0, 1)
        if pw.paper.name in failed:
            e = failed[pw.paper.name]
            d["failed"] = f"{type(e).__name__}: {e}"
        papers_out[pw.paper.name] = d
    return Scheduled(wall_s=round(wall, 1), budget=budget, jobs=jobs, papers=papers_out, failed=failed)


def reproduce_paper(paper: Paper, scale: str, figs: list[int] | None, out_dir: Path, *,
                    runs_dir: str | None = None, provider: str | None = None,
                    progress: Progress = lambda s: None, points: dict[str, Any] | None = None,
                    on_step: Callable[[dict[str, Any]], None] | None = None,
                    spark_master: str | None = None, jobs: int | None = None,
                    budget: float | None = None) -> Path:
    """Run and analyse one paper (the same scheduler, one paper in it); returns ``<out>/<paper>/result.json``."""
    s = reproduce_papers([paper], scale, figs, out_dir, runs_dir=runs_dir, provider=provider, progress=progress,
                         points=points, on_step=on_step, spark_master=spark_master, jobs=jobs, budget=budget)
    if paper.name in s.failed:
        raise s.failed[paper.name]
    return Path(s.papers[paper.name]["result"])
