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
    input_bytes: int = 0
    reused: bool = False  # true: the stored Parquet of an unchanged run was reused (no JSON parsed)

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
# analysis/parquet/ holds one directory per event type (``<ev>/``, plus ``_malformed/`` and
# ``_unknown/`` for the lines that are not events) and ``_ingest.json`` (t0, the report and the
# fingerprint of the inputs it was made from). Every directory shares one wide schema: the common
# header, host/site/t_corr, one struct column ``e_<ev>`` per event type parsed in the pass, and
# ``raw`` (the line's text, kept only for lines not parsed in the pass).
META = "_ingest.json"
FORMAT = 2  # bump when the stored layout changes (an older Parquet is then re-ingested)
MALFORMED, UNKNOWN = "_malformed", "_unknown"
_PART = "_part"  # the partition column of the one write (renamed to plain directories afterwards)


def struct_col(ev: str) -> str:
    return f"e_{ev}"


def _fields_schema(et: EventType) -> T.StructType:
    return T.StructType([T.StructField(k, spark_type(v), True) for k, v in et.fields.items()])


def stored_schema(inline: list[EventType]) -> T.StructType:
    """The schema of the Parquet files of one ingest (every event type's directory has it)."""
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


def inline_types(registry: dict[str, EventType], protocol: str | None) -> list[EventType]:
    """The event types parsed in the single pass: the runtime's, the run's protocol's and those of
    the protocols it builds on (``BUILDS_ON``, e.g. the pub/sub core's).

    Lines of any other declared type (rare: another protocol's events in this run) are kept as
    text in the pass and parsed by a second, small job over their own directory.
    """
    from testbed.protocols import run_event_protocols

    want = run_event_protocols(protocol)
    return [et for _, et in sorted(registry.items()) if want is None or et.protocol in want]


def fingerprint(logs: list[Path], plan_dict: dict[str, Any], manifest: dict[str, Any],
                registry: dict[str, EventType]) -> str:
    """What the stored Parquet depends on: the logs (name, size, mtime), the node placement, the
    clock offsets and t0, the event schemas and the storage format. Same fingerprint = reuse."""
    import hashlib
    import json

    h = hashlib.sha256()
    doc = {
        "format": FORMAT,
        "logs": [(p.name, st.st_size, st.st_mtime_ns) for p in logs for st in [p.stat()]],
        "nodes": sorted((k, list(v)) for k, v in node_places(plan_dict).items()),
        "protocol": plan_dict.get("protocol"),
        "offsets": sorted(clock_offsets(manifest).items()),
        "t0": manifest.get("t0_wall_ns"),
        "schemas": sorted((et.name, sorted(et.fields.items())) for et in registry.values()),
    }
    h.update(json.dumps(doc, sort_keys=True, default=str).encode())
    return h.hexdigest()


def ingest(spark: SparkSession, run_dir: str | Path, *, write: bool = True, reuse: bool = True) -> Ingested:
    """Read ``run_dir/logs/*.jsonl`` into one DataFrame per event type present.

    One Spark job reads every log once, parses each line's header and then its own event type's
    fields (explicit schemas from the registry), adds host/site/t_corr and writes everything,
    split by ``ev``, under ``analysis/parquet/``. The report's counts then come from the Parquet
    (a few small columns), not from a second read of the JSON. The returned DataFrames read the
    Parquet. With ``reuse`` (default) a run whose inputs did not change since its last ingest
    (same :func:`fingerprint`) is not parsed again: ``.report.reused`` is true.

    ``write=False`` returns the same DataFrames computed from the JSON (nothing stored).
    """
    import json

    run = Path(run_dir)
    logs = sorted((run / "logs").glob("*.jsonl"))
    if not logs:
        raise AnalysisError(f"{run / 'logs'}: no event logs (*.jsonl)")
    plan_dict = _read_json(run / "plan.json")
    manifest = _read_json(run / "manifest.json", required=False) or {}
    registry = all_events()
    pq_root = run / "analysis" / "parquet"
    fp = fingerprint(logs, plan_dict, manifest, registry)
    if write and reuse:
        old = _read_meta(pq_root)
        if old is not None and old.get("fingerprint") == fp:
            out = Ingested(load_parquet(spark, run, meta=old))
            known = IngestReport.__dataclass_fields__
            out.report = IngestReport(**{k: v for k, v in old["report"].items() if k in known})
            out.report.reused = True
            return out

    report = IngestReport(files=len(logs), input_bytes=sum(p.stat().st_size for p in logs))
    nodes = node_places(plan_dict)
    offsets = clock_offsets(manifest)
    inline = inline_types(registry, plan_dict.get("protocol"))
    inline_names = [et.name for et in inline]

    lines = (
        spark.read.text([str(p) for p in logs])
        .select(F.col("_metadata.file_name").alias("file"), "value")
    )
    parsed = parse_lines(lines)
    part = (
        F.when(~F.col("ok"), F.lit(MALFORMED))
        .when(F.col("ev").isin(list(registry)), F.col("ev"))
        .otherwise(F.lit(UNKNOWN))
    )
    wide = with_time(parsed.withColumn(_PART, part), nodes, offsets, 0)
    cols = [F.col("file"), F.col("ev").alias("ev_name")]
    cols += [F.col(k) for k in COMMON_FIELDS if k != "ev"]
    cols += [F.col("host"), F.col("site"), F.col("t_corr")]
    cols += [F.when(F.col(_PART) == et.name, F.from_json("value", _fields_schema(et))).alias(struct_col(et.name))
             for et in inline]
    cols += [F.when(~F.col(_PART).isin(inline_names), F.col("value")).alias("raw"), F.col(_PART)]
    stored = wide.select(*cols)

    if not write:
        return _ingest_in_memory(spark, stored, report, manifest, registry, inline_names)

    staging = pq_root / "_staging"
    if pq_root.exists():
        shutil.rmtree(pq_root)
    stored.write.partitionBy(_PART).parquet(str(staging))

    # the report, from the stored Parquet (small columns only)
    counted = spark.read.schema(stored_schema(inline).add(_PART, T.StringType())).parquet(str(staging))
    agg = counted.groupBy(_PART, "ev_name", "file", "node").agg(F.count("*").alias("n"), F.min("t").alias("t_min"))
    rows = agg.collect()
    t_min = _tally(rows, report)
    report.events = dict(sorted(report.events.items()))
    report.unknown_nodes = sorted({r["node"] for r in rows if r[_PART] != MALFORMED} - set(nodes))
    t0 = manifest.get("t0_wall_ns")
    if t0 is None:
        t0, report.t0_source = int(t_min or 0), "first event (manifest has no t0_wall_ns)"
    report.t0_wall_ns = int(t0)

    # plain directories per event type; the few lines of types not parsed in the pass get their own job
    for d in sorted(staging.iterdir()):
        if d.is_dir() and d.name.startswith(f"{_PART}="):
            d.rename(pq_root / d.name.split("=", 1)[1])
    shutil.rmtree(staging)
    if report.malformed:
        bad = spark.read.schema(stored_schema(inline)).parquet(str(pq_root / MALFORMED))
        for r in bad.select("file", "raw").limit(5).collect():
            report.malformed_examples.append({"file": r["file"], "line": (r["raw"] or "")[:120]})
    late = [ev for ev in report.events if ev not in inline_names]
    for ev in late:
        _parse_late(spark, pq_root, registry[ev], inline)

    meta = {"format": FORMAT, "fingerprint": fp, "t0_wall_ns": report.t0_wall_ns,
            "inline": inline_names, "report": report.to_dict()}
    (pq_root / META).write_text(json.dumps(meta, indent=1) + "\n")
    out = Ingested(load_parquet(spark, run, meta=meta))
    out.report = report
    return out


def _parse_late(spark: SparkSession, root: Path, et: EventType, inline: list[EventType]) -> None:
    """Re-store ``root/<ev>/`` (lines kept as text) with its ``e_<ev>`` struct parsed."""
    src = root / et.name
    tmp = root / f"_{et.name}.tmp"
    df = spark.read.schema(stored_schema(inline)).parquet(str(src))
    keep = [F.col(c) for c in ("file", "ev_name", *[k for k in COMMON_FIELDS if k != "ev"], "host", "site", "t_corr")]
    df.select(*keep, F.from_json("raw", _fields_schema(et)).alias(struct_col(et.name))).write.parquet(str(tmp))
    shutil.rmtree(src)
    tmp.rename(src)


def _tally(rows, report: IngestReport) -> int | None:
    """Count (part, ev_name, file) rows of lines into ``report``; returns the earliest ``t`` seen."""
    t_min = None
    for r in rows:
        report.lines += r["n"]
        if r[_PART] == MALFORMED:
            report.malformed += r["n"]
            report.malformed_by_file[r["file"]] = report.malformed_by_file.get(r["file"], 0) + r["n"]
            continue
        t_min = r["t_min"] if t_min is None or (r["t_min"] is not None and r["t_min"] < t_min) else t_min
        if r[_PART] == UNKNOWN:
            report.unknown[r["ev_name"]] = report.unknown.get(r["ev_name"], 0) + r["n"]
        else:
            report.events[r[_PART]] = report.events.get(r[_PART], 0) + r["n"]
    return t_min


def _ingest_in_memory(spark, stored: DataFrame, report: IngestReport, manifest: dict[str, Any],
                      registry: dict[str, EventType], inline_names: list[str]) -> Ingested:
    """``write=False``: the same DataFrames straight from the JSON (each action re-reads the logs)."""
    agg = stored.groupBy(_PART, "ev_name", "file").agg(F.count("*").alias("n"), F.min("t").alias("t_min")).collect()
    t_min = _tally(agg, report)
    t0 = manifest.get("t0_wall_ns")
    if t0 is None:
        t0, report.t0_source = int(t_min or 0), "first event (manifest has no t0_wall_ns)"
    report.t0_wall_ns = int(t0)
    out = Ingested()
    out.report = report
    for ev in sorted(report.events):
        et = registry[ev]
        df = stored.where(F.col(_PART) == ev)
        if ev not in inline_names:
            df = df.withColumn(struct_col(ev), F.from_json("raw", _fields_schema(et)))
        out[ev] = select_event(df, et, report.t0_wall_ns)
    return out


def _read_meta(root: Path) -> dict[str, Any] | None:
    import json

    try:
        meta = json.loads((root / META).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == FORMAT else None


def load_parquet(spark: SparkSession, run_dir: str | Path, *, meta: dict[str, Any] | None = None) -> dict[str, DataFrame]:
    """Re-open what :func:`ingest` stored (re-analysis without re-parsing the logs).

    Without ``meta``, this is :func:`ingest` with reuse: the stored Parquet when it is current (no
    Spark job), else the logs are ingested again (an older storage format, changed logs).
    """
    if meta is None:
        return dict(ingest(spark, run_dir))
    root = Path(run_dir) / "analysis" / "parquet"
    registry = all_events()
    out: dict[str, DataFrame] = {}
    for ev in sorted(meta["report"]["events"]):
        if ev in registry and (root / ev).is_dir():
            out[ev] = read_event(spark, root / ev, registry[ev], int(meta["t0_wall_ns"]))
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
