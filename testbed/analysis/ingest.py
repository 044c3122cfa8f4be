"""Ingest: ``logs/*.jsonl`` -> one typed DataFrame (and Parquet dataset) per event type.

Schemas come from the event registry only (``testbed.nodes.runtime.events``):
``str`` -> string, ``int`` -> long, ``float`` -> double, ``bool`` -> boolean,
``json`` -> string holding the raw JSON text, ``list[T]`` -> array<T>. An
undeclared field never reaches an analysis.

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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from testbed.errors import AnalysisError
from testbed.nodes.runtime.events import COMMON_FIELDS, EventType
from testbed.protocols import all_events

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
WRITE_THREADS = 4


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


@dataclass
class IngestReport:
    files: int = 0
    lines: int = 0
    events: dict[str, int] = field(default_factory=dict)
    malformed: int = 0
    malformed_by_file: dict[str, int] = field(default_factory=dict)
    malformed_examples: list[dict[str, str]] = field(default_factory=list)
    unknown: dict[str, int] = field(default_factory=dict)
    unknown_nodes: list[str] = field(default_factory=list)  # node names absent from plan.json
    t0_wall_ns: int | None = None
    t0_source: str = "manifest"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Ingested(dict):
    """``{event type: DataFrame}`` plus the :class:`IngestReport` as ``.report``."""

    report: IngestReport


# -- transforms -------------------------------------------------------------------
def parse_lines(lines: DataFrame) -> DataFrame:
    """[file, value] -> [file, value, t, m, node, ev, ok]: the common header of each line.

    ``ok`` is false for a line that is not a JSON object with integer ``t`` and a
    ``node`` and ``ev`` (a torn line, garbage). Blank lines are removed.
    """
    header = T.StructType(
        [T.StructField(k, spark_type(v), True) for k, v in COMMON_FIELDS.items()]
        + [T.StructField(CORRUPT, T.StringType(), True)]
    )
    parsed = (
        lines.select("file", "value")
        .where(F.trim("value") != "")
        .withColumn("h", F.from_json("value", header, {"columnNameOfCorruptRecord": CORRUPT, "mode": "PERMISSIVE"}))
    )
    ok = (
        F.col("h").isNotNull()
        & F.col(f"h.{CORRUPT}").isNull()
        & F.col("h.t").isNotNull()
        & F.col("h.node").isNotNull()
        & F.col("h.ev").isNotNull()
    )
    return parsed.select(
        "file", "value",
        F.col("h.t").alias("t"), F.col("h.m").alias("m"), F.col("h.node").alias("node"), F.col("h.ev").alias("ev"),
        ok.alias("ok"),
    )


def events_of(parsed: DataFrame, et: EventType) -> DataFrame:
    """[value, ev, ok, ...] -> the typed columns of one event type (registry order)."""
    schema = event_schema(et)
    return (
        parsed.where(F.col("ok") & (F.col("ev") == et.name))
        .select(F.from_json("value", schema).alias("e"))
        .select(*[F.col(f"e.{f.name}").alias(f.name) for f in schema.fields])
    )


def with_time(events: DataFrame, nodes: dict[str, tuple[str | None, str | None]], offsets: dict[str, int],
              t0_wall_ns: int) -> DataFrame:
    """Add host, site, t_corr and t_rel_s.

    ``nodes`` maps node -> (host, site) (plan.json); ``offsets`` maps host -> offset_ns (a host
    clock ahead of the controller by ``offset_ns`` has ``t_corr = t - offset_ns``). The small
    lookups are literal maps in the expression: no join, no broadcast per event type.
    """
    cols = events.columns
    host_of = _lit_map({n: h for n, (h, _) in nodes.items() if h is not None}, T.StringType())
    site_of = _lit_map({n: s for n, (_, s) in nodes.items() if s is not None}, T.StringType())
    off_of = _lit_map({h: int(o) for h, o in offsets.items()}, T.LongType())
    host = host_of[F.col("node")]
    return (
        events.select(*cols)
        .withColumn("host", host)
        .withColumn("site", site_of[F.col("node")])
        .withColumn("t_corr", F.col("t") - F.coalesce(off_of[F.col("host")], F.lit(0).cast("long")))
        .withColumn("t_rel_s", (F.col("t_corr") - F.lit(int(t0_wall_ns))).cast("double") / F.lit(1e9))
        .select(*cols, "host", "site", "t_corr", "t_rel_s")
    )


def _lit_map(d: dict[str, Any], value_type: T.DataType):
    if not d:
        return F.create_map().cast(T.MapType(T.StringType(), value_type))
    parts = []
    for k, v in sorted(d.items()):
        parts += [F.lit(k), F.lit(v).cast(value_type)]
    return F.create_map(*parts)


# -- plan / manifest helpers (plain Python) --------------------------------------------
def node_places(plan_dict: dict[str, Any]) -> dict[str, tuple[str | None, str | None]]:
    """plan.json nodes -> {node: (host, site)}."""
    return {name: (n.get("host"), n.get("site")) for name, n in plan_dict.get("nodes", {}).items()}


def clock_offsets(manifest: dict[str, Any]) -> dict[str, int]:
    """manifest clock_offsets {host: {"offset_ns": n, ...} | n} -> {host: offset_ns}."""
    out = {}
    for host, v in (manifest.get("clock_offsets") or {}).items():
        off = v.get("offset_ns") if isinstance(v, dict) else v
        if off is not None:
            out[str(host)] = int(off)
    return out


# -- the job --------------------------------------------------------------------------
def ingest(spark: SparkSession, run_dir: str | Path, *, write: bool = True) -> Ingested:
    """Read ``run_dir/logs/*.jsonl`` into one DataFrame per event type present.

    With ``write`` (default) each event type is written as Parquet under
    ``analysis/parquet/<ev>/`` and the returned DataFrames read that Parquet.
    ``.report`` counts lines, events per type, malformed lines and unknown types.
    """
    run = Path(run_dir)
    logs = sorted((run / "logs").glob("*.jsonl"))
    if not logs:
        raise AnalysisError(f"{run / 'logs'}: no event logs (*.jsonl)")
    plan_dict = _read_json(run / "plan.json")
    manifest = _read_json(run / "manifest.json", required=False) or {}
    registry = all_events()
    report = IngestReport(files=len(logs))

    lines = (
        spark.read.text([str(p) for p in logs])
        .select(F.col("_metadata.file_name").alias("file"), "value")
    )
    parsed = parse_lines(lines).persist()
    try:
        counts = parsed.groupBy("ok", "ev", "file", "node").count().collect()
        for r in counts:
            report.lines += r["count"]
            if not r["ok"]:
                report.malformed += r["count"]
                report.malformed_by_file[r["file"]] = report.malformed_by_file.get(r["file"], 0) + r["count"]
            elif r["ev"] in registry:
                report.events[r["ev"]] = report.events.get(r["ev"], 0) + r["count"]
            else:
                report.unknown[r["ev"]] = report.unknown.get(r["ev"], 0) + r["count"]
        if report.malformed:
            for r in parsed.where(~F.col("ok")).select("file", "value").limit(5).collect():
                report.malformed_examples.append({"file": r["file"], "line": r["value"][:120]})

        t0 = manifest.get("t0_wall_ns")
        if t0 is None:
            row = parsed.where("ok").agg(F.min("t").alias("t0")).collect()[0]
            t0, report.t0_source = int(row["t0"] or 0), "first event (manifest has no t0_wall_ns)"
        report.t0_wall_ns = int(t0)

        nodes = node_places(plan_dict)
        offsets = clock_offsets(manifest)
        report.unknown_nodes = sorted({r["node"] for r in counts if r["ok"]} - set(nodes))
        out = Ingested()
        out.report = report
        pq_root = run / "analysis" / "parquet"
        if write and pq_root.exists():
            shutil.rmtree(pq_root)

        def one(ev: str) -> DataFrame:
            df = with_time(events_of(parsed, registry[ev]), nodes, offsets, report.t0_wall_ns)
            if not write:
                return df
            dest = pq_root / ev
            df.write.mode("overwrite").parquet(str(dest))
            return spark.read.schema(output_schema(registry[ev])).parquet(str(dest))

        evs = sorted(report.events)
        if write:  # one small Spark job per event type: run them concurrently (scheduling overlaps)
            with ThreadPoolExecutor(max_workers=WRITE_THREADS) as pool:
                for ev, df in zip(evs, pool.map(one, evs)):
                    out[ev] = df
        else:
            for ev in evs:
                out[ev] = one(ev)
        return out
    finally:
        parsed.unpersist()


def load_parquet(spark: SparkSession, run_dir: str | Path) -> dict[str, DataFrame]:
    """Re-open what :func:`ingest` wrote (re-analysis without re-parsing the logs)."""
    root = Path(run_dir) / "analysis" / "parquet"
    registry = all_events()
    out: dict[str, DataFrame] = {}
    if root.exists():
        for d in sorted(root.iterdir()):
            if d.is_dir() and d.name in registry:
                out[d.name] = spark.read.schema(output_schema(registry[d.name])).parquet(str(d))
    return out


def _read_json(path: Path, required: bool = True) -> Any:
    import json

    if not path.exists():
        if required:
            raise AnalysisError(f"{path}: missing (not a run directory?)")
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise AnalysisError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
