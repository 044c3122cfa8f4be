"""Logs -> Parquet, without Spark: ``logs/*.jsonl`` converted by pyarrow in this process.

Schemas come from the event registry only (``testbed.nodes.runtime.events``):
``str`` -> string, ``int`` -> long, ``float`` -> double, ``bool`` -> boolean,
``json`` -> string holding the value's JSON text (compact; a JSON string as
its content), ``list[T]`` -> array<T>. An undeclared field never reaches an
analysis; a field whose value does not fit its type is null (the event is kept).

The logs are streamed per file in blocks (``INGEST_THREADS`` converted at once, merged in order),
under ``analysis/parquet/<ev>/`` of the run with ``_ingest.json`` (t0, the inputs' fingerprint, the
report): :func:`ensure_parquet` makes it when missing or stale. A killed node can leave a torn last
line; every line that is not a JSON object with the common fields is counted (per file, with a few
examples) and dropped, never fatal -- so is a line any step cannot decode (whatever it raises: deep
nesting, a ``t`` beyond 64 bits) and a line whose ``node`` is not its file's (``b1.jsonl`` holds b1's
events only). Event types missing from the registry are counted too.

Every event row gets ``host`` and ``site`` (from plan.json) and ``t_corr`` (the wall clock corrected
by the manifest clock offset of its host: ``t - offset_ns``). The Spark side (reading the Parquet,
``t_rel_s``) is :mod:`testbed.analysis.ingest`.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.errors import AnalysisError
from testbed.nodes.runtime.events import COMMON_FIELDS, EventType
from testbed.registry import all_events

MALFORMED, UNKNOWN = "_malformed", "_unknown"  # the stored tables of dropped lines

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
# -- the stored layout ---------------------------------------------------------------
# analysis/parquet/ holds one directory per event type (``<ev>/``, plus ``_malformed/`` and
# ``_unknown/`` for the lines that are not events) and ``_ingest.json`` (t0, the report and the
# fingerprint of the inputs it was made from). ``<ev>/`` has the common header (``ev`` as
# ``ev_name``), ``file``, host/site/t_corr and one struct column ``e_<ev>`` of its own fields;
# ``_unknown/`` and ``_malformed/`` have ``raw`` (the line's text) instead. Readers name the
# columns they want (:func:`stored_schema`); a column a directory lacks reads as null.
META = "_ingest.json"
FORMAT = 3  # bump when the stored layout changes (an older Parquet is then re-ingested)


def struct_col(ev: str) -> str:
    return f"e_{ev}"


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


# -- the Arrow ingest (driver side, streamed) ---------------------------------------------------
# Each log is read in blocks of BLOCK_BYTES (cut at a newline). pyarrow's JSON reader (C++,
# multithreaded) parses every line's header with an explicit schema; the lines are grouped by
# ``ev`` and each group is parsed again with its own event type's schema. A block where the fast
# parser refuses something (a torn or garbage line, a field of the wrong type) is parsed line by
# line in Python with the same rules, so one bad line costs one block's slow path, never the run.
# Blocks are converted INGEST_THREADS at a time (_convert_threaded); small blocks keep the threads
# busy: on the 1.17M-event benchmark 3 threads of 4 MB blocks took 2.4-2.5 s where one thread of
# 32 MB blocks took 3.3-4.1 s (docs/benchmarks.md).
BLOCK_BYTES = 4 << 20
# Rows per Parquet row group (and buffered per event type before one is written). A row group is
# the smallest piece Spark splits a file into: groups of equal, modest size let it give every core
# an equal share of a large event type (3 groups of 390k/330k/270k deliveries made one core scan
# 60% of them while the other waited; docs/benchmarks.md).
_ROWS_PER_FLUSH = 1 << 16


def arrow_type(ty: str):
    import pyarrow as pa

    return {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(),
            "json": pa.string(), "list[str]": pa.list_(pa.string()), "list[int]": pa.list_(pa.int64())}[ty]


def _arrow_fields(et: EventType):
    import pyarrow as pa

    return pa.struct([pa.field(k, arrow_type(v)) for k, v in et.fields.items()])


def _stored_arrow_schema(et: EventType | None):
    """The Parquet schema of one directory: ``<ev>/`` (et given), ``_unknown/`` and ``_malformed/``
    (et None: the line's text in ``raw``). A reader asks for the columns it needs; a column a
    directory does not have reads as null."""
    import pyarrow as pa

    head = [pa.field("file", pa.string()), pa.field("ev_name", pa.string()), pa.field("t", pa.int64()),
            pa.field("m", pa.int64()), pa.field("node", pa.string()), pa.field("host", pa.string()),
            pa.field("site", pa.string()), pa.field("t_corr", pa.int64())]
    if et is None:
        tail = [pa.field("raw", pa.string())]
    else:  # an event type without fields of its own has no struct (Parquet has no empty groups)
        tail = [pa.field(struct_col(et.name), _arrow_fields(et))] if et.fields else []
    return pa.schema(head + tail)


def _fast_json(data: list[bytes], schema):
    """pyarrow's parse of the lines with an explicit schema, or None when it refuses any line (or a
    line held more than one value)."""
    import pyarrow as pa
    from pyarrow import json as pj

    if not data:
        return None
    try:
        tbl = pj.read_json(pa.BufferReader(b"\n".join(data)),
                           read_options=pj.ReadOptions(use_threads=True, block_size=4 << 20),
                           parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowException):
        return None
    return tbl if tbl.num_rows == len(data) else None
_ENCODE = None


def loads_lines(lines: list[bytes]) -> tuple[list[Any], bool]:
    """(``json.loads`` of each line, exact): orjson (about 5x faster) where it decodes, ``json`` for a
    line it refuses (NaN, a lone surrogate). ``exact`` is False when orjson decoded some line: an
    integer beyond 64 bits then came out as a float (``json`` keeps it an int), so a text made from
    such a value must be checked (:func:`_inexact`). A ``json`` field's decode was 2 of the 5 s of
    the 1.17M-event benchmark's ingest (docs/benchmarks.md)."""
    import json

    try:
        import orjson
    except ImportError:  # a dependency (pyproject.toml), but the result is the same without it
        return [json.loads(x) for x in lines], True
    fast, slow, bad = orjson.loads, json.loads, orjson.JSONDecodeError
    out = []
    for x in lines:
        try:
            out.append(fast(x))
        except bad:
            out.append(slow(x))
    return out, False


def _utf8(v: Any, ty: str) -> Any:
    """A converted value Arrow can store: a ``json`` text with a lone surrogate as its ASCII JSON
    text (the same value to a JSON reader), a ``str`` with it replaced by U+FFFD."""
    import json

    if isinstance(v, list):
        return [_utf8(x, ty[5:-1]) for x in v]
    if not isinstance(v, str):
        return v
    try:
        v.encode("utf-8")
        return v
    except UnicodeEncodeError:
        if ty == "json":
            try:
                return json.dumps(json.loads(v), separators=(",", ":"))
            except ValueError:  # a JSON string's content, not a JSON text
                pass
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in v)


def _inexact(v: Any) -> bool:
    """Could ``v`` (a converted field) differ between an orjson and a json decode? Only a float of
    1e16 or more can stand for a big integer, and Python writes every such float with ``e+``."""
    if isinstance(v, str):
        return "e+" in v
    if isinstance(v, list):
        return any(_inexact(x) for x in v)
    return False


def _to_text(v: Any) -> str:
    global _ENCODE
    if isinstance(v, str):
        return v
    if _ENCODE is None:
        import json

        _ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    return _ENCODE(v)


def convert(v: Any, ty: str) -> Any:
    """One JSON value -> the registry type ``ty``, or None when it does not fit (the event is kept, the
    field is null). ``str``/``json`` keep a string as is and any other value as its compact JSON text."""
    if v is None:
        return None
    if ty in ("str", "json"):
        return _to_text(v)
    if ty == "int":
        return v if type(v) is int and -(1 << 63) <= v < (1 << 63) else None
    if ty == "float":
        return float(v) if type(v) in (int, float) else None
    if ty == "bool":
        return v if type(v) is bool else None
    if ty.startswith("list["):
        if not isinstance(v, list):
            return None
        return [convert(x, ty[5:-1]) for x in v]
    raise AnalysisError(f"unknown field type {ty!r}")


class _Sink:
    """Buffered Parquet writers, one file per directory (event type, ``_unknown``, ``_malformed``)."""

    def __init__(self, root: Path):
        self.root = root
        self.buf: dict[str, list] = {}
        self.rows: dict[str, int] = {}
        self.writers: dict[str, Any] = {}
        self.schemas: dict[str, Any] = {}

    def add(self, key: str, table) -> None:
        if table.num_rows == 0:
            return
        self.schemas.setdefault(key, table.schema)
        self.buf.setdefault(key, []).append(table)
        self.rows[key] = self.rows.get(key, 0) + table.num_rows
        if self.rows[key] >= _ROWS_PER_FLUSH:
            self.flush(key)

    def flush(self, key: str, final: bool = False) -> None:
        """Write the buffered rows of ``key`` as row groups of exactly ``_ROWS_PER_FLUSH`` rows (the
        rest stays buffered, unless ``final``)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        parts = self.buf.pop(key, [])
        self.rows[key] = 0
        if not parts:
            return
        table = pa.concat_tables(parts)
        n = table.num_rows if final else table.num_rows // _ROWS_PER_FLUSH * _ROWS_PER_FLUSH
        if n < table.num_rows:
            self.buf[key] = [table.slice(n)]
            self.rows[key] = table.num_rows - n
        if n == 0:
            return
        w = self.writers.get(key)
        if w is None:
            d = self.root / key
            d.mkdir(parents=True, exist_ok=True)
            w = self.writers[key] = pq.ParquetWriter(str(d / "part-00000.parquet"), self.schemas[key],
                                                     compression="snappy")
        w.write_table(table.slice(0, n), row_group_size=_ROWS_PER_FLUSH)

    def close(self) -> None:
        for key in list(self.buf):
            self.flush(key, final=True)
        for w in self.writers.values():
            w.close()


class _Collect:
    """The sink of one block converted beside others: keeps its tables for the in-order merge."""

    def __init__(self):
        self.items: list = []

    def add(self, key: str, table) -> None:
        if table.num_rows:
            self.items.append((key, table))


def _blocks(path: Path):
    """The file's bytes in blocks of about BLOCK_BYTES, each ending at a line end (the last one may not)."""
    with open(path, "rb") as f:
        rest = b""
        while True:
            chunk = f.read(BLOCK_BYTES)
            if not chunk:
                if rest:
                    yield rest
                return
            buf = rest + chunk if rest else chunk
            cut = buf.rfind(b"\n")
            if cut < 0:
                rest = buf
                continue
            yield buf[:cut + 1]
            rest = buf[cut + 1:]


class _Converter:
    """Lines of one run -> Arrow tables into a :class:`_Sink`, with the report's tallies.

    A block is parsed once by pyarrow with the union of every event type's fields (those declared
    with one type across the registry; ``json`` fields and names declared with different types by
    different event types are left out), then split by ``ev``. The fields left out are parsed per
    event type afterwards (only for the types that have them: a ``json`` field costs a Python
    ``json.loads`` of its lines). A block the union parse refuses (a torn line, a field of the
    wrong type, an undeclared field clashing with a declared one) takes :meth:`_by_type`: header
    first, then each type's own schema, line by line in Python where pyarrow refuses again.
    """

    def __init__(self, registry: dict[str, EventType], nodes, offsets: dict[str, int], sink: _Sink,
                 report: IngestReport, protocols: set[str] | None = None):
        import pyarrow as pa

        self.registry, self.sink, self.report = registry, sink, report
        self.host_of = {n: h for n, (h, _) in nodes.items()}
        self.site_of = {n: s for n, (_, s) in nodes.items()}
        self.offsets = offsets
        self.nodes_seen: set[str] = set()
        self.t_min: int | None = None
        common = [pa.field(k, arrow_type(v)) for k, v in COMMON_FIELDS.items()]
        self.header = pa.schema(common)
        types: dict[str, set[str]] = {}
        # the union covers the run's expected event types (``protocols``: its own, what it builds on,
        # the runtime's); another type's lines parse with their own schema after the split
        for et in registry.values():
            if protocols is None or et.protocol in protocols:
                for k, v in et.fields.items():
                    types.setdefault(k, set()).add(v)
        self.shared = {k: next(iter(v)) for k, v in types.items() if len(v) == 1 and v != {"json"}}
        self.union = pa.schema(common + [pa.field(k, arrow_type(v)) for k, v in sorted(self.shared.items())])
        self.fast_schema = {}  # per type: every non-json field (the per-type parse)
        for name, et in registry.items():
            self.fast_schema[name] = pa.schema(common + [pa.field(k, arrow_type(v)) for k, v in et.fields.items()
                                                         if v != "json"])

    def for_block(self) -> "_Converter":
        """A converter for one block run beside others: the same tables, its own sink
        (:class:`_Collect`), report and tallies, merged in block order by :meth:`merge`."""
        import copy

        c = copy.copy(self)
        c.sink, c.report, c.nodes_seen, c.t_min = _Collect(), IngestReport(), set(), None
        return c

    def merge(self, c: "_Converter") -> None:
        """Add what the block converter ``c`` produced, as if this converter had read its block."""
        for key, table in c.sink.items:
            self.sink.add(key, table)
        r, o = self.report, c.report
        r.lines += o.lines
        r.malformed += o.malformed
        for mine, theirs in ((r.malformed_by_file, o.malformed_by_file), (r.unknown, o.unknown),
                             (r.events, o.events)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v
        r.malformed_examples += o.malformed_examples[:max(0, 5 - len(r.malformed_examples))]
        self.nodes_seen |= c.nodes_seen
        if c.t_min is not None and (self.t_min is None or c.t_min < self.t_min):
            self.t_min = c.t_min

    def block(self, fname: str, block: bytes) -> None:
        lines = [x for x in block.split(b"\n") if x.strip()]
        if lines:
            self._guarded(fname, lines)

    def _guarded(self, fname: str, lines: list[bytes]) -> None:
        """:meth:`_lines` on a converter of its own, merged only if it finished: a line that makes
        any step raise (deep nesting: RecursionError; a number beyond 64 bits: OverflowError; any
        other exception) is found by halving and counted malformed, the rest converted as usual."""
        c = self.for_block()
        try:
            c._lines(fname, lines)
        except Exception:  # noqa: BLE001 - one crafted line must not stop the analysis
            if len(lines) == 1:
                c = self.for_block()
                c.report.lines += 1
                c._malformed(fname, lines)
            else:
                mid = len(lines) // 2
                self._guarded(fname, lines[:mid])
                self._guarded(fname, lines[mid:])
                return
        self.merge(c)

    def _lines(self, fname: str, lines: list[bytes]) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        self.report.lines += len(lines)
        tbl = _fast_json(lines, self.union)
        if tbl is None:
            self._by_type(fname, lines)
            return
        bad = pc.or_kleene(pc.or_kleene(pc.is_null(tbl.column("t")), pc.is_null(tbl.column("node"))),
                           pc.is_null(tbl.column("ev")))
        own = _file_node(fname)
        if own is not None:  # a line of b1's log that claims to be b2's is not counted for b2
            bad = pc.or_kleene(bad, pc.not_equal(tbl.column("node"), own))
        if pc.any(bad).as_py():
            bad_np = bad.to_numpy(zero_copy_only=False)
            self._malformed(fname, [lines[i] for i in np.flatnonzero(bad_np)])
            keep = np.flatnonzero(~bad_np)
            tbl = tbl.take(pa.array(keep))
            lines = [lines[i] for i in keep]
            if not lines:
                return
        enc = pc.dictionary_encode(tbl.column("ev").combine_chunks())
        codes = enc.indices.to_numpy(zero_copy_only=False)
        for code, e in enumerate(enc.dictionary.to_pylist()):
            idx = np.flatnonzero(codes == code)
            whole = len(idx) == len(lines)
            et = self.registry.get(e)
            need = ["t", "m", "node"] + ([k for k in et.fields if k in self.shared] if et is not None else [])
            sub = tbl.select(need) if whole else tbl.select(need).take(pa.array(idx))
            sub_lines = lines if whole else [lines[i] for i in idx]
            if et is None:
                self._unknown(fname, e, sub, sub_lines)
                continue
            cols = {k: sub.column(k) for k in et.fields if k in self.shared}
            rest = [k for k in et.fields if k not in cols]
            if rest:
                cols.update(self._fields(et, sub_lines, rest, None))
            self._event(fname, et, sub, cols)

    def _fields(self, et: EventType, lines: list[bytes], names: list[str], objs) -> dict[str, Any]:
        """The fields ``names`` of ``et`` from its lines: pyarrow for the plain ones, Python for ``json``
        fields and whatever pyarrow refuses (``objs``: the lines already decoded, or None)."""
        import json

        import pyarrow as pa

        out: dict[str, Any] = {}
        plain = [k for k in names if et.fields[k] != "json"]
        if plain and objs is None:
            fast = _fast_json(lines, self.fast_schema[et.name])
            if fast is not None:
                out = {k: fast.column(k) for k in plain}
        left = [k for k in names if k not in out]
        if left:
            exact = objs is not None
            if objs is None:
                objs, exact = loads_lines(lines)  # the header parsed: every line is a JSON object
            for k in left:
                ty = et.fields[k]
                vals = [convert(d.get(k), ty) for d in objs]
                if not exact and ty not in ("int", "float", "bool"):  # those convert alike either way
                    for i, v in enumerate(vals):
                        if _inexact(v):  # decoded again by json: a big integer stays an integer
                            vals[i] = convert(json.loads(lines[i]).get(k), ty)
                try:
                    out[k] = pa.array(vals, arrow_type(ty))
                except UnicodeEncodeError:  # a lone surrogate ("\\ud800" in the line): not UTF-8
                    out[k] = pa.array([_utf8(v, ty) for v in vals], arrow_type(ty))
        return out

    def _by_type(self, fname: str, lines: list[bytes]) -> None:
        """The slow path of a block: the header, then each type's own parse (see the class doc)."""
        import json

        import pyarrow as pa

        head = _fast_json(lines, self.header)
        objs: list | None = None
        if head is not None:
            t, m, node, ev = (head.column(k).to_pylist() for k in ("t", "m", "node", "ev"))
        else:
            t, m, node, ev, objs = [], [], [], [], []
            for x in lines:
                try:
                    d = json.loads(x)
                except ValueError:
                    d = None
                if not isinstance(d, dict) or type(d.get("t")) is not int or not -(1 << 63) <= d["t"] < (1 << 63) \
                        or d.get("node") is None or d.get("ev") is None:
                    t.append(None), m.append(None), node.append(None), ev.append(None), objs.append(None)
                    continue
                t.append(d["t"]), m.append(convert(d.get("m"), "int"))
                node.append(_to_text(d["node"])), ev.append(_to_text(d["ev"])), objs.append(d)
        groups: dict[str, list[int]] = {}
        bad: list[int] = []
        own = _file_node(fname)
        for i, e in enumerate(ev):
            if e is None or t[i] is None or node[i] is None or (own is not None and node[i] != own):
                bad.append(i)
            else:
                groups.setdefault(e, []).append(i)
        if bad:
            self._malformed(fname, [lines[i] for i in bad])
        for e, idx in groups.items():
            sub = pa.table({"t": pa.array([t[i] for i in idx], pa.int64()), "m": pa.array([m[i] for i in idx], pa.int64()),
                            "node": pa.array([node[i] for i in idx], pa.string())})
            sub_lines = [lines[i] for i in idx]
            et = self.registry.get(e)
            if et is None:
                self._unknown(fname, e, sub, sub_lines)
                continue
            self._event(fname, et, sub, self._fields(et, sub_lines, list(et.fields),
                                                     None if objs is None else [objs[i] for i in idx]))

    def _malformed(self, fname: str, bad: list[bytes]) -> None:
        import pyarrow as pa

        self.report.malformed += len(bad)
        self.report.malformed_by_file[fname] = self.report.malformed_by_file.get(fname, 0) + len(bad)
        raw = [x.decode("utf-8", "replace") for x in bad]
        for r in raw[: max(0, 5 - len(self.report.malformed_examples))]:
            self.report.malformed_examples.append({"file": fname, "line": r[:120]})
        n = len(raw)
        schema = _stored_arrow_schema(None)
        arrays = [pa.repeat(pa.scalar(fname, pa.string()), n)]
        arrays += [pa.nulls(n, f.type) for f in list(schema)[1:-1]]
        arrays.append(pa.array(raw, pa.string()))
        self.sink.add(MALFORMED, pa.Table.from_arrays(arrays, schema=schema))

    def _unknown(self, fname: str, ev: str, sub, lines: list[bytes]) -> None:
        import pyarrow as pa

        self.report.unknown[ev] = self.report.unknown.get(ev, 0) + len(lines)
        raw = pa.array([x.decode("utf-8", "replace") for x in lines], pa.string())
        self.sink.add(UNKNOWN, self._table(fname, ev, sub, raw, _stored_arrow_schema(None)))

    def _event(self, fname: str, et: EventType, sub, cols: dict[str, Any]) -> None:
        import pyarrow as pa

        self.report.events[et.name] = self.report.events.get(et.name, 0) + sub.num_rows
        schema = _stored_arrow_schema(et)
        last = None
        if et.fields:
            arrs = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in (cols[k] for k in et.fields)]
            last = pa.StructArray.from_arrays(arrs, fields=list(_arrow_fields(et)))
        self.sink.add(et.name, self._table(fname, et.name, sub, last, schema))

    def _table(self, fname: str, ev: str, sub, last, schema):
        """file, ev_name, t, m, node, host, site, t_corr (+ ``last``: the struct or ``raw``)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = sub.num_rows
        t = sub.column("t").combine_chunks()
        node = sub.column("node").combine_chunks()
        enc = pc.dictionary_encode(node)
        names = enc.dictionary.to_pylist()
        self.nodes_seen.update(names)
        low = pc.min(t).as_py()
        if low is not None and (self.t_min is None or low < self.t_min):
            self.t_min = low
        hosts = [self.host_of.get(x) for x in names]
        host = pc.take(pa.array(hosts, pa.string()), enc.indices)
        site = pc.take(pa.array([self.site_of.get(x) for x in names], pa.string()), enc.indices)
        offs = [self.offsets.get(h, 0) if h is not None else 0 for h in hosts]
        t_corr = pc.subtract(t, pc.take(pa.array(offs, pa.int64()), enc.indices)) if any(offs) else t
        arrays = [pa.repeat(pa.scalar(fname, pa.string()), n), pa.repeat(pa.scalar(ev, pa.string()), n),
                  t, sub.column("m").combine_chunks(), node, host, site, t_corr]
        if last is not None:
            arrays.append(last)
        return pa.Table.from_arrays(arrays, schema=schema)


INGEST_THREADS = 3


def _file_node(fname: str) -> str | None:
    """The node whose log ``fname`` is (``<node>.jsonl``), or None for another name."""
    return fname[:-len(".jsonl")] if fname.endswith(".jsonl") and len(fname) > len(".jsonl") else None


def _convert_threaded(conv: "_Converter", logs: list[Path], threads: int) -> None:
    """The blocks of every log converted ``threads`` at a time, merged in file and block order (the
    Parquet and the report are those of one thread). pyarrow's JSON parse and Parquet encoding run
    without the GIL, so one block's parse overlaps another's Python work (measured on the 1.17M-event
    benchmark: docs/benchmarks.md). At most ``threads + 1`` blocks are in memory."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    def work(fname: str, block: bytes) -> "_Converter":
        c = conv.for_block()
        c.block(fname, block)
        return c

    pending: deque = deque()
    with ThreadPoolExecutor(threads, thread_name_prefix="testbed-ingest") as ex:
        try:
            for p in logs:
                for block in _blocks(p):
                    pending.append(ex.submit(work, p.name, block))
                    if len(pending) > threads:
                        conv.merge(pending.popleft().result())
            while pending:
                conv.merge(pending.popleft().result())
        finally:
            for f in pending:
                f.cancel()


def convert_logs(logs: list[Path], out: Path, registry: dict[str, EventType], nodes, offsets: dict[str, int],
                 report: IngestReport, protocol: str | None = None) -> int | None:
    """Every log, streamed block by block, into Parquet under ``out/<ev>/``, ``out/_unknown/`` and
    ``out/_malformed/``; fills ``report``; returns the earliest ``t`` of an event line (or None).
    Memory is bounded by a few blocks and the rows buffered per event type, not by the run's size.
    ``INGEST_THREADS`` blocks are converted at once (the output is one thread's)."""
    sink = _Sink(out)
    from testbed.registry import run_event_protocols

    conv = _Converter(registry, nodes, offsets, sink, report, run_event_protocols(protocol))
    try:
        if INGEST_THREADS <= 1:
            for p in logs:
                for block in _blocks(p):
                    conv.block(p.name, block)
        else:
            _convert_threaded(conv, logs, INGEST_THREADS)
    finally:
        sink.close()
    report.unknown_nodes = sorted(conv.nodes_seen - set(nodes))
    report.events = dict(sorted(report.events.items()))
    return conv.t_min


def ensure_parquet(run_dir: str | Path, *, reuse: bool = True, target: Path | None = None) -> tuple[dict[str, Any], IngestReport]:
    """The run's stored Parquet, made from its logs when missing or stale (no Spark: pyarrow in this
    process). Returns the stored metadata (``_ingest.json``: t0, fingerprint, report) and the report
    (``.reused`` true when the stored Parquet was current). ``target``: write there instead of the
    run's ``analysis/parquet/`` (never reused)."""
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
    if target is None and reuse:
        old = _read_meta(pq_root)
        if old is not None and old.get("fingerprint") == fp:
            known = IngestReport.__dataclass_fields__
            report = IngestReport(**{k: v for k, v in old["report"].items() if k in known})
            report.reused = True
            return old, report

    report = IngestReport(files=len(logs), input_bytes=sum(p.stat().st_size for p in logs))
    nodes = node_places(plan_dict)
    target = pq_root if target is None else target
    if target.exists():
        shutil.rmtree(target)
    staging = target.parent / (target.name + ".staging")
    if staging.exists():
        shutil.rmtree(staging)
    t_min = convert_logs(logs, staging, registry, nodes, clock_offsets(manifest), report, plan_dict.get("protocol"))
    staging.mkdir(parents=True, exist_ok=True)
    t0 = manifest.get("t0_wall_ns")
    if t0 is None:
        t0, report.t0_source = int(t_min or 0), "first event (manifest has no t0_wall_ns)"
    report.t0_wall_ns = int(t0)
    meta = {"format": FORMAT, "fingerprint": fp, "t0_wall_ns": report.t0_wall_ns,
            "inline": sorted(report.events), "report": report.to_dict()}
    (staging / META).write_text(json.dumps(meta, indent=1) + "\n")
    staging.rename(target)
    return meta, report


def _read_meta(root: Path) -> dict[str, Any] | None:
    import json

    try:
        meta = json.loads((root / META).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == FORMAT else None


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
