"""The protocol's history checks on one run directory, in a Spark session the exploration keeps.

What ``testbed analyze`` does up to its checks (ingest, the protocol's registered ``CHECKS``
and the runtime-wide checks), without metrics, figures and reports: an exploration runs many
short cases and only needs the verdicts. Writes ``analysis/checks.json`` in the same shape as
``testbed analyze`` (so ``testbed.api.run_checks`` reads it); ``testbed analyze RUN`` still
gives the full report of any case afterwards.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def check_run(run_dir: str | Path, spark) -> list[dict[str, Any]]:
    """-> every check's result as a dict (``name``, ``passed``, ``violations``, ``attributed``, ...)."""
    from testbed.analysis import runtime_checks
    from testbed.analysis.checks import CheckResult
    from testbed.analysis.context import AnalysisContext, AnalysisOptions
    from testbed.analysis.ingest import ingest
    from testbed.analysis.job import validate_run_dir
    from testbed.analysis.session import tune_for_input
    from testbed.protocols import checks_for

    path, plan, manifest = validate_run_dir(run_dir)
    tune_for_input(spark, sum(p.stat().st_size for p in (path / "logs").glob("*.jsonl")))
    events = ingest(spark, path, reuse=True)
    ctx = AnalysisContext.build(spark, path, plan, manifest, dict(events), AnalysisOptions())
    out: list[dict[str, Any]] = []
    try:
        for chk in checks_for(ctx.protocol) + runtime_checks.CHECKS:
            t = time.monotonic()
            try:
                r = chk(ctx)
            except Exception as e:  # noqa: BLE001 - a broken checker fails its own check
                r = CheckResult(name=getattr(chk, "__name__", str(chk)).removeprefix("check_"), passed=False,
                                violations=0, description="the checker itself failed",
                                details={"error": f"{type(e).__name__}: {e}"})
            d = r.to_dict()
            d["seconds"] = round(time.monotonic() - t, 3)
            out.append(d)
    finally:
        ctx.release()
    (path / "analysis").mkdir(exist_ok=True)
    (path / "analysis" / "checks.json").write_text(json.dumps(
        {"run_id": path.name, "ok": all(c["passed"] for c in out), "checks": out}, indent=1, default=str))
    return out
