"""The shared checks and the metrics of many runs at once: one set of Spark jobs for a whole batch.

``testbed analyze A B C ...`` (``api.analyze_runs``, ``job.analyze_batch``) analyses many small
runs in one session. Run by run, each analysis is some 26 small Spark jobs, each costing its
scheduling whatever the data. Here the checks many runs share -- each protocol's *batch part*
(``BATCH_PART`` of ``<protocol>.analysis.batch``, found through the registry: the pub/sub core's
``no_duplicates``, ``filter_match``, ``fifo``, ``completeness``, shared by every protocol built
on it) and the runtime's ``control_provenance`` -- and the metrics are computed once over every
run of the batch: the runs'
events are read as one DataFrame per event type (``batch.read_runs``: one scan, a ``run_id``
column), and the checks' own transforms run with ``by=("run_id",)``: every grouping, join and
window is keyed by the run too, so rows of different runs never meet (a null id stays null and
joins nothing, as in a run alone). What depends on a run's plan and manifest is per run: the
settle time and the workload's end are literal maps keyed by run, the fault windows a column
expression per run, and ``control_provenance`` is decided in Python per run on rows collected
once.

Each check's violations are counted and its examples chosen per run in one job (a window per
run, ordered as the run-alone check orders them). The result for a run equals its analysis
alone (``tests/unit/analysis/test_batch_checks.py``, on clean and broken runs), except where
Spark itself is approximate: the CDF's ``percentile_approx`` quantiles are exact only up to its
accuracy (10,000 values per site pair), which a small run's never exceed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from testbed.analysis import runtime_checks as R
from testbed.analysis.checks import MAX_EXAMPLES, CheckResult, _plain
from testbed.analysis.context import AnalysisContext
from testbed.analysis.metrics import latencies, latency_stats, metrics_of, per_second_series

BY = ("run_id",)
RUNTIME = {R.check_control_provenance: "control_provenance", R.check_node_lives: "node_lives"}


@dataclass(frozen=True)
class BatchPart:
    """A protocol's checks computed over many runs at once (``BATCH_PART`` of its
    ``analysis/batch.py``). ``checks``: check function -> the name its result carries; ``run(batch,
    runs)`` fills ``batch.results[run_id][name]`` for the runs in ``runs[name]`` (the runs whose
    protocol lists that check) and may leave per-run results for the metrics in
    ``batch.shared[run_id]`` (merged into each run's ``ctx.results``)."""

    name: str
    checks: dict[Callable[..., Any], str]
    run: Callable[["Batch", dict[str, list[str]]], None]


def parts() -> list[BatchPart]:
    """Every registered protocol's batch part (the registry finds ``<analysis>.batch:BATCH_PART``)."""
    from testbed.registry import batch_parts

    return batch_parts()


def batched() -> dict[Callable[..., Any], str]:
    """Every check computed by a batch: the protocols' parts' and the runtime's."""
    out: dict[Callable[..., Any], str] = {}
    for part in parts():
        out.update(part.checks)
    return {**out, **RUNTIME}


def per_run(df: DataFrame, order: list[str], n: int = MAX_EXAMPLES) -> dict[str, tuple[int, list[dict[str, Any]]]]:
    """One job: {run_id: (rows, the first ``n`` rows by ``order`` as the run-alone check's examples)}."""
    w = Window.partitionBy("run_id")
    rows = (df.withColumn("_n", F.count(F.lit(1)).over(w))
            .withColumn("_rk", F.row_number().over(w.orderBy(*order)))
            .where(F.col("_rk") <= n).collect())
    out: dict[str, tuple[int, list]] = {}
    for r in sorted(rows, key=lambda r: (r["run_id"], r["_rk"])):
        d = r.asDict(recursive=True)
        cnt = int(d.pop("_n"))
        rid = d.pop("run_id")
        d.pop("_rk")
        out.setdefault(rid, (cnt, []))[1].append({k: _plain(v) for k, v in d.items()})
    return out


def by_run(values: dict[str, Any], cast: str = "double"):
    parts = [x for k, v in sorted(values.items()) for x in (F.lit(k), F.lit(v))]
    return F.create_map(*parts)[F.col("run_id")].cast(cast) if parts else F.lit(None).cast(cast)


class Batch:
    """The batched checks and metrics of ``ctxs`` ({run_id: that run's AnalysisContext}; events are
    read here, over all runs at once, from ``paths`` {run_id: run directory})."""

    def __init__(self, spark: SparkSession, ctxs: dict[str, AnalysisContext], progress: Callable[[str], None]):
        from testbed.registry import checks_for

        self.spark, self.ctxs, self.progress = spark, ctxs, progress
        self.paths = [str(c.run_dir) for c in ctxs.values()]
        self.events: dict[str, DataFrame] = {}
        self.cached: list[DataFrame] = []
        self.parts = parts()
        # per part, the runs whose protocol lists each of its checks (the runtime's apply to every run)
        self.runs_of = {part.name: {name: sorted(rid for rid, c in ctxs.items() if fn in checks_for(c.protocol))
                                    for fn, name in part.checks.items()} for part in self.parts}
        self.results: dict[str, dict[str, CheckResult]] = {rid: {} for rid in ctxs}
        self.shared: dict[str, dict[str, Any]] = {rid: {} for rid in ctxs}
        self.metrics: dict[str, dict[str, Any]] = {}

    def df(self, ev: str, runs: list[str] | None = None) -> DataFrame:
        from testbed.analysis.batch import read_runs

        if ev not in self.events:
            self.events[ev] = read_runs(self.spark, self.paths, ev)
        d = self.events[ev]
        return d if runs is None else d.where(F.col("run_id").isin(runs))

    def release(self) -> None:
        for d in self.cached:
            d.unpersist()

    def run(self, only: tuple[str, ...] | None = None) -> None:
        """The batched parts, every protocol's then ``control_provenance`` and ``metrics`` (``only``:
        these names); a part that raises leaves its results out (each run then computes it alone)
        and says so."""
        import time

        steps: list[tuple[str, Callable[[], None], dict[Callable[..., Any], str], bool]] = [
            (p.name, (lambda p=p: p.run(self, self.runs_of[p.name])), p.checks, True) for p in self.parts]
        steps += [("control_provenance", self._provenance, RUNTIME, False), ("metrics", self._metrics, {}, False)]
        for name, fn, checks, protocol_part in steps:
            if only is not None and name not in only:
                continue
            t = time.monotonic()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - each run then computes this part alone (job.analyze_batch)
                self.progress(f"batch {name}: failed ({type(e).__name__}: {e}); computed run by run instead")
                for r in self.results.values():
                    for k in checks.values():
                        r.pop(k, None)
                if name == "metrics":
                    self.metrics.clear()
                if protocol_part:  # the metrics may need what the part shares (attributions): after it
                    break
                continue
            # "metrics: ..." as a run alone says it (``testbed analyze``'s live display follows it)
            label = "metrics:" if name == "metrics" else f"batch {name.replace('/', '').replace(' ', '_')}:"
            self.progress(f"{label} {len(self.ctxs)} run(s) at once ({time.monotonic() - t:.1f} s)")

    # -- runtime -------------------------------------------------------------------------------
    def _provenance(self) -> None:
        changes: dict[str, list] = {}
        for r in R.state_changes(self.df("ctl_applied"), BY).orderBy("run_id", "t_rel_s").collect():
            changes.setdefault(r["run_id"], []).append(r)
        quiet: dict[str, list] = {}
        for r in R.silences(self.df("cpu"), self.df("node_start"), by=BY).orderBy("run_id", "from_s").collect():
            quiet.setdefault(r["run_id"], []).append(r)
        marks: dict[str, list] = {}
        for r in R.life_marks(self.df("node_start"), self.df("node_stop"), self.df("node_error"), BY).collect():
            marks.setdefault(r["run_id"], []).append(r)
        for rid, c in self.ctxs.items():
            self.results[rid]["control_provenance"] = R.control_provenance_of(
                c.manifest, c.plan, changes.get(rid, []), quiet.get(rid, []))
            self.results[rid]["node_lives"] = R.node_lives_of(c.manifest, c.plan, marks.get(rid, []))

    # -- metrics ------------------------------------------------------------------------------
    def _metrics(self) -> None:
        lat: dict[str, list] = {}
        for r in latency_stats(latencies(self.df("deliver"), self.df("publish"), BY), by=BY).collect():
            lat.setdefault(r["run_id"], []).append(r)
        series: dict[tuple[str, str], dict[int, int]] = {}
        u = per_second_series([("deliver", self.df("deliver"), None), ("publish", self.df("publish"), None),
                               ("drop", self.df("drop"), "count")], by=BY)
        for r in u.collect():
            series.setdefault((r["run_id"], r["kind"]), {})[int(r["second"])] = int(r["n"] or 0)
        rejected: dict[str, list] = {}
        for r in R.rejected_rows(self.df("conn_rejected"), BY).collect():
            rejected.setdefault(r["run_id"], []).append(r)
        for rid, c in self.ctxs.items():
            c.results.update(self.shared.get(rid, {}))
            m = metrics_of(c, lat.get(rid, []), series.get((rid, "deliver"), {}), series.get((rid, "publish"), {}),
                           series.get((rid, "drop"), {}))
            m["rejected"] = R.rejected_of(rejected.get(rid, []))
            self.metrics[rid] = m
