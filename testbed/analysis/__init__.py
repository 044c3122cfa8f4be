"""Spark analysis of a run directory: ingest, history checks, metrics, figures, report.

Entry point: :func:`testbed.analysis.job.analyze` (re-exported here lazily so
``import testbed.analysis`` does not import pyspark)::

    analyze(run_dir, *, spark_master=None, progress=print, spark=None,
            settle_s=None, travel_margin_s=None, fault_margin_s=None, reuse=True) -> AnalysisResult

Layout (each module's docstring has the details):

    session.py    spark_session(): one quiet session (local[2], --spark-master, TESTBED_SPARK_MASTER)
    ingest.py     logs/*.jsonl -> analysis/parquet/<ev>/ in one pass (schemas from the event registry);
                  an unchanged run's Parquet is reused
    batch.py      read_runs(): one Parquet scan over many runs (run_id column), for multi-run figures
    timeline.py   fault windows, planned vs actual (manifest timeline + injected faults)
    context.py    AnalysisContext: what checks/metrics/figures see (history + plan + manifest)
    filters.py    an independent content-based filter evaluator (Python and Spark)
    checks.py     CheckResult, summarize(): what every protocol's checks return
    metrics.py    latency per site pair, delivered rate, per-fault counts
    figures.py    generic figures (latency CDF, delivered rate)
    congestion.py the brokers' service queue, CPU and received rate per second (plain Python over the logs)
    report.py     report.md, checks.json, metrics.json
    job.py        analyze(): the phases in order
    synthetic.py  a synthetic pub/sub run directory (tests, benchmarks, trying things out)

Extending for a protocol ``p`` (the protocol registry, :mod:`testbed.registry`,
finds these by convention): checks in ``p/checks.py`` as ``CHECKS = [...]``
(each ``fn(ctx) -> CheckResult``, typically ``summarize(name, description,
violations_df, ...)``), figures in ``p/figures.py`` as ``FIGURES = [...]`` (each
``fn(ctx, out_dir) -> list[Path]``), event tables and transforms beside them.
Read events with ``ctx.df("<ev>")`` (an empty, typed DataFrame when the run has none).
"""


def analyze(run_dir, **kwargs):
    from testbed.analysis.job import analyze as _analyze

    return _analyze(run_dir, **kwargs)
