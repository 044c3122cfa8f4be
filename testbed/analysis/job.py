"""``analyze(run_dir)``: the one entry point of the analysis (``testbed analyze RUN_DIR`` calls it).

Phases: validate the run directory -> ingest (Parquet per event type) -> the
protocol's registered checks -> metrics -> figures -> report. It reads the run
directory only and writes only under ``<run>/analysis/``, so a run can be
re-analysed at any time.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from testbed.errors import AnalysisError

if TYPE_CHECKING:
    from testbed.analysis.checks import CheckResult

Progress = Callable[[str], None]


@dataclass
class AnalysisResult:
    run_dir: Path
    report: Path
    figures: list[Path]
    checks: list[Any]  # CheckResult
    metrics: dict[str, Any] = field(default_factory=dict)
    ingest: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    report_html: Path | None = None

    @property
    def ok(self) -> bool:
        """All checks passed."""
        return all(c.passed for c in self.checks)


def validate_run_dir(run_dir: str | Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """-> (path, plan dict, manifest dict), or AnalysisError naming what is wrong."""
    p = Path(run_dir)
    if not p.is_dir():
        raise AnalysisError(f"{p}: no such run directory")
    plan_p = p / "plan.json"
    if not plan_p.exists():
        raise AnalysisError(f"{p}: not a run directory (no plan.json)")
    plan = _json(plan_p)
    try:
        from testbed.topology.plan import Plan

        Plan.from_dict(plan)
    except Exception as e:  # noqa: BLE001 - any shape problem is a bad run dir
        raise AnalysisError(f"{plan_p}: not a valid plan ({type(e).__name__}: {e})") from None
    man_p = p / "manifest.json"
    manifest = _json(man_p) if man_p.exists() else {}
    if not isinstance(manifest, dict):
        raise AnalysisError(f"{man_p}: expected a JSON object")
    logs = p / "logs"
    if not logs.is_dir() or not any(logs.glob("*.jsonl")):
        raise AnalysisError(f"{logs}: no event logs (*.jsonl) to analyse")
    return p.resolve(), plan, manifest


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise AnalysisError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except OSError as e:
        raise AnalysisError(f"{path}: cannot read ({e.strerror})") from None


def run_checks(ctx) -> Iterator[tuple[CheckResult, float]]:
    """Every check of the run's protocol (``checks_for``) and the runtime-wide ones, in order, each
    with its seconds. A checker that raises fails its own check ("the checker itself failed"), not
    the analysis."""
    from testbed.analysis import runtime_checks
    from testbed.registry import checks_for

    yield from run_checks_of(ctx, checks_for(ctx.protocol) + runtime_checks.checks_of(ctx.plan, ctx.manifest))


def run_checks_of(ctx, checks: list) -> Iterator[tuple[CheckResult, float]]:
    """``checks`` on ``ctx``, each with its seconds (a checker that raises fails its own check)."""
    from testbed.analysis.checks import CheckResult

    for chk in checks:
        t = time.monotonic()
        try:
            r = chk(ctx)
        except Exception as e:  # noqa: BLE001 - a broken checker fails its check, not the analysis
            r = CheckResult(name=getattr(chk, "__name__", str(chk)).removeprefix("check_"), passed=False,
                            violations=0, description="the checker itself failed",
                            details={"error": f"{type(e).__name__}: {e}"})
        yield r, time.monotonic() - t


def analyze(run_dir: str | Path, *, spark_master: str | None = None, progress: Progress = print,
            spark=None, settle_s: float | None = None, travel_margin_s: float | None = None,
            fault_margin_s: float | None = None, reuse: bool = True) -> AnalysisResult:
    """Analyse one run directory; returns paths and check results (``.ok``: every check passed).

    ``reuse``: an unchanged run's stored Parquet is read instead of its logs (see ``ingest``).
    """
    from testbed.analysis.checks import CheckResult
    from testbed.analysis.context import AnalysisContext, AnalysisOptions
    from testbed.analysis.ingest import ingest
    from testbed.analysis.metrics import compute_metrics
    from testbed.analysis.report import write_json
    from testbed.analysis.session import spark_session

    t_start = time.monotonic()
    path, plan, manifest = validate_run_dir(run_dir)
    out = path / "analysis"
    out.mkdir(exist_ok=True)
    opts = AnalysisOptions(settle_s=settle_s)
    if travel_margin_s is not None:
        opts.travel_margin_s = travel_margin_s
    if fault_margin_s is not None:
        opts.fault_margin_s = fault_margin_s

    own = spark is None
    if own:
        from pyspark.sql import SparkSession

        from testbed.analysis.session import resolve_master

        progress(f"analysis: starting Spark ({resolve_master(spark_master)})")
        own = SparkSession.getActiveSession() is None
        spark = spark_session(spark_master, app=f"testbed-analyze-{path.name}")
    ctx = None
    try:
        from testbed.analysis.session import tune_for_input

        tune_for_input(spark, sum(p.stat().st_size for p in (path / "logs").glob("*.jsonl")))
        t = time.monotonic()
        events = ingest(spark, path, reuse=reuse)
        rep = events.report
        write_json(out / "ingest.json", rep.to_dict())
        how = "reused the stored Parquet (logs unchanged, no JSON parsed)" if rep.reused else "converted to Parquet"
        progress(f"ingest: {rep.files} logs, {sum(rep.events.values())} events of {len(rep.events)} types, "
                 f"{rep.malformed} malformed line(s), {sum(rep.unknown.values())} unknown; {how} "
                 f"({time.monotonic() - t:.1f} s)")

        ctx = AnalysisContext.build(spark, path, plan, manifest, events, opts)
        from testbed.analysis import runtime_checks

        results: list[CheckResult] = []
        for r, dt in run_checks(ctx):
            results.append(r)
            progress(_check_line(r, dt))

        t = time.monotonic()
        metrics = compute_metrics(ctx)
        metrics["events"] = dict(rep.events)
        metrics["rejected"] = runtime_checks.rejected_summary(ctx)
        progress(f"metrics: {len(metrics['latency'])} site pair(s), {len(metrics['faults'])} fault(s) "
                 f"({time.monotonic() - t:.1f} s)")

        return _outputs(ctx, rep, results, metrics, progress, t_start)
    finally:
        if ctx is not None:
            ctx.release()  # what the checks and metrics persisted (a batch session goes on)
        if own:
            spark.stop()


def _outputs(ctx, rep, results: list, metrics: dict[str, Any], progress: Progress, t_start: float) -> AnalysisResult:
    """Figures, checks.json, metrics.json and the reports of one analysed run."""
    from testbed.analysis.figures import draw_all
    from testbed.analysis.gantt import fault_timeline
    from testbed.analysis.report import render_report, write_json
    from testbed.analysis.report_html import render_report_html

    path, plan, manifest = ctx.run_dir, ctx.plan, ctx.manifest
    out = path / "analysis"
    t = time.monotonic()
    figs = draw_all(ctx, metrics, out / "figures")
    tl = fault_timeline(metrics, out / "figures" / "fault_timeline.png", plan.get("duration_s"))
    if tl is not None:
        figs.append(tl)
    from testbed.analysis import capacity, runtime_checks

    if capacity.check_cpu_share in runtime_checks.checks_of(plan, manifest):  # a limit or a throttle
        series = capacity.cpu_series(plan, manifest, capacity.cpu_rows(ctx))
        ts = [p["t_s"] for pts in series.values() for p in pts] or [0.0]
        cpu = capacity.cpu_figure(series, metrics.get("faults") or [], out / "figures" / "cpu.png",
                                  steps=capacity.share_steps(plan, manifest, min(ts), max(ts)))
        if cpu is not None:
            figs.append(cpu)
    progress(f"figures: {len(figs)} written to {out / 'figures'} ({time.monotonic() - t:.1f} s)")

    checks_d = [r.to_dict() for r in results]
    write_json(out / "checks.json", {"run_id": path.name, "ok": all(r.passed for r in results),
                                     "checks": checks_d})
    write_json(out / "metrics.json", metrics)
    md = render_report(run_id=path.name, plan=plan, manifest=manifest, ingest=rep.to_dict(),
                       checks=checks_d, metrics=metrics, figures=figs, out_dir=out)
    report = out / "report.md"
    report.write_text(md)
    html = out / "report.html"
    html.write_text(render_report_html(run_id=path.name, plan=plan, manifest=manifest, ingest=rep.to_dict(),
                                       checks=checks_d, metrics=metrics, figures=figs))
    res = AnalysisResult(path, report, figs, results, metrics, rep.to_dict(), time.monotonic() - t_start, html)
    progress(f"report: {report} and {html.name} ({'all checks passed' if res.ok else 'CHECKS FAILED'}, "
             f"{res.seconds:.1f} s total)")
    return res


def _check_line(r, dt: float | None) -> str:
    extra = f", {r.attributed} attributed to faults" if r.attributed else ""
    err = f" (checker error: {r.details['error']})" if "error" in r.details else ""
    when = "batched" if dt is None else f"{dt:.1f} s"
    return f"check {r.name}: {'PASS' if r.passed else 'FAIL'} ({r.violations} violation(s){extra}, {when}){err}"


def analyze_batch(run_dirs: list[str | Path], *, spark, progress: Progress = print, reuse: bool = True,
                  settle_s: float | None = None, travel_margin_s: float | None = None,
                  fault_margin_s: float | None = None) -> list[AnalysisResult]:
    """Analyse many runs in one session, the checks every run shares and the metrics computed once
    over all of them (``batch_checks``): each run's outputs equal its analysis alone (``analyze``).

    The protocols' batch parts (each check for the runs whose protocol lists it), ``control_provenance`` and
    the metrics are a fixed number of Spark jobs for the whole batch; a protocol's own checks and
    figures still run per run, on that run's own context.
    """
    from testbed.analysis import runtime_checks
    from testbed.analysis.batch_checks import Batch, batched
    from testbed.analysis.checks import CheckResult
    from testbed.analysis.context import AnalysisContext, AnalysisOptions
    from testbed.analysis.ingest import ingest
    from testbed.analysis.report import write_json
    from testbed.analysis.session import tune_for_input
    from testbed.registry import checks_for

    valid = [validate_run_dir(d) for d in run_dirs]
    names = [p.name for p, _, _ in valid]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise AnalysisError(f"two runs named {dup[0]!r} in one batch (run directory names must be unique)")
    opts = AnalysisOptions(settle_s=settle_s)
    if travel_margin_s is not None:
        opts.travel_margin_s = travel_margin_s
    if fault_margin_s is not None:
        opts.fault_margin_s = fault_margin_s
    tune_for_input(spark, sum(f.stat().st_size for p, _, _ in valid for f in (p / "logs").glob("*.jsonl")))

    ctxs: dict[str, AnalysisContext] = {}
    reps: dict[str, Any] = {}
    batch = None
    t_ingest = time.monotonic()
    try:
        for path, plan, manifest in valid:
            (path / "analysis").mkdir(exist_ok=True)
            t = time.monotonic()
            events = ingest(spark, path, reuse=reuse)
            rep = reps[path.name] = events.report
            write_json(path / "analysis" / "ingest.json", rep.to_dict())
            how = "reused the stored Parquet" if rep.reused else "converted to Parquet"
            progress(f"ingest {path.name}: {rep.files} logs, {sum(rep.events.values())} events; {how} "
                     f"({time.monotonic() - t:.1f} s)")
            ctxs[path.name] = AnalysisContext.build(spark, path, plan, manifest, events, opts)
        progress(f"ingest: {len(reps)} runs, {sum(sum(r.events.values()) for r in reps.values())} events, "
                 f"{sum(1 for r in reps.values() if r.reused)} reused the stored Parquet "
                 f"({time.monotonic() - t_ingest:.1f} s)")
        batch = Batch(spark, ctxs, progress)
        batch.run()
        BATCHED = batched()
        out = []
        for i, (rid, ctx) in enumerate(ctxs.items()):
            t_run = time.monotonic()
            progress(f"analysis [{i + 1}/{len(ctxs)}]: {ctx.run_dir}")
            results: list[CheckResult] = []
            ctx.results.update(batch.shared.get(rid, {}))  # e.g. what the metrics' per-fault counts read
            for chk in checks_for(ctx.protocol) + runtime_checks.checks_of(ctx.plan, ctx.manifest):
                name = BATCHED.get(chk)
                if name is not None and name in batch.results[rid]:
                    r, dt = batch.results[rid][name], None
                else:
                    r, dt = next(run_checks_of(ctx, [chk]))
                results.append(r)
                progress(_check_line(r, dt))
            metrics = batch.metrics.get(rid)
            if metrics is None:  # the batched metrics failed: this run's alone
                from testbed.analysis.metrics import compute_metrics

                metrics = compute_metrics(ctx)
                metrics["rejected"] = runtime_checks.rejected_summary(ctx)
            metrics["events"] = dict(reps[rid].events)
            ctx.results["metrics"] = metrics
            out.append(_outputs(ctx, reps[rid], results, metrics, progress, t_run))
        return out
    finally:
        if batch is not None:
            batch.release()
        for c in ctxs.values():
            c.release()
