"""An independent evaluator of content-based filters (the analysis never imports the node's matcher).

Filter text: predicates ``[attr,op,value]`` separated by commas, all of which
must hold. ``op`` is one of ``eq`` ``=`` ``neq`` ``!=`` ``<`` ``<=`` ``>`` ``>=``
``isPresent`` ``str-prefix``; ``value`` is a number (``12``, ``-1.5e3``) or a
quoted string (``'STOCK'`` or ``"STOCK"``; a backslash escapes the quote and
itself: ``'O\\'Brien'``). Semantics (PADRES-style, typed):

* a predicate on an attribute the publication does not carry is false;
* a number value compares only with a number attribute (JSON booleans are not
  numbers), a string value only with a string attribute; a type mismatch is false
  (so ``neq`` needs the attribute present and of the same type);
* ``<``, ``<=``, ``>``, ``>=`` on strings compare lexicographically (code points);
* ``isPresent`` holds when the attribute is present and of the value's type;
  ``[attr,isPresent]`` without a value accepts any type;
* ``str-prefix`` needs a string value and a string attribute starting with it;
* the empty filter (no predicates) matches every publication.

Three implementations of the same semantics, none sharing code with the nodes'
matcher: :func:`matches` (plain Python, for tests and small things), and two in
Spark behind :func:`match_pairs`: :func:`filter_column` compiles each filter text
into a Spark column expression over the publication's attributes parsed once (one pass
over the publications, no join, no Python per row; used up to
``MAX_COMPILED_FILTERS`` distinct filters), and :func:`match_pairs_join`
(data-driven: predicates become rows joined to the publications' exploded
attributes, so thousands of filters cost one join, not thousands of
expressions). Tests check all three agree.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from testbed.errors import AnalysisError

OPS = ("eq", "=", "neq", "!=", "<", "<=", ">", ">=", "isPresent", "str-prefix")
_CANON = {"=": "eq", "!=": "neq"}
_NUM = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_ATTR = re.compile(r"[^\s,\[\]'\"]+")


class FilterSyntaxError(AnalysisError):
    """A filter text the evaluator cannot read."""


@dataclass(frozen=True)
class Predicate:
    attr: str
    op: str  # canonical: eq neq < <= > >= isPresent str-prefix
    value: float | str | None  # None only for [attr,isPresent]

    @property
    def kind(self) -> str | None:
        """'num', 'str' or None (no value)."""
        if self.value is None:
            return None
        return "str" if isinstance(self.value, str) else "num"


def parse(text: str | None) -> tuple[Predicate, ...]:
    """Filter text -> predicates. Raises FilterSyntaxError with the column of the problem."""
    s = text or ""
    i, n, out = 0, len(s), []

    def err(msg: str, at: int) -> FilterSyntaxError:
        return FilterSyntaxError(f"filter {s!r}: column {at + 1}: {msg}")

    def ws(j: int) -> int:
        while j < n and s[j].isspace():
            j += 1
        return j

    i = ws(i)
    while i < n:
        if s[i] != "[":
            raise err("expected '['", i)
        i = ws(i + 1)
        m = _ATTR.match(s, i)
        if not m:
            raise err("expected an attribute name", i)
        attr, i = m.group(0), ws(m.end())
        if i >= n or s[i] != ",":
            raise err("expected ',' after the attribute", i)
        i = ws(i + 1)
        op = next((o for o in sorted(OPS, key=len, reverse=True) if s.startswith(o, i)), None)
        if op is None:
            raise err(f"unknown operator (allowed: {', '.join(OPS)})", i)
        i = ws(i + len(op))
        value: float | str | None = None
        if i < n and s[i] == ",":
            i = ws(i + 1)
            if i < n and s[i] in "'\"":
                value, i = _quoted(s, i, err)
            else:
                m = _NUM.match(s, i)
                if not m:
                    raise err("expected a number or a quoted string", i)
                value, i = float(m.group(0)), m.end()
            i = ws(i)
        elif op != "isPresent":
            raise err(f"operator {op} needs a value", i)
        if i >= n or s[i] != "]":
            raise err("expected ']'", i)
        op = _CANON.get(op, op)
        if op == "str-prefix" and not isinstance(value, str):
            raise err("str-prefix needs a quoted string", i)
        out.append(Predicate(attr, op, value))
        i = ws(i + 1)
        if i < n:
            if s[i] != ",":
                raise err("expected ',' between predicates", i)
            i = ws(i + 1)
            if i >= n:
                raise err("trailing ','", i)
    return tuple(out)


def _quoted(s: str, i: int, err) -> tuple[str, int]:
    """The string literal starting at s[i] (a quote); a backslash escapes the quote and itself."""
    q, j, out = s[i], i + 1, []
    while j < len(s):
        c = s[j]
        if c == "\\" and j + 1 < len(s) and s[j + 1] in (q, "\\"):
            out.append(s[j + 1])
            j += 2
        elif c == q:
            return "".join(out), j + 1
        else:
            out.append(c)
            j += 1
    raise err("unterminated string", i)


def _kind(v: Any) -> str | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return "num" if not (isinstance(v, float) and math.isnan(v)) else None
    if isinstance(v, str):
        return "str"
    return None


def holds(p: Predicate, attrs: dict[str, Any]) -> bool:
    if p.attr not in attrs:
        return False
    v = attrs[p.attr]
    k = _kind(v)
    if p.op == "isPresent":
        return p.kind is None or k == p.kind
    if k is None or k != p.kind:
        return False
    a, b = (float(v), p.value) if k == "num" else (v, p.value)
    if p.op == "eq":
        return a == b
    if p.op == "neq":
        return a != b
    if p.op == "<":
        return a < b
    if p.op == "<=":
        return a <= b
    if p.op == ">":
        return a > b
    if p.op == ">=":
        return a >= b
    if p.op == "str-prefix":
        return a.startswith(b)
    raise AssertionError(p.op)


def matches(flt: str | Iterable[Predicate] | None, attrs: dict[str, Any]) -> bool:
    """Does a publication with ``attrs`` match the filter (text or parsed predicates)?"""
    preds = parse(flt) if flt is None or isinstance(flt, str) else tuple(flt)
    return all(holds(p, attrs) for p in preds)


# -- Spark ---------------------------------------------------------------------------
def predicate_rows(filters: Iterable[str | None]) -> tuple[list[tuple], list[tuple], dict[str, str]]:
    """Distinct filter texts -> (predicate rows, [(filter, n_preds)], {filter: syntax error})."""
    preds, counts, errors = [], [], {}
    for f in sorted({x or "" for x in filters}):
        try:
            ps = parse(f)
        except FilterSyntaxError as e:
            errors[f] = str(e)
            continue
        counts.append((f, len(ps)))
        for idx, p in enumerate(ps):
            preds.append((f, idx, p.attr, p.op, p.kind,
                          p.value if p.kind == "num" else None, p.value if p.kind == "str" else None))
    return preds, counts, errors


PRED_SCHEMA = "filter string, idx int, attr string, op string, kind string, num double, str string"


def exploded_attrs(pubs):
    """[pub_id, attrs(json text)] -> [pub_id, attr, kind('num'|'str'|null), num, str]."""
    from pyspark.sql import functions as F

    ty = F.schema_of_variant(F.col("v"))
    kind = (
        F.when(ty.isin("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE") | ty.startswith("DECIMAL"), "num")
        .when(ty == "STRING", "str")
    )
    return (
        pubs.select("pub_id", F.from_json("attrs", "map<string,variant>").alias("m"))
        .select("pub_id", F.explode("m").alias("attr", "v"))
        .select(
            "pub_id", "attr", kind.alias("kind"),
            F.try_variant_get("v", "$", "double").alias("num"),
            F.try_variant_get("v", "$", "string").alias("str"),
        )
        .select("pub_id", "attr", "kind",
                F.when(F.col("kind") == "num", F.col("num")).alias("num"),
                F.when(F.col("kind") == "str", F.col("str")).alias("str"))
    )


MAX_COMPILED_FILTERS = 200  # above: the join-based evaluator (one expression per filter grows the plan)
_NUM_TYPES = ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE")


def attrs_variant(attrs):
    """A publication's attributes (JSON text column) -> one variant (null where the text is not JSON).

    Parsed once per publication; each predicate then reads its attribute by path. Measured on
    180,000 publications and two filters: 1.4 s, against 1.9 s through a ``map<string,variant>``
    (``from_json`` builds every attribute's variant, used or not)."""
    from pyspark.sql import functions as F

    return F.try_parse_json(attrs)


def _kind_is(v, kind: str):
    from pyspark.sql import functions as F

    ty = F.schema_of_variant(v)
    if kind == "num":
        return ty.isin(*_NUM_TYPES) | ty.startswith("DECIMAL")
    return ty == "STRING"


def predicate_column(p: Predicate, doc):
    """One predicate as a boolean Spark column over the publication's attributes ``doc`` (a variant
    holding the JSON object: :func:`attrs_variant`; never null)."""
    from pyspark.sql import functions as F

    # the attribute by name ($['name']: a name holds no quote or bracket, see _ATTR); SQL null when
    # absent or when doc is not an object, a variant null when present with the value null
    v = F.try_variant_get(doc, f"$['{p.attr}']", "variant")
    present = v.isNotNull()
    if p.op == "isPresent" and p.kind is None:
        return F.coalesce(present, F.lit(False))
    same = present & _kind_is(v, p.kind)
    if p.op == "isPresent":
        return F.coalesce(same, F.lit(False))
    a = F.try_variant_get(v, "$", "double" if p.kind == "num" else "string")
    b = F.lit(float(p.value)) if p.kind == "num" else F.lit(p.value)
    cmp = {
        "eq": lambda: a == b, "neq": lambda: a != b, "<": lambda: a < b, "<=": lambda: a <= b,
        ">": lambda: a > b, ">=": lambda: a >= b, "str-prefix": lambda: a.startswith(b),
    }[p.op]()
    return F.coalesce(same & cmp, F.lit(False))


def filter_column(flt: str | Iterable[Predicate] | None, m):
    """A filter (text or predicates) compiled to one boolean Spark column over the attributes ``m``
    (:func:`attrs_variant`).

    Raises :class:`FilterSyntaxError` for an unreadable text. The empty filter is ``lit(True)``.
    """
    from pyspark.sql import functions as F

    preds = parse(flt) if flt is None or isinstance(flt, str) else tuple(flt)
    col = F.lit(True)
    for p in preds:
        col = col & predicate_column(p, m)
    return col


def match_pairs(spark, filters, pubs, *, compiled: bool | None = None, keep: tuple[str, ...] = ()):
    """Which publications match which filters.

    ``filters``: [filter] (texts, any number of rows), or a list of texts; ``pubs``: [pub_id, attrs].
    Returns ``(pairs, errors)``: pairs is a DataFrame [filter, pub_id] of every match;
    errors maps unparsable filter texts to their one-line message (those match nothing).
    ``keep``: columns of ``pubs`` carried into each pair (e.g. the publication's time: no join back).
    ``compiled`` None: compiled column expressions up to ``MAX_COMPILED_FILTERS`` distinct
    filters, else the join-based evaluator.
    """
    from pyspark.sql import functions as F

    if isinstance(filters, (list, tuple, set)):  # the texts, already collected
        texts = sorted({f or "" for f in filters})
    else:
        texts = sorted({r[0] or "" for r in filters.select("filter").distinct().collect()})
    good, errors = {}, {}
    for f in texts:
        try:
            good[f] = parse(f)
        except FilterSyntaxError as e:
            errors[f] = str(e)
    if compiled is None:
        compiled = len(good) <= MAX_COMPILED_FILTERS
    if not compiled:
        pairs, errors = match_pairs_join(spark, texts, pubs)
        if keep:
            pairs = pairs.join(pubs.select("pub_id", *keep), on="pub_id", how="inner").select("filter", "pub_id", *keep)
        return pairs, errors
    if not good:
        empty = spark.createDataFrame([], "filter string, pub_id string")
        return (empty.join(pubs.select("pub_id", *keep), on="pub_id").select("filter", "pub_id", *keep) if keep
                else empty), errors
    m = F.col("_m")
    hits = F.array(*[F.when(filter_column(ps, m), F.lit(f)) for f, ps in good.items()])
    pairs = (
        pubs.select("pub_id", *keep, attrs_variant(F.col("attrs")).alias("_m"))
        .select("pub_id", *keep, F.explode(F.array_compact(hits)).alias("filter"))
        .select("filter", "pub_id", *keep)
    )
    return pairs, errors


def match_pairs_join(spark, texts: list[str], pubs):
    """The join-based evaluator of :func:`match_pairs` (``texts``: distinct filter texts)."""
    from pyspark.sql import functions as F

    preds_l, counts_l, errors = predicate_rows(texts)
    preds = spark.createDataFrame(preds_l, PRED_SCHEMA)
    counts = spark.createDataFrame(counts_l, "filter string, n_preds int")
    pubs = pubs.select("pub_id", "attrs")
    a = exploded_attrs(pubs)

    same = F.col("a.kind") == F.col("p.kind")
    num_l, num_r = F.col("a.num"), F.col("p.num")
    str_l, str_r = F.col("a.str"), F.col("p.str")

    def cmp(fn):
        return same & F.when(F.col("p.kind") == "num", fn(num_l, num_r)).otherwise(fn(str_l, str_r))

    op = F.col("p.op")
    ok = (
        F.when(op == "isPresent", F.col("p.kind").isNull() | same)
        .when(op == "eq", cmp(lambda x, y: x == y))
        .when(op == "neq", cmp(lambda x, y: x != y))
        .when(op == "<", cmp(lambda x, y: x < y))
        .when(op == "<=", cmp(lambda x, y: x <= y))
        .when(op == ">", cmp(lambda x, y: x > y))
        .when(op == ">=", cmp(lambda x, y: x >= y))
        .when(op == "str-prefix", same & F.col("a.str").startswith(F.col("p.str")))
        .otherwise(F.lit(False))
    )
    held = (
        a.alias("a")
        .join(F.broadcast(preds.alias("p")), on=F.col("a.attr") == F.col("p.attr"), how="inner")
        .where(F.coalesce(ok, F.lit(False)))
        .select(F.col("p.filter").alias("filter"), F.col("p.idx").alias("idx"), F.col("a.pub_id").alias("pub_id"))
        .distinct()
        .groupBy("filter", "pub_id")
        .agg(F.count("*").alias("held"))
    )
    nonempty = (
        held.join(F.broadcast(counts), on="filter", how="inner")
        .where(F.col("held") == F.col("n_preds"))
        .select("filter", "pub_id")
    )
    match_all = counts.where(F.col("n_preds") == 0).select("filter")
    empty = F.broadcast(match_all).crossJoin(pubs.select("pub_id")).select("filter", "pub_id")
    return nonempty.unionByName(empty), errors
