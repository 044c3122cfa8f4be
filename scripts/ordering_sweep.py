#!/usr/bin/env python3
"""Sweep of randomized ordering topologies: run each, check TNO, completeness, liveness.

    PYTHONPATH=. python scripts/ordering_sweep.py [-n 20] [--seed 100] [--fault any|none|pause|crash]
                                                  [--duration 8] [--out runs/ordering-sweep]

Each seed draws a topology with testbed.protocols.ordering.analysis.randomized.generate (2-5 sites,
1-5 TM servers, range/hash placement, 1-3 brokers per site, groups on one or several
brokers, 1-120 ms with/without jitter, no fault / TM pause / TM crash+restart), runs it on
local processes (no Spark) and checks the nodes' logs. Prints one line per run and a
summary; writes ``OUT/summary.json`` (every run: the drawn choices, the checks' numbers,
the run directory). Exit status 1 if any run failed a check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from testbed.protocols.ordering.analysis.randomized import FAULTS, describe, generate
    from testbed.protocols.ordering.sweep import run_and_check

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("-n", type=int, default=20, help="number of topologies (default 20)")
    ap.add_argument("--seed", type=int, default=100, help="first seed (default 100)")
    ap.add_argument("--fault", choices=("any",) + FAULTS, default="any",
                    help="fault of every topology (default: drawn per seed)")
    ap.add_argument("--duration", type=int, default=8, help="workload seconds (default 8)")
    ap.add_argument("--out", default="runs/ordering-sweep", help="work and result directory")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    t_all = time.monotonic()
    for seed in range(a.seed, a.seed + a.n):
        topo = generate(seed, fault=None if a.fault == "any" else a.fault, duration_s=a.duration)
        d = describe(topo)
        t0 = time.monotonic()
        try:
            r = run_and_check(topo, out)
        except Exception as e:  # noqa: BLE001 - a run that does not start is a result too
            rows.append({"seed": seed, **d, "passed": False, "error": f"{type(e).__name__}: {e}"})
            print(f"seed {seed}: ERROR {e}", flush=True)
            continue
        row = {"seed": seed, **d, "passed": r["passed"], "wall_s": round(time.monotonic() - t0, 1),
               "notified": r["notified"], "tno_violations": r["tno"]["violations"],
               "completeness_expected": r["completeness"]["expected"],
               "completeness_missing": r["completeness"]["violations"],
               "liveness_bound_s": r["liveness"]["bound_s"],
               "liveness_violations": r["liveness"]["violations"],
               "max_wait_ms": r["liveness"]["max_wait_ms"], "p99_wait_ms": r["liveness"]["p99_wait_ms"],
               "run_dir": r["run_dir"]}
        if not r["passed"]:
            row["examples"] = {k: r[k]["examples"][:2] for k in ("tno", "completeness", "liveness")}
        rows.append(row)
        print(f"seed {seed}: {'PASS' if r['passed'] else 'FAIL'} sites={d['sites']} "
              f"servers={d['servers']} {d['strategy']} brokers={d['brokers']} "
              f"multi={d['multi_attach']} delay<={d['max_delay_ms']}ms jitter={d['jitter']} "
              f"fault={d['fault']} notified={r['notified']} tno={r['tno']['violations']} "
              f"missing={r['completeness']['violations']}/{r['completeness']['expected']} "
              f"late={r['liveness']['violations']} (bound {r['liveness']['bound_s']} s, "
              f"max wait {r['liveness']['max_wait_ms']} ms) {row['wall_s']} s", flush=True)
    passed = sum(1 for r in rows if r["passed"])
    by_fault: dict[str, list[int]] = {}
    for r in rows:
        by_fault.setdefault(r.get("fault", "?"), [0, 0])
        by_fault[r.get("fault", "?")][0] += 1
        by_fault[r.get("fault", "?")][1] += bool(r["passed"])
    summary = {"runs": len(rows), "passed": passed, "first_seed": a.seed, "duration_s": a.duration,
               "wall_s": round(time.monotonic() - t_all, 1),
               "by_fault": {k: {"runs": v[0], "passed": v[1]} for k, v in by_fault.items()},
               "max_wait_ms": max((r.get("max_wait_ms", 0.0) for r in rows), default=0.0),
               "notified": sum(r.get("notified", 0) for r in rows), "rows": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"{passed}/{len(rows)} passed TNO, completeness and liveness "
          f"({summary['notified']} notifications, {summary['wall_s']} s); "
          f"by fault: {json.dumps(summary['by_fault'])}; summary: {out / 'summary.json'}")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
