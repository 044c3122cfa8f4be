"""Ingest: ``logs/*.jsonl`` -> one typed DataFrame (and Parquet dataset) per event type.

Schemas come from the event registry only (``testbed.nodes.runtime.events``):
``str`` -> string, ``int`` -> long, ``float`` -> double, ``bool`` -> boolean,
``json`` -> string holding the value's JSON text (compact; a JSON string as
its content), ``list[T]`` -> array<T>. An undeclared field never reaches an
analysis; a field whose value does not fit its type is null (the event is kept).

The logs are converted to Parquet by pyarrow in the calling process (the Spark
driver), streamed per file in blocks (:mod:`testbed.analysis.convert`, which needs no Spark):
no JSON reaches Spark, which reads the Parquet only (see docs/analysis.md for what that means
on a cluster).

A killed node can leave a torn last line; every line that is not a JSON object
with the common fields is counted (per file, with a few examples) and dropped,
never fatal. Event types missing from the registry are counted too.

Every event row gets ``host`` and ``site`` (from plan.json), ``t_corr`` (the
wall clock corrected by the manifest clock offset of its host:
``t - offset_ns``) and ``t_rel_s`` (seconds from the workload start
``manifest["t0_wall_ns"]``, on the corrected clock).
"""

from __future__ import annotations

import shutil
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from testbed.analysis.convert import (  # noqa: F401  (the conversion, re-exported where it was)
    MALFORMED,
    UNKNOWN,
    BLOCK_BYTES,
    FORMAT,
    INGEST_THREADS,
    IngestReport,
    META,
    _Collect,
    _Converter,
    _ENCODE,
    _ROWS_PER_FLUSH,
    _Sink,
    _arrow_fields,
    _blocks,
    _convert_threaded,
    _fast_json,
    _inexact,
    _read_json,
    _read_meta,
    _stored_arrow_schema,
    _to_text,
    _utf8,
    arrow_type,
    clock_offsets,
    convert,
    convert_logs,
    ensure_parquet,
    fingerprint,
    loads_lines,
    node_places,
    struct_col,
)
from testbed.errors import AnalysisError
from testbed.nodes.runtime.events import COMMON_FIELDS, EventType
from testbed.registry import all_events
from testbed.runs import scratch

CORRUPT = "_corrupt_record"
_SCALARS = {
    "str": T.StringType(),
    "int": T.LongType(),
    "float": T.DoubleType(),
    "bool": T.BooleanType(),
    "json": T.StringType(),  # Spark keeps the raw JSON text of a non-string value
    "list[str]": T.ArrayType(T.StringType()),
    "list[int]": T.ArrayType(T.LongType()),
}
# Columns every ingested DataFrame has besides its event fields, in this order.
ADDED_COLUMNS = ("host", "site", "t_corr", "t_rel_s")


def spark_type(ty: str) -> T.DataType:
    return _SCALARS[ty]


def event_schema(et: EventType) -> T.StructType:
    """The explicit JSON schema of one event type (common fields first)."""
    cols = {**COMMON_FIELDS, **et.fields}
    return T.StructType([T.StructField(k, spark_type(v), True) for k, v in cols.items()])


def output_schema(et: EventType) -> T.StructType:
    """The schema of the ingested DataFrame of one event type."""
    base = event_schema(et)
    extra = [
        T.StructField("host", T.StringType(), True),
        T.StructField("site", T.StringType(), True),
        T.StructField("t_corr", T.LongType(), True),
        T.StructField("t_rel_s", T.DoubleType(), True),
    ]
    return T.StructType(list(base.fields) + extra)


def empty_events(spark: SparkSession, ev: str) -> DataFrame:
    """An empty DataFrame with the ingested schema of ``ev`` (for event types absent from a run)."""
    et = all_events().get(ev)
    if et is None:
        raise AnalysisError(f"event type {ev!r} is not declared in the event registry")
    return spark.createDataFrame([], output_schema(et))


class Frames(MutableMapping):
    """``{event type: DataFrame}`` whose DataFrames are made on first use: a check that never reads
    an event type does not pay for opening its Parquet (0.06-0.1 s each in a fresh session)."""

    def __init__(self, loaders: dict[str, Callable[[], DataFrame]]):
        self._loaders = dict(loaders)
        self._frames: dict[str, DataFrame] = {}

    def __getitem__(self, ev: str) -> DataFrame:
        if ev not in self._frames:
            if ev not in self._loaders:
                raise KeyError(ev)
            self._frames[ev] = self._loaders[ev]()
        return self._frames[ev]

    def __setitem__(self, ev: str, df: DataFrame) -> None:
        self._loaders.setdefault(ev, lambda: df)
        self._frames[ev] = df

    def __delitem__(self, ev: str) -> None:
        del self._loaders[ev]
        self._frames.pop(ev, None)

    def __iter__(self):
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)

    def __contains__(self, ev: object) -> bool:
        return ev in self._loaders


class Ingested(Frames):
    """``{event type: DataFrame}`` (made on first use) plus the :class:`IngestReport` as ``.report``."""

    report: IngestReport


def _fields_schema(et: EventType) -> T.StructType:
    return T.StructType([T.StructField(k, spark_type(v), True) for k, v in et.fields.items()])


def stored_schema(inline: list[EventType]) -> T.StructType:
    """Every stored column of one ingest (a directory holds a subset: see the layout above)."""
    return T.StructType(
        [T.StructField("file", T.StringType(), True), T.StructField("ev_name", T.StringType(), True)]
        + [T.StructField(k, spark_type(v), True) for k, v in COMMON_FIELDS.items() if k != "ev"]
        + [T.StructField("host", T.StringType(), True), T.StructField("site", T.StringType(), True),
           T.StructField("t_corr", T.LongType(), True)]
        + [T.StructField(struct_col(et.name), _fields_schema(et), True) for et in inline]
        + [T.StructField("raw", T.StringType(), True)]
    )


def _read_schema(et: EventType) -> T.StructType:
    """The part of the stored schema one event type's reader needs."""
    return T.StructType(
        [T.StructField("ev_name", T.StringType(), True)]
        + [T.StructField(k, spark_type(v), True) for k, v in COMMON_FIELDS.items() if k != "ev"]
        + [T.StructField("host", T.StringType(), True), T.StructField("site", T.StringType(), True),
           T.StructField("t_corr", T.LongType(), True),
           T.StructField(struct_col(et.name), _fields_schema(et), True)]
    )


def read_event(spark: SparkSession, path: str | Path, et: EventType, t0_wall_ns: int) -> DataFrame:
    """One event type's stored Parquet -> its ingested DataFrame (:func:`output_schema` exactly).

    ``path`` may be a list of directories (several runs with the same t0 only; see
    ``testbed.analysis.batch`` for many runs).
    """
    paths = [str(x) for x in path] if isinstance(path, (list, tuple)) else [str(path)]
    df = spark.read.schema(_read_schema(et)).parquet(*paths)
    return select_event(df, et, t0_wall_ns)


def select_event(df: DataFrame, et: EventType, t0) -> DataFrame:
    """Stored columns -> the ingested columns of ``et``; ``t0`` a number or a Column (ns)."""
    return df.select(*event_columns(et, t0))


def event_columns(et: EventType, t0) -> list:
    """The :func:`output_schema` columns of ``et`` as expressions over the stored columns."""
    s = struct_col(et.name)
    cols = []
    for f in output_schema(et).fields:
        if f.name == "ev":
            c = F.col("ev_name")
        elif f.name in COMMON_FIELDS or f.name in ("host", "site", "t_corr"):
            c = F.col(f.name)
        elif f.name == "t_rel_s":
            t0c = t0 if not isinstance(t0, (int, float)) else F.lit(int(t0))
            c = (F.col("t_corr") - t0c).cast("double") / F.lit(1e9)
        else:
            c = F.col(f"{s}.{f.name}")
        cols.append(c.cast(f.dataType).alias(f.name))
    return cols


def ingest(spark: SparkSession, run_dir: str | Path, *, write: bool = True, reuse: bool = True) -> Ingested:
    """Read ``run_dir/logs/*.jsonl`` into one DataFrame per event type present.

    The logs are converted to Parquet in this process with pyarrow (:func:`ensure_parquet`,
    :func:`convert_logs`: streamed per file in blocks, explicit schemas from the registry,
    host/site/t_corr added) under ``analysis/parquet/<ev>/``; Spark then reads Parquet only. With
    ``reuse`` (default) a run whose inputs did not change since its last ingest (same
    :func:`fingerprint`) is not parsed again: ``.report.reused`` is true.

    ``write=False`` stores nothing in the run directory: the Parquet goes to a temporary
    directory removed when the process exits.
    """
    import atexit

    target = None
    if not write:
        tmp = scratch.make("testbed-ingest")  # its pid in the name: `testbed wipe` finds it if killed
        atexit.register(shutil.rmtree, tmp, True)
        target = tmp / "parquet"
    meta, report = ensure_parquet(run_dir, reuse=reuse, target=target)
    root = target if target is not None else Path(run_dir) / "analysis" / "parquet"
    out = Ingested(_loaders(spark, root, meta))
    out.report = report
    return out


def load_parquet(spark: SparkSession, run_dir: str | Path, *, meta: dict[str, Any] | None = None) -> Frames:
    """Re-open what :func:`ingest` stored (re-analysis without re-parsing the logs).

    Without ``meta``, this is :func:`ingest` with reuse: the stored Parquet when it is current (no
    Spark job), else the logs are ingested again (an older storage format, changed logs).
    """
    if meta is None:
        return ingest(spark, run_dir)
    return _load(spark, Path(run_dir) / "analysis" / "parquet", meta)


def _loaders(spark: SparkSession, root: Path, meta: dict[str, Any]) -> dict[str, Callable[[], DataFrame]]:
    """{event type: opens its stored Parquet} for every type the ingest stored."""
    registry = all_events()
    t0 = int(meta["t0_wall_ns"])
    return {ev: (lambda ev=ev: read_event(spark, root / ev, registry[ev], t0))
            for ev in sorted(meta["report"]["events"]) if ev in registry and (root / ev).is_dir()}


def _load(spark: SparkSession, root: Path, meta: dict[str, Any]) -> Frames:
    return Frames(_loaders(spark, root, meta))
