"""Run a paper's grids (the only place that calls ``testbed.api`` to run points), then analyse.

``reproduce_paper`` enumerates every (grid, point, repeat) the chosen figures need, reuses what
the run index has, runs the rest one by one with a progress line per run (figure, point, repeat,
ETA), then hands the finished runs to the paper's ``analyze(ctx)``. ``analyze`` reads run
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
from typing import Any, Callable, Iterator

from testbed.experiments import topologies
from testbed.experiments.claims import Claim, summary
from testbed.experiments.grid import Grid, Paper, figure_list, matches
from testbed.experiments.index import RunIndex, code_version, run_finished, run_key

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


def entry_name(e: Entry) -> str:
    pt = ",".join(f"{k}={v}" for k, v in sorted(e.point.items()))
    return f"{e.grid}/{pt or '-'}/r{e.repeat}"


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
    later: list[Cost] = field(default_factory=list)  # the runs of the papers not started yet
    measured: dict[bool, list[float]] = field(default_factory=lambda: {True: [], False: []})  # overheads


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
#: Made runs analysed together (``api.analyze_runs``: the checks every run shares and the metrics
#: one set of Spark jobs for the batch, ~1 s per small run instead of ~3 s alone; docs/analysis.md).
#: A run is in the run index once analysed, so an interrupted reproduction makes at most this
#: many runs again when resumed.
ANALYZE_BATCH = 8


def _run_once_more_on_error(api, w, root: Path, progress: Progress, entry: dict[str, Any]):
    from testbed.errors import TestbedError

    for attempt in range(1, RUN_ATTEMPTS):
        try:
            return api.run_one(w.plan, str(w.path), w.set_vars, root, lambda s: None, lambda e: None)
        except TestbedError as e:
            entry.setdefault("failed_attempts", []).append({"error": f"{type(e).__name__}: {e}"})
            progress(f"  the run failed ({type(e).__name__}: {e}); trying it again ({attempt + 1}/{RUN_ATTEMPTS})")
    return api.run_one(w.plan, str(w.path), w.set_vars, root, lambda s: None, lambda e: None)


def _make_in_parallel(jobs: int, ws: list[Work], announce, make, finish, compute, root: Path,
                      progress: Progress) -> None:
    """Make the runs ``jobs`` at a time in worker threads; computed entries, analyses and the
    index in this thread, in the order the runs finish. An interrupt (Ctrl-C, SIGTERM) starts no
    new run and stops the runs being made (`testbed down` of this reproduction's active runs);
    their threads end with their own teardown before the interrupt goes on."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="run")
    running: dict[Any, tuple[Work, dict[str, Any]]] = {}
    n = 0
    try:
        while n < len(ws) or running:
            while n < len(ws) and len(running) < jobs:
                w, entry = ws[n], announce(n)
                n += 1
                if w.grid.compute is not None:
                    compute(w, entry)
                else:
                    running[pool.submit(make, w, entry)] = (w, entry)
            if not running:
                continue
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in done:
                w, entry = running.pop(fut)
                finish(w, entry, *fut.result())
    except BaseException:
        if running:
            from testbed import api

            progress(f"stopping the {len(running)} run(s) being made")
            try:
                api.down(all_runs=True, runs_dir=str(root))
            except Exception as e:  # the runs' own teardown still runs in their threads
                progress(f"  stopping them: {type(e).__name__}: {e}")
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class ComputeContext:
    """What a computed grid entry is given, ``Grid.compute(plan, ctx)``: what it may need of the
    reproduction making it, explicitly (no module state, no context variables).

    ``jobs``: runs this reproduction makes at a time (a computed entry that makes runs of its own,
    e.g. a wait search, may make two at once when it is more than 1); ``runs_dir``: the root its
    runs go under (``--runs-dir``, else ``$TESTBED_RUNS``, else ./runs); ``memo``: shared by the
    paper's computed entries of this one reproduction (a search made once, reused by its samples);
    :meth:`spark`: the reproduction's Spark session, made on first use (and stopped with it);
    :meth:`run`: make one run, tried again once when it fails to come up, as the runner does."""

    paper: str = ""
    scale: str = "quick"
    provider: str | None = None
    jobs: int = 1
    runs_dir: Path = field(default_factory=lambda: _default_runs_root())
    memo: dict[str, Any] = field(default_factory=dict)
    get_spark: Callable[[], Any] | None = None

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
        from testbed import api
        from testbed.errors import TestbedError

        quiet = lambda *a: None  # noqa: E731
        for _ in range(1, RUN_ATTEMPTS):
            try:
                return Path(api.run_one(plan, path, set_vars, root, quiet, quiet).path)
            except TestbedError as e:
                if failed is not None:
                    failed.append({"error": f"{type(e).__name__}: {e}"})
        return Path(api.run_one(plan, path, set_vars, root, quiet, quiet).path)


def _default_runs_root() -> Path:
    from testbed.runs.rundir import runs_root

    return runs_root(None)


def run_grids(paper: Paper, scale: str, figs: list[int], out: Path, *, runs_dir: str | None,
              provider: str | None, progress: Progress, flt: dict[str, Any] | None = None,
              on_step: Callable[[dict[str, Any]], None] | None = None,
              spark_master: str | None = None, tally: Tally | None = None,
              session: dict[str, Any] | None = None, jobs: int | None = None,
              ) -> tuple[dict[str, list[Entry]], dict[str, Any]]:
    """Run what is missing; every entry the figures need, by grid; plus run statistics.

    Every run a grid analyses is analysed in one Spark session, started at the first such run.
    ``session``: a dict the session is left in (``session["spark"]``, not stopped) for the paper's
    analysis to go on with; without it the session is stopped here.
    ``jobs``: runs made at a time (default: the paper's ``parallel`` at this scale). With more than
    one, runs are brought up, driven and torn down in worker threads; the analyses, the index and
    the progress stay in this thread.
    """
    from testbed import api
    from testbed.runs.rundir import runs_root

    index, work, todo = pending(paper, scale, figs, out, provider, flt)
    if tally is None:
        tally = Tally(total=len(todo))
    jobs = max(1, jobs if jobs is not None else paper.parallel_at(scale))
    stats = {"points": len(work), "ran": 0, "reused": len(work) - len(todo), "run_s": 0.0, "jobs": jobs,
             "phases": {}}  # grid -> runs made, their wall time and its split (run_phases)
    progress(f"{paper.name} ({scale}): {len(work)} runs needed, {stats['reused']} reused from the index, "
             f"{len(todo)} to run" + (f", {jobs} at a time" if jobs > 1 and todo else ""))
    root = runs_root(runs_dir) / f"reproduce-{paper.name}-{scale}"
    root.mkdir(parents=True, exist_ok=True)
    measured = tally.measured
    spark = (session or {}).get("spark")
    by_grid: dict[str, list[Entry]] = {g.name: [] for g in paper.grids_for(figs)}

    def announce(n: int) -> dict[str, Any]:
        """The progress line and step of ``todo[n]``; its index entry so far."""
        w, point, r = work[todo[n]]
        eta = eta_s(durations(work, todo[n:]) + tally.later, measured) / jobs
        tally.done += 1
        figs_of = paper.figures_of(w.grid.name)
        step = {"paper": paper.name, "figures": figs_of, "grid": w.grid.name, "point": point,
                "repeat": r, "repeats": w.grid.repeats_at(scale), "n": tally.done, "of": tally.total,
                "eta_s": round(eta, 1)}
        if on_step:
            on_step(step)
        what = ("Figs " + ",".join(map(str, figs_of))) if figs_of else "checks"
        pt = " ".join(f"{k}={v}" for k, v in sorted(point.items())) or "-"
        progress(f"{paper.name} {what} (grid {w.grid.name}) point {pt} repeat {r + 1}/"
                 f"{w.grid.repeats_at(scale)}: {tally.done}/{tally.total}, ETA {_fmt_s(eta)}")
        return {"grid": w.grid.name, "point": point, "repeat": r, "topology": w.path.name, "set": w.set_vars}

    def make(w: Work, entry: dict[str, Any]) -> tuple[Any, float]:
        """One run, up to teardown (any thread); returns it and its wall time."""
        t = time.monotonic()
        return _run_once_more_on_error(api, w, root, progress, entry), time.monotonic() - t

    # made runs whose grid wants them analysed, waiting to be analysed together (one set of Spark
    # jobs for the batch: api.analyze_runs); recorded in the index only once analysed
    waiting: list[tuple[Work, dict[str, Any], Any, float]] = []

    def finish(w: Work, entry: dict[str, Any], rd: Any, dt: float) -> None:
        """Record a made run (this thread); one its grid wants analysed waits for the next batch."""
        if rd is not None and w.grid.analyze:
            waiting.append((w, entry, rd, dt))
            if len(waiting) >= ANALYZE_BATCH:
                analyze_waiting()
            return
        record(w, entry, rd, dt)

    def get_spark() -> Any:
        nonlocal spark
        if spark is None:
            from testbed.analysis.session import spark_session

            spark = spark_session(spark_master)
            if session is not None:
                session["spark"] = spark
        return spark

    def analyze_waiting() -> None:
        """Analyse the waiting runs in one batch; each run's share of its time counts as its own."""
        if not waiting:
            return
        batch = waiting[:]
        waiting.clear()
        t = time.monotonic()
        get_spark()
        if len(batch) > 1:
            progress(f"{paper.name}: analysing {len(batch)} runs at once")
        api.analyze_runs([str(rd.path) for _, _, rd, _ in batch], spark_master=spark_master)
        share = (time.monotonic() - t) / len(batch)
        for w, entry, rd, dt in batch:
            record(w, entry, rd, dt + share)

    def record(w: Work, entry: dict[str, Any], rd: Any, dt: float) -> None:
        """Record a made (and, if its grid wants it, analysed) run in the index (this thread)."""
        if rd is not None:
            entry["run"] = str(rd.path)
            measured[w.grid.analyze].append(max(0.0, dt - w.plan.duration_s))
            from testbed.faults.schedule import settle_s

            entry["phases"] = run_phases(rd.manifest, settle_s(w.plan), w.plan.duration_s, dt)
            g = stats["phases"].setdefault(w.grid.name, {"runs": 0, "wall_s": 0.0})
            g["runs"] += 1
            g["wall_s"] = round(g["wall_s"] + dt, 2)
            for k, v in entry["phases"].items():
                g[k] = round(g.get(k, 0.0) + v, 2)
        entry["elapsed_s"] = round(dt, 2)
        entry["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        stats["ran"] += 1
        stats["run_s"] += dt
        index.put(w.key, entry)

    cctx = ComputeContext(paper=paper.name, scale=scale, provider=provider, jobs=jobs, runs_dir=runs_root(runs_dir),
                          get_spark=get_spark)

    def compute(w: Work, entry: dict[str, Any]) -> None:
        t = time.monotonic()
        entry["row"] = w.grid.compute(w.plan, cctx)
        record(w, entry, None, time.monotonic() - t)

    try:
        with _sigterm_interrupts():
            if jobs == 1:
                for n, i in enumerate(todo):
                    w = work[i][0]
                    entry = announce(n)
                    if w.grid.compute is not None:
                        compute(w, entry)
                    else:
                        finish(w, entry, *make(w, entry))
            else:
                _make_in_parallel(jobs, [work[i][0] for i in todo], announce, make, finish, compute,
                                  root, progress)
            analyze_waiting()  # the last batch
    finally:
        if spark is not None and session is None:
            spark.stop()
    for i, (w, point, r) in enumerate(work):
        e = index.get(w.key) or {}
        by_grid[w.grid.name].append(Entry(w.grid.name, point, r, w.key,
                                          Path(e["run"]) if e.get("run") else None, e.get("row"),
                                          reused=i not in todo))
    stats["run_s"] = round(stats["run_s"], 1)
    return by_grid, stats


def load_evidence(run_dirs: list[Path]) -> dict[str, Any]:
    """The machine's load while these runs measured, from their manifests (``load_avg``: the
    1-minute load average when each workload ended): max, mean, the cores, how many runs had it."""
    ends, cpus = [], None
    for d in run_dirs:
        try:
            la = json.loads((Path(d) / "manifest.json").read_text()).get("load_avg") or {}
        except (OSError, ValueError):
            continue
        if la.get("end"):
            ends.append(float(la["end"][0]))
            cpus = la.get("cpus") or cpus
    if not ends:
        return {}
    return {"load_1m_max": max(ends), "load_1m_mean": sum(ends) / len(ends), "cpus": cpus,
            "load_runs": len(ends)}


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


def reproduce_paper(paper: Paper, scale: str, figs: list[int] | None, out_dir: Path, *,
                    runs_dir: str | None = None, provider: str | None = None,
                    progress: Progress = lambda s: None, points: dict[str, Any] | None = None,
                    on_step: Callable[[dict[str, Any]], None] | None = None,
                    spark_master: str | None = None, tally: Tally | None = None,
                    jobs: int | None = None) -> Path:
    """Run and analyse one paper; returns ``<out>/<paper>/result.json``."""
    from testbed.errors import UsageError
    from testbed.experiments import report
    from testbed.experiments.grid import SCALES

    if scale not in SCALES:
        raise UsageError(f"unknown scale {scale!r} ({' or '.join(SCALES)})")
    figs = figure_list(paper, figs)
    out = Path(out_dir) / paper.name
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    from testbed.experiments import stamp as stamps

    load_start = stamps.load_now()
    session: dict[str, Any] = {}  # one Spark session for the runs' analyses and the paper's
    try:
        entries, stats = run_grids(paper, scale, figs, out, runs_dir=runs_dir, provider=provider,
                                   progress=progress, flt=points, on_step=on_step, spark_master=spark_master,
                                   tally=tally, session=session, jobs=jobs)
    except BaseException:
        if session.get("spark") is not None:
            session["spark"].stop()
        raise
    t1 = time.monotonic()
    ctx = Context(paper, scale, figs, out, entries, progress, spark_master, _spark=session.get("spark"))
    try:
        paper.analyze(ctx)
    finally:
        if ctx._spark is not None:
            ctx._spark.stop()
    evidence = figure_evidence(ctx, entries)
    timings = {"runs_s": round(t1 - t0, 1), "analysis_s": round(time.monotonic() - t1, 1),
               "total_s": round(time.monotonic() - t0, 1)}
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    index = RunIndex(out / f"index-{scale}.json")
    used = [index.get(e.key) or {} for es in entries.values() for e in es]
    runs = [e.run for es in entries.values() for e in es if e.run is not None]
    stamp = stamps.stamp(scale=scale, figures=figs, wall_s=timings["total_s"], load_runs=load_evidence(runs),
                         load_start=load_start, runs_elapsed_s=sum(float(u.get("elapsed_s") or 0) for u in used),
                         provider=provider, jobs=stats.get("jobs"), points_filter=points, date=created)
    result = {
        "paper": paper.name, "title": paper.title, "scale": scale, "figures": figs, "stamp": stamp,
        "points_filter": points or {}, "notes": paper.notes,
        "created": created,
        "timings": timings, "stats": stats,
        "figure_info": [{"number": f.number, "title": f.title, "paper": f.paper,
                         "image": ctx.figures.get(f.number), "more_images": ctx.figure_parts.get(f.number, []),
                         "references": [dataclasses.asdict(r) for r in f.references]}
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
    result = relative_paths(_json(result), Path(out_dir))
    (out / "result.json").write_text(json.dumps(_json(result), indent=1, default=str))
    (out / "claims.json").write_text(json.dumps(_json(stamps.claims_document(result)), indent=1))
    (out / "checks.json").write_text(json.dumps(_json(result["checks"]), indent=1, default=str))
    (out / "report.md").write_text(report.paper_markdown(_json(result), link_prefix=""))
    progress(f"{paper.name}: {len(ctx.claims)} claims, {len(ctx.checks)} checks, "
             f"{stats['ran']} runs made, {stats['reused']} reused ({timings['total_s']} s)")
    progress(f"{paper.name}: wall time {timings['total_s']:.0f} s = runs and computed entries "
             f"{timings['runs_s']:.0f} s + analysis {timings['analysis_s']:.0f} s; the runs made, by grid "
             f"(seconds per phase, summed over runs" + (f", {stats['jobs']} made at a time" if stats["jobs"] > 1 else "")
             + "):" + ("\n" + phase_line(stats["phases"]) if stats["phases"] else " none"))
    return out / "result.json"
