"""The protocol's history checks on one run directory, in a Spark session the exploration keeps.

What ``testbed analyze`` does up to its checks (ingest, the protocol's registered ``CHECKS``
and the runtime-wide checks), without metrics, figures and reports: an exploration runs many
short cases and only needs the verdicts. Writes ``analysis/checks.json`` in the same shape as
``testbed analyze`` (so ``testbed.api.run_checks`` reads it); ``testbed analyze RUN`` still
gives the full report of any case afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def check_run(run_dir: str | Path, spark) -> list[dict[str, Any]]:
    """-> every check's result as a dict (``name``, ``passed``, ``violations``, ``attributed``, ...)."""
    from testbed.analysis.context import AnalysisContext, AnalysisOptions
    from testbed.analysis.ingest import ingest
    from testbed.analysis.job import run_checks, validate_run_dir
    from testbed.analysis.session import tune_for_input

    path, plan, manifest = validate_run_dir(run_dir)
    tune_for_input(spark, sum(p.stat().st_size for p in (path / "logs").glob("*.jsonl")))
    events = ingest(spark, path, reuse=True)
    ctx = AnalysisContext.build(spark, path, plan, manifest, dict(events), AnalysisOptions())
    out: list[dict[str, Any]] = []
    try:
        for r, dt in run_checks(ctx):
            out.append(dict(r.to_dict(), seconds=round(dt, 3)))
    finally:
        ctx.release()
    (path / "analysis").mkdir(exist_ok=True)
    (path / "analysis" / "checks.json").write_text(json.dumps(
        {"run_id": path.name, "ok": all(c["passed"] for c in out), "checks": out}, indent=1, default=str))
    return out
