"""Benchmark ``testbed explore``: cases per hour on the pub/sub smoke topology.

    .venv/bin/python benchmarks/bench_explore.py [--runs 4] [--jobs 1] [--seed 1] [--shrink-runs 0]
                                                 [--topology topologies/smoke.yaml]

Runs a real exploration (local provider, real node processes, the protocol's Spark checks in
one session) of ``--runs`` cases with every fault kind, and reports: wall time, cases per hour,
per case the run time (``testbed run`` in a subprocess: bring-up, settle, workload, drain,
collect, down) and the check time (ingest + checks), the Spark start-up (the first case's
check time minus the mean of the others), and the load average before and after. Shrinking
is off by default (``--shrink-runs 0``: a violation is recorded, not shrunk), so the number
is the rate of drawing, running and checking cases; a shrink costs one case per run. The
exploration directory is kept in a temporary directory and removed. Results:
benchmarks/results/explore.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testbed.explore import explore  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "explore.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shrink-runs", type=int, default=0)
    ap.add_argument("--topology", default=str(ROOT / "topologies" / "smoke.yaml"))
    args = ap.parse_args(argv)

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-explore-") as tmp:
        t = time.monotonic()
        res = explore(args.topology, runs=args.runs, seed=args.seed, jobs=args.jobs, out=tmp,
                      shrink_runs=args.shrink_runs,
                      progress=lambda m: print(m, file=sys.stderr, flush=True))
        wall = time.monotonic() - t
        s = res.summary
    load_after = os.getloadavg()
    cases = s["per_case"]
    run_s = [c["run_s"] for c in cases if c["run_s"] is not None]
    check_s = [c.get("check_s") for c in cases if c.get("check_s") is not None]
    out = {
        "topology": str(Path(args.topology).resolve().relative_to(ROOT)) if Path(args.topology).resolve().is_relative_to(ROOT)
        else args.topology,
        "runs": args.runs, "jobs": args.jobs, "seed": args.seed, "shrink_runs_allowed": args.shrink_runs,
        "cases": s["cases"], "status": s["status"], "violations": s["violations"],
        "wall_s": round(wall, 1), "cases_per_hour": round(s["cases"] / wall * 3600, 1),
        "run_s_mean": round(statistics.mean(run_s), 2) if run_s else None,
        "check_s_mean_after_first": round(statistics.mean(check_s[1:]), 2) if len(check_s) > 1 else None,
        "spark_start_s": round(check_s[0] - statistics.mean(check_s[1:]), 1) if len(check_s) > 1 else None,
        "shrink_runs": sum(m["runs"] for m in s["minimal"].values()),
        "runs_per_hour": round((s["cases"] + sum(m["runs"] for m in s["minimal"].values())) / wall * 3600, 1),
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
        "cpus": os.cpu_count(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))
    print(f"{out['cases']} cases in {out['wall_s']} s = {out['cases_per_hour']} cases/hour "
          f"(run {out['run_s_mean']} s + checks {out['check_s_mean_after_first']} s per case; "
          f"load {load_before[0]:.1f} -> {load_after[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
