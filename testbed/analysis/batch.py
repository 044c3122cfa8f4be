"""Many runs at once: one Spark read over the runs' stored Parquet (a figure's multi-run input).

A reproduce grid (or a sweep) is dozens of runs. Reading them one by one costs a
few Spark jobs per run; :func:`read_runs` instead makes one DataFrame over every
run's ``analysis/parquet/<ev>/`` (one file scan, so one job for whatever the
figure computes), with a ``run_id`` column (the run directory's name) and each
run's own ``t_rel_s`` (its events' ``t_corr``, already corrected by that run's
clock offsets at ingest, minus that run's t0).

Runs not ingested yet (or whose logs changed) are ingested first, each in the
same session (:func:`testbed.analysis.ingest.ingest`, which reuses current Parquet
without any Spark job). Whole-run analysis of many runs in one session is
``testbed.api.analyze_runs`` (``testbed analyze RUN_DIR...``).

    from testbed.analysis.batch import read_runs
    deliver = read_runs(spark, run_dirs, "deliver")      # [run_id, t, m, node, ev, ..., t_rel_s]
    deliver.groupBy("run_id").agg(F.avg("hops"))          # one job over every run
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from testbed.errors import AnalysisError


def ensure_ingested(spark: SparkSession, run_dirs: list[str | Path]) -> dict[str, dict]:
    """{run_id: stored-ingest metadata} for every run (ingesting those whose Parquet is missing or stale)."""
    from testbed.analysis.convert import ensure_parquet

    out: dict[str, dict] = {}
    for d in run_dirs:
        p = Path(d).resolve()
        if p.name in out:
            raise AnalysisError(f"{p}: two runs named {p.name!r} in one batch (run ids must be unique)")
        meta, _ = ensure_parquet(p)  # reuses current Parquet; else converts the logs (no Spark job)
        out[p.name] = {**meta, "path": p}
    return out


def read_runs(spark: SparkSession, run_dirs: list[str | Path], ev: str) -> DataFrame:
    """One DataFrame of event type ``ev`` over many runs: ``run_id`` + the ingested columns of ``ev``.

    One file scan over every run's ``analysis/parquet/<ev>/`` (runs without that event type add
    nothing); ``t_rel_s`` is relative to each run's own t0.
    """
    from testbed.analysis.ingest import _read_schema, empty_events, event_columns
    from testbed.nodes.runtime.events import all_events

    et = all_events().get(ev)
    if et is None:
        raise AnalysisError(f"event type {ev!r} is not declared in the event registry")
    metas = ensure_ingested(spark, run_dirs)
    dirs = {rid: m["path"] / "analysis" / "parquet" / ev for rid, m in metas.items()}
    dirs = {rid: d for rid, d in dirs.items() if ev in m_events(metas[rid]) and d.is_dir()}
    if not dirs:
        return empty_events(spark, ev).select(F.lit(None).cast("string").alias("run_id"), "*").limit(0)
    t0s = {rid: int(metas[rid]["t0_wall_ns"]) for rid in dirs}
    df = spark.read.schema(_read_schema(et)).parquet(*[str(d) for d in dirs.values()])
    # the run directory's name, from each row's file: <run>/analysis/parquet/<ev>/<part file>
    # (a URI: percent-encoded, but a '+' is a '+', which url_decode would read as a space)
    name = F.regexp_extract(F.col("_metadata.file_path"), r"([^/]+)/analysis/parquet/[^/]+/[^/]+$", 1)
    run_id = F.url_decode(F.regexp_replace(name, r"\+", "%2B"))
    df = df.withColumn("run_id", run_id)
    return df.select("run_id", *event_columns(et, _lit_map(t0s)[F.col("run_id")]))


def read_runs_tables(spark: SparkSession, run_dirs: list[str | Path], evs: list[str]) -> dict[str, DataFrame]:
    """{ev: :func:`read_runs`} for several event types (the runs are ingested once)."""
    ensure_ingested(spark, run_dirs)
    return {ev: read_runs(spark, run_dirs, ev) for ev in evs}


def prefix_ids(df: DataFrame, keys: tuple[str, ...], sep: str = "|") -> DataFrame:
    """``read_runs`` rows with every id column of ``keys`` that ``df`` has prefixed by
    ``<run_id><sep>`` (null and empty ids kept as they are), so checks written for one run can
    join many runs' rows without pairing rows of different runs."""
    run = F.col("run_id")
    for c in keys:
        if c in df.columns:
            df = df.withColumn(c, F.when(F.col(c).isNull() | (F.col(c) == ""), F.col(c))
                               .otherwise(F.concat(run, F.lit(sep), F.col(c))))
    return df


def m_events(meta: dict) -> dict[str, int]:
    return dict((meta.get("report") or {}).get("events") or {})


def _lit_map(d: dict[str, int]):
    parts = []
    for k, v in sorted(d.items()):
        parts += [F.lit(k), F.lit(v).cast(T.LongType())]
    return F.create_map(*parts)


def read_events(spark, run_dirs: dict[str, str], ev: str):
    """Every ``ev`` event of the given runs, typed by the event registry (the columns of
    ``ingest.event_schema``: ``t`` as logged), plus ``run`` (the key of ``run_dirs``): for readers
    of many runs that need one event type and not the whole analysis. Reads the runs' Parquet
    (:func:`read_runs`: one scan; a run without current Parquet is converted first), never the JSON."""
    from testbed.analysis.ingest import event_schema
    from testbed.nodes.runtime.events import all_events

    et = all_events()[ev]
    keys = {Path(d).resolve().name: k for k, d in run_dirs.items()}
    if len(keys) != len(run_dirs):
        raise AnalysisError(f"read_events: two runs with the same directory name in {sorted(run_dirs.values())}")
    mapping = F.create_map(*[x for name, k in sorted(keys.items()) for x in (F.lit(name), F.lit(k))])
    df = read_runs(spark, list(run_dirs.values()), ev)
    return df.select(*[F.col(f.name) for f in event_schema(et).fields], mapping[F.col("run_id")].alias("run"))
