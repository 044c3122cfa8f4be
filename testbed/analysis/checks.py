"""History checks: the result type and helpers every protocol's checks use.

A check is a function ``check(ctx: AnalysisContext) -> CheckResult``. A
protocol lists its checks in ``<its package>/analysis/checks.py`` as a module-level
``CHECKS = [...]``; the protocol registry (:mod:`testbed.registry`) finds
them (``testbed.registry.checks_for(protocol)``). A protocol built on another
(``BUILDS_ON``) includes that one's checks by listing them beside its own.

A completeness check (every expected delivery made) leaves its details in
``ctx.results[COMPLETENESS]``, with ``attributed_by_fault`` ({fault: misses it excuses}); the
generic metrics read the per-fault counts from there, whatever the protocol.
"""

from __future__ import annotations

COMPLETENESS = "completeness"  # ctx.results key of a completeness check's details (see above)

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

MAX_EXAMPLES = 5



@dataclass
class CheckResult:
    name: str
    passed: bool
    violations: int
    attributed: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)  # at most MAX_EXAMPLES violations
    description: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "violations": self.violations,
                "attributed": self.attributed, "examples": self.examples,
                "description": self.description, "details": self.details}


def examples_of(df: DataFrame, order: list[str] | None = None, n: int = MAX_EXAMPLES) -> list[dict[str, Any]]:
    """Up to ``n`` rows of a violations DataFrame as JSON-friendly dicts."""
    if order:
        df = df.orderBy(*order)
    return [{k: _plain(v) for k, v in r.asDict(recursive=True).items()} for r in df.limit(n).collect()]


def tally(frames: dict[str, DataFrame | tuple[DataFrame, str]]) -> dict[str, Any]:
    """Several counts in one Spark job (on small histories a job's scheduling, not its data, is
    the cost: docs/testing.md). ``name: df`` -> its number of rows; ``name: (df, column)`` ->
    {value of the column: rows} (values as strings, None for null). The same numbers as
    ``df.count()`` and ``df.groupBy(column).count()`` one by one."""
    parts = []
    for name, f in frames.items():
        df, col = f if isinstance(f, tuple) else (f, None)
        key = F.lit(None).cast("string") if col is None else F.col(col).cast("string")
        parts.append(df.select(F.lit(name).alias("_tally"), key.alias("_key")))
    if not parts:
        return {}
    u = parts[0]
    for p in parts[1:]:
        u = u.unionByName(p)
    out: dict[str, Any] = {name: (0 if not isinstance(f, tuple) else {}) for name, f in frames.items()}
    for r in u.groupBy("_tally", "_key").count().collect():
        if isinstance(frames[r["_tally"]], tuple):
            out[r["_tally"]][r["_key"]] = int(r["count"])
        else:
            out[r["_tally"]] = int(r["count"])
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6)
    return v


def summarize(name: str, description: str, violations: DataFrame, *, order: list[str] | None = None,
              attributed: int = 0, details: dict[str, Any] | None = None,
              count: int | None = None) -> CheckResult:
    n = violations.count() if count is None else count
    return CheckResult(name=name, passed=n == 0, violations=n, attributed=attributed,
                       examples=examples_of(violations, order) if n else [],
                       description=description, details=details or {})
