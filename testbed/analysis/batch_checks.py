"""The generic checks and the metrics of many runs at once: one set of Spark jobs for a whole batch.

``testbed analyze A B C ...`` (``api.analyze_runs``, ``job.analyze_batch``) analyses many small
runs in one session. Run by run, each analysis is some 26 small Spark jobs, each costing its
scheduling whatever the data. Here the checks every run shares -- the pub/sub core's
``no_duplicates``, ``filter_match``, ``fifo``, ``completeness`` and the runtime's
``control_provenance`` -- and the metrics are computed once over every run of the batch: the runs'
events are read as one DataFrame per event type (``batch.read_runs``: one scan, a ``run_id``
column), and the checks' own transforms run with ``by=("run_id",)``: every grouping, join and
window is keyed by the run too, so rows of different runs never meet (a null id stays null and
joins nothing, as in a run alone). What depends on a run's plan and manifest is per run: the
settle time and the workload's end are literal maps keyed by run, the fault windows a column
expression per run, and ``control_provenance`` is decided in Python per run on rows collected
once. Filters are evaluated once per distinct text over every run's publications (publication
ids carry their run), then joined to the subscriptions of the same run.

Each check's violations are counted and its examples chosen per run in one job (a window per
run, ordered as the run-alone check orders them). The result for a run equals its analysis
alone (``tests/unit/analysis/test_batch_checks.py``, on clean and broken runs), except where
Spark itself is approximate: the CDF's ``percentile_approx`` quantiles are exact only up to its
accuracy (10,000 values per site pair), which a small run's never exceed.
"""

from __future__ import annotations

from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from testbed.analysis import runtime_checks as R
from testbed.analysis.checks import MAX_EXAMPLES, CheckResult, _plain
from testbed.analysis.context import AnalysisContext
from testbed.analysis.filters import match_pairs
from testbed.analysis.metrics import latencies, latency_stats, metrics_of, per_second_series
from testbed.analysis.pubsub import checks as P

BY = ("run_id",)
SEP = "\u0001"  # joins a run id and a publication id for the filter evaluation (never in a directory name)
PUBSUB = {P.check_no_duplicates: "no_duplicates", P.check_filter_match: "filter_match", P.check_fifo: "fifo",
          P.check_completeness: "completeness"}
RUNTIME = {R.check_control_provenance: "control_provenance"}
BATCHED: dict[Callable[..., Any], str] = {**PUBSUB, **RUNTIME}


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


def _by_run(values: dict[str, Any], cast: str = "double"):
    parts = [x for k, v in sorted(values.items()) for x in (F.lit(k), F.lit(v))]
    return F.create_map(*parts)[F.col("run_id")].cast(cast) if parts else F.lit(None).cast(cast)


def _fault_columns(ctxs: dict[str, AnalysisContext]):
    """(fault, fault_source) of ``pub_s`` under each row's own run's fault windows."""
    fault, source = F.lit(None).cast("int"), F.lit(None).cast("string")
    for rid, c in sorted(ctxs.items()):
        rows = c.window_rows()
        if rows:
            f, s = P.fault_columns(F.col("pub_s"), rows)
            hit = F.col("run_id") == F.lit(rid)
            fault, source = F.when(hit, f).otherwise(fault), F.when(hit, s).otherwise(source)
    return fault, source


class Batch:
    """The batched checks and metrics of ``ctxs`` ({run_id: that run's AnalysisContext}; events are
    read here, over all runs at once, from ``paths`` {run_id: run directory})."""

    def __init__(self, spark: SparkSession, ctxs: dict[str, AnalysisContext], progress: Callable[[str], None]):
        from testbed.protocols import checks_for

        self.spark, self.ctxs, self.progress = spark, ctxs, progress
        self.paths = [str(c.run_dir) for c in ctxs.values()]
        self.events: dict[str, DataFrame] = {}
        self.cached: list[DataFrame] = []
        # the runs whose protocol lists each pub/sub check (the runtime's apply to every run)
        self.pubsub_runs = {name: sorted(rid for rid, c in ctxs.items() if fn in checks_for(c.protocol))
                            for fn, name in PUBSUB.items()}
        self.results: dict[str, dict[str, CheckResult]] = {rid: {} for rid in ctxs}
        self.completeness: dict[str, dict[str, Any]] = {}
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

    def run(self, parts: tuple[str, ...] = ("pub/sub checks", "control_provenance", "metrics")) -> None:
        """The batched ``parts`` (all by default); a part that raises leaves its results out (each
        run then computes it alone) and says so."""
        import time

        for name, fn in (("pub/sub checks", self._pubsub), ("control_provenance", self._provenance),
                         ("metrics", self._metrics)):
            if name not in parts:
                continue
            t = time.monotonic()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - each run then computes this part alone (job.analyze_batch)
                self.progress(f"batch {name}: failed ({type(e).__name__}: {e}); computed run by run instead")
                for r in self.results.values():
                    for k in ((PUBSUB if name == "pub/sub checks" else RUNTIME).values()
                              if name != "metrics" else ()):
                        r.pop(k, None)
                if name == "metrics":
                    self.metrics.clear()
                if name == "pub/sub checks":  # the metrics need completeness' attributions: after the checks
                    break
                continue
            # "metrics: ..." as a run alone says it (``testbed analyze``'s live display follows it)
            label = "metrics:" if name == "metrics" else f"batch {name.replace('/', '').replace(' ', '_')}:"
            self.progress(f"{label} {len(self.ctxs)} run(s) at once ({time.monotonic() - t:.1f} s)")

    # -- pub/sub ------------------------------------------------------------------------------
    def _pubsub(self) -> None:
        """no_duplicates, filter_match and completeness from one :func:`pubsub.checks.judged_pairs`
        over every run (one tally job), fifo in one job; examples per run only where there are
        violations."""
        runs = sorted(set().union(*self.pubsub_runs.values()))
        if not runs:
            return
        if self.pubsub_runs["fifo"]:
            rs = self.pubsub_runs["fifo"]
            # the exact inversions only of runs where the hashed ones say there may be some
            maybe = sorted(r["run_id"] for r in P.fifo_inversions(self.df("deliver", rs), BY, hashed=True)
                           .select("run_id").distinct().collect())
            got = per_run(P.fifo_inversions(self.df("deliver", maybe), BY), P.ORDERS["fifo"]) if maybe else {}
            for rid in rs:
                n, ex = got.get(rid, (0, []))
                self.results[rid]["fifo"] = CheckResult("fifo", n == 0, n, examples=ex,
                                                        description=P.DESCRIPTIONS["fifo"])
        shared = [n for n in ("no_duplicates", "filter_match", "completeness") if self.pubsub_runs[n]]
        if not shared:
            return
        runs = sorted(set().union(*(self.pubsub_runs[n] for n in shared)))
        subs = P.subscriptions(self.df("subscribe", runs), self.df("unsubscribe", runs), BY).cache()
        # publications and matches are read once when every check passes (examples read them again):
        # not cached, which measured cheaper than building the cache
        pubs = P.publications(self.df("publish", runs), BY)
        self.cached.append(subs)
        texts: dict[str, set[str]] = {}
        for r in subs.select("run_id", "filter").distinct().collect():
            texts.setdefault(r["run_id"], set()).add(r["filter"] or "")
        # each distinct filter text evaluated once over every run's publications (ids carry their run)
        keyed = pubs.select(F.concat("run_id", F.lit(SEP), "pub_id").alias("pub_id"), "attrs", "pub_s")
        m, errors = match_pairs(self.spark, sorted(set().union(*texts.values())) if texts else [], keyed,
                                keep=("pub_s",))
        matches = m.select(F.substring_index("pub_id", SEP, 1).alias("run_id"), "filter",
                           F.expr(f"substring(pub_id, length(substring_index(pub_id, '{SEP}', 1)) + 2)")
                           .alias("pub_id"), "pub_s")
        errs = {rid: {f: e for f, e in errors.items() if f in texts.get(rid, set())} for rid in runs}
        cs = {rid: self.ctxs[rid] for rid in runs}
        opts = next(iter(cs.values())).options
        kw = dict(settle_s=_by_run({r: c.settle_s for r, c in cs.items()}), margin_s=opts.travel_margin_s,
                  end_s=_by_run({r: c.end_s for r, c in cs.items()}), by=BY)
        # counted on the hashed pairs; the exact ones read only for examples
        j = P.judged_pairs(self.df("deliver", runs), subs, pubs, matches, **kw)
        fault, source = _fault_columns(cs)
        j = j.withColumn("fault", fault)
        jh = P.judged_pairs(self.df("deliver", runs), subs, pubs, matches, hashed=True, **kw)
        tally = {k[0]: v for k, v in P.pubsub_tally(jh, pubs, fault, source, BY, exact=j).items()}
        empty = {"dup": 0, "fm": 0, "unknown": 0, "expected": 0, "miss": {}}

        def examples(name: str, df: DataFrame, key: str) -> dict[str, list]:
            if not any(tally.get(r, empty)[key] for r in self.pubsub_runs[name]):
                return {}
            return {r: ex for r, (_, ex) in per_run(df.where(F.col("run_id").isin(self.pubsub_runs[name])),
                                                    P.ORDERS[name]).items()}

        ex = examples("no_duplicates", P.duplicates_of(j, BY), "dup")
        for rid in self.pubsub_runs["no_duplicates"]:
            n = tally.get(rid, empty)["dup"]
            self.results[rid]["no_duplicates"] = CheckResult(
                "no_duplicates", n == 0, n, examples=ex.get(rid, []), description=P.DESCRIPTIONS["no_duplicates"])
        ex = examples("filter_match", P._judged_pairs(P.delivery_pairs(self.df("deliver", runs), BY), subs, pubs,
                                                      matches, BY)
                      .where(F.col("_known") & ~F.col("_ok"))
                      .select("run_id", "client", "pub_id", "deliver_s", "filters"), "fm")
        for rid in self.pubsub_runs["filter_match"]:
            t = tally.get(rid, empty)
            self.results[rid]["filter_match"] = CheckResult(
                "filter_match", t["fm"] == 0 and not errs[rid], t["fm"], examples=ex.get(rid, []),
                description=P.DESCRIPTIONS["filter_match"],
                details={"unverifiable_deliveries": t["unknown"], "unparsable_filters": errs[rid]})
        unattributed = P.with_publisher(j.where(F.col("expected") & (F.col("deliveries") == 0)
                                                & F.col("fault").isNull()).select("run_id", "client", "pub_id", "pub_s"),
                                        pubs, BY)
        miss_un = {r: sum(n for (f, _), n in tally.get(r, empty)["miss"].items() if f is None) for r in runs}
        ex = ({r: e for r, (_, e) in per_run(unattributed, P.ORDERS["completeness"]).items()}
              if any(miss_un.values()) else {})
        for rid in self.pubsub_runs["completeness"]:
            c = cs[rid]
            details, n_un, attributed = P.completeness_details(
                tally.get(rid, empty), errs[rid], settle_s=c.settle_s, travel_margin_s=c.options.travel_margin_s,
                fault_margin_s=c.options.fault_margin_s, end_s=c.end_s)
            self.completeness[rid] = details
            self.results[rid]["completeness"] = CheckResult(
                "completeness", n_un == 0 and not errs[rid], n_un, attributed=attributed,
                examples=ex.get(rid, []), description=P.DESCRIPTIONS["completeness"], details=details)

    # -- runtime -------------------------------------------------------------------------------
    def _provenance(self) -> None:
        changes: dict[str, list] = {}
        for r in R.state_changes(self.df("ctl_applied"), BY).orderBy("run_id", "t_rel_s").collect():
            changes.setdefault(r["run_id"], []).append(r)
        quiet: dict[str, list] = {}
        for r in R.silences(self.df("cpu"), self.df("node_start"), by=BY).orderBy("run_id", "from_s").collect():
            quiet.setdefault(r["run_id"], []).append(r)
        for rid, c in self.ctxs.items():
            self.results[rid]["control_provenance"] = R.control_provenance_of(
                c.manifest, c.plan, changes.get(rid, []), quiet.get(rid, []))

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
            if rid in self.completeness:
                c.results["pubsub.completeness"] = self.completeness[rid]
            m = metrics_of(c, lat.get(rid, []), series.get((rid, "deliver"), {}), series.get((rid, "publish"), {}),
                           series.get((rid, "drop"), {}))
            m["rejected"] = R.rejected_of(rejected.get(rid, []))
            self.metrics[rid] = m
