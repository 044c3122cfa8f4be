"""Run one generated transactions topology on real processes and check it (tests and
scripts/transactions_sweep.py). Kept out of the analysis part (which only reads run
directories): this runs nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testbed.protocols.transactions.analysis.randomized import write


def run_and_check(topo: dict[str, Any], workdir: str | Path) -> dict[str, Any]:
    """Write, run (local provider) and analyse one topology: {run_dir, passed, failed: {check:
    violations}, examples: {check: first examples}, findings: {failed check: the finding it
    carries (BL-WAIT's missing recovery: checks.no_recovery_finding)}}."""
    from testbed import api

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = write(topo, workdir / f"{topo['name']}.yaml")
    [rd] = api.run(str(path), runs_dir=str(workdir / "runs"), analyze=True)
    checks = api.run_checks(rd)
    failed = {c["name"]: c.get("violations", 0) for c in checks if not c.get("passed")}
    return {"run_dir": str(rd.path), "passed": bool(checks) and not failed, "failed": failed,
            "checks": len(checks),
            "examples": {c["name"]: (c.get("examples") or [])[:2] for c in checks if not c.get("passed")},
            "findings": {c["name"]: c["details"]["finding"] for c in checks
                         if not c.get("passed") and (c.get("details") or {}).get("finding")}}
