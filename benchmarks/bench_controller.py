"""Controller benchmarks: bring-up / teardown time, and fault timing (actual - planned).

    .venv/bin/python benchmarks/bench_controller.py [--sizes 20 100] [--faults 60]
    .venv/bin/python benchmarks/bench_controller.py --sizes 100 --faults 0 --rounds 3 --bare --base /tmp/base

``--bare``: each round also starts the same number of bare node processes (``bench_link.py``'s
start-up section: echo nodes, no run directory, no plan) until every one answers ping: the floor
``up`` stands on. ``--base DIR`` (a checkout of the code before a change, e.g. ``git archive main
| tar -x -C DIR``): each round also measures ``up``/``down`` with ``testbed`` imported from DIR,
alternated with this checkout's; every measurement runs in a fresh Python process. ``--rounds N``
repeats; medians are reported. ``--phases``: where ``up`` spends its time (run files, configs,
spawning, waiting for the nodes, clock offsets), from this checkout's progress messages.

Prints the numbers and writes benchmarks/results/controller.json. Uses the
local provider (real processes) and topologies generated with the format's
own Jinja2 templating (benchmarks/topologies/*.yaml).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, os.environ.get("TESTBED_BENCH_CODE") or str(HERE.parent))  # --base: the code measured

from common import pct  # noqa: E402
from testbed import api  # noqa: E402


def bench_up_down(n: int, runs_dir: str) -> dict:
    plan = api.plans(str(HERE / "topologies" / "line.yaml"), {"n": n})[0]
    marks: list = []
    t = time.monotonic()

    def progress(msg: str) -> None:
        marks.append([round(time.monotonic() - t, 3), msg[:60]])
    session = api.bring_up(plan, str(HERE / "topologies" / "line.yaml"), {"n": n}, Path(runs_dir), progress)
    up_s = time.monotonic() - t
    session.close()
    t = time.monotonic()
    api.teardown(session.run)
    down_s = time.monotonic() - t
    return {"nodes": n, "up_s": round(up_s, 3), "down_s": round(down_s, 3), "progress_s": marks}


# one measurement in a fresh process, testbed imported from PYTHONPATH (this checkout or --base)
CHILD = r"""
import json, os, sys, tempfile
sys.path.insert(0, sys.argv[1])
kind, n = sys.argv[2], int(sys.argv[3])
with tempfile.TemporaryDirectory() as tmp:
    if kind == "up":
        import bench_controller
        r = bench_controller.bench_up_down(n, tmp)
    else:
        import bench_link
        r = bench_link.bench_startup(tmp, n)
import testbed
r["code"] = os.path.dirname(os.path.dirname(testbed.__file__))
r["load_avg_1m"] = round(os.getloadavg()[0], 2)
print("RESULT " + json.dumps(r))
"""


def measure(kind: str, n: int, code: str) -> dict:
    env = dict(os.environ, PYTHONPATH=code, TESTBED_BENCH_CODE=code)
    out = subprocess.run([sys.executable, "-c", CHILD, str(HERE), kind, str(n)], env=env, capture_output=True,
                         text=True, check=True, cwd=tempfile.gettempdir())
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    r = json.loads(line[len("RESULT "):])
    if not Path(r["code"]).resolve() == Path(code).resolve():
        raise SystemExit(f"measured {r['code']}, meant {code}")
    return r


def paired(n: int, rounds: int, base: str | None, bare: bool) -> dict:
    codes = {"this": str(HERE.parent)}
    if base:
        codes = {"base": str(Path(base).resolve()), **codes}
    out: dict = {"nodes": n, "rounds": []}
    for i in range(rounds):
        r: dict = {}
        for code, path in (list(codes.items()) if i % 2 == 0 else list(reversed(codes.items()))):
            r[code] = measure("up", n, path)
            print(f"round {i + 1} {code}: up {r[code]['up_s']:.2f} s, down {r[code]['down_s']:.2f} s "
                  f"(load {r[code]['load_avg_1m']}); progress {r[code]['progress_s']}", flush=True)
        if bare:
            r["bare"] = measure("bare", n, codes["this"])
            print(f"round {i + 1} bare: {n} processes ready in {r['bare']['all_ready_s']:.2f} s "
                  f"(load {r['bare']['load_avg_1m']})", flush=True)
        out["rounds"].append(r)
    for code in codes:
        out[f"median_up_s_{code}"] = statistics.median(r[code]["up_s"] for r in out["rounds"])
        out[f"median_down_s_{code}"] = statistics.median(r[code]["down_s"] for r in out["rounds"])
    if bare:
        out["median_bare_ready_s"] = statistics.median(r["bare"]["all_ready_s"] for r in out["rounds"])
    print({k: v for k, v in out.items() if k.startswith("median")}, flush=True)
    return out


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
    ap.add_argument("--rounds", type=int, default=0, help="paired rounds (each measurement in a fresh process)")
    ap.add_argument("--base", metavar="DIR", help="also measure the code in DIR, alternated with this checkout")
    ap.add_argument("--bare", action="store_true", help="also start as many bare node processes, each round")
    ap.add_argument("--out", default=str(HERE / "results" / "controller.json"))
    args = ap.parse_args()

    results: dict = {"up_down": [], "fault_timing": None, "load_avg_at_start": os.getloadavg()}
    if args.rounds or args.base or args.bare:
        results["paired"] = [paired(n, max(1, args.rounds), args.base, args.bare) for n in args.sizes]
    with tempfile.TemporaryDirectory() as tmp:
        for n in ([] if "paired" in results else args.sizes):
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
    results["load_avg_at_end"] = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
