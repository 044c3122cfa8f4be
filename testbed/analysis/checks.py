"""History checks, by protocol.

A check is a function ``check(ctx: AnalysisContext) -> CheckResult``. Each
protocol lists its checks in ``testbed/analysis/checks/<protocol>.py`` as a
module-level ``CHECKS = [...]`` (discovered by name the first time
:func:`checks_for` is asked about that protocol); code elsewhere (e.g.
``testbed/analysis/gryphon/``) may add more with ``@register_check("gryphon")``.
A protocol built on the pub/sub core includes the core's checks by listing
them: ``from testbed.analysis.checks.pubsub import CHECKS as PUBSUB``.

``CHECKS`` is ``{protocol: [check, ...]}`` for every protocol discovered so far.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from pyspark.sql import DataFrame

MAX_EXAMPLES = 5

CHECKS: dict[str, list[Callable[..., "CheckResult"]]] = {}
_DISCOVERED: set[str] = set()


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


def register_check(protocol: str):
    """Decorator: add a check to ``CHECKS[protocol]``."""

    def deco(fn):
        lst = CHECKS.setdefault(protocol, [])
        if fn not in lst:
            lst.append(fn)
        return fn

    return deco


def checks_for(protocol: str) -> list[Callable[..., CheckResult]]:
    """The checks registered for ``protocol`` (importing checks/<protocol>.py and analysis/<protocol>/ once)."""
    if protocol not in _DISCOVERED:
        _DISCOVERED.add(protocol)
        mod = _import_optional(f"testbed.analysis.checks.{protocol}")
        if mod is not None:
            for fn in getattr(mod, "CHECKS", []):
                register_check(protocol)(fn)
        from testbed.analysis.figures import import_protocol_package

        import_protocol_package(protocol)
    return list(CHECKS.get(protocol, []))


def _import_optional(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and name.startswith(e.name):
            return None
        raise
