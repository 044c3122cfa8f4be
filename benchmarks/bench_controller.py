"""Controller benchmarks: bring-up / teardown time, and fault timing (actual - planned).

    .venv/bin/python benchmarks/bench_controller.py [--sizes 20 100] [--faults 60]

Prints the numbers and writes benchmarks/results/controller.json. Uses the
local provider (real processes) and topologies generated with the format's
own Jinja2 templating (benchmarks/topologies/*.yaml).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import pct  # noqa: E402
from testbed import api  # noqa: E402


def bench_up_down(n: int, runs_dir: str) -> dict:
    plan = api.plans(str(HERE / "topologies" / "line.yaml"), {"n": n})[0]
    t = time.monotonic()
    session = api.bring_up(plan, str(HERE / "topologies" / "line.yaml"), {"n": n}, Path(runs_dir), lambda m: None)
    up_s = time.monotonic() - t
    session.close()
    t = time.monotonic()
    api.teardown(session.run)
    down_s = time.monotonic() - t
    return {"nodes": n, "up_s": round(up_s, 3), "down_s": round(down_s, 3)}


def bench_faults(count: int, runs_dir: str) -> dict:
    path = str(HERE / "topologies" / "faults.yaml")
    (rd,) = api.run(path, set_vars={"count": count}, runs_dir=runs_dir, analyze=False)
    timeline = rd.manifest["timeline"]
    out = {}
    for kind, ops in (("process", {"pause", "resume", "crash", "restart"}), ("link", {"cut", "heal", "stall", "unstall"})):
        es = [e for e in timeline if e["op"] in ops and e["status"] == "done"]
        d = [(e["actual_s"] - e["planned_s"]) * 1000 for e in es]
        c = [(e["done_s"] - e["planned_s"]) * 1000 for e in es]  # until the action completed
        if d:
            out[kind] = {"n": len(d), "p50_ms": round(pct(d, 50), 3), "p99_ms": round(pct(d, 99), 3),
                         "max_ms": round(max(d), 3), "mean_ms": round(statistics.mean(d), 3),
                         "completed_p50_ms": round(pct(c, 50), 3), "completed_p99_ms": round(pct(c, 99), 3)}
    failed = [e for e in timeline if e["status"] != "done"]
    out["not_done"] = len(failed)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*", default=[20, 100])
    ap.add_argument("--faults", type=int, default=60, help="number of pause/resume and cut/heal pairs")
    args = ap.parse_args()
    import os

    results: dict = {"up_down": [], "fault_timing": None, "load_avg_at_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            r = bench_up_down(n, tmp)
            print(f"{n:4d} nodes: up {r['up_s']:.2f} s, down {r['down_s']:.2f} s", flush=True)
            results["up_down"].append(r)
        if args.faults:
            ft = bench_faults(args.faults, tmp)
            for k in ("process", "link"):
                if k in ft:
                    v = ft[k]
                    print(f"fault timing ({k}, n={v['n']}): actual - planned p50 {v['p50_ms']:.2f} ms, "
                          f"p99 {v['p99_ms']:.2f} ms, max {v['max_ms']:.2f} ms; completed p50 "
                          f"{v['completed_p50_ms']:.2f} ms p99 {v['completed_p99_ms']:.2f} ms", flush=True)
            results["fault_timing"] = ft
    out = HERE / "results" / "controller.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
