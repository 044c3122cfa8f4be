"""Run one generated ordering topology and check it (tests and scripts/ordering_sweep.py).

Kept out of the analysis part (which only reads run directories): this runs nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testbed.protocols.ordering.analysis.randomized import check_run, write


def run_and_check(topo: dict[str, Any], workdir: str | Path) -> dict[str, Any]:
    """Write, run (local provider, no Spark) and check one topology."""
    from testbed import api

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = write(topo, workdir / f"{topo['name']}.yaml")
    [rd] = api.run(str(path), runs_dir=str(workdir / "runs"), analyze=False)
    return {"run_dir": str(rd.path), **check_run(rd.path)}
