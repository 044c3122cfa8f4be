"""Mobility benchmark: real broker processes, real sockets, userspace link emulation.

    .venv/bin/python benchmarks/bench_mobility.py [--duration 20] [--pair-clients 200] [--runs-dir DIR]

1. Move latency on a 6-hop path (7 brokers in a chain, 1 ms links), idle (10 clients of the
   covered workload moving b1 <-> b7 with a 1 s pause, two publishers at 5/s): p50 and p99 of
   ``move_end.dur_ms`` and messages per move (sum of ``move_traffic.msgs`` per move id over the
   brokers), for reconfiguration and for covering (covering: the covered workload, whose root
   moving makes the other clients' entries churn); the ratio covering / reconfiguration of the
   medians (the paper: > 10x at its load).
2. Moves per second one broker sustains as coordinator: two brokers one link apart, N clients
   of the distinct workload moving b1 <-> b2 with a 20 ms pause, N = 200, 400, 800 (default):
   committed moves per second over the steady part of each run; the sustained rate is the largest
   (once it stops growing with N, the brokers are saturated: offered load is N / (pause + latency)).
   Each broker is the source (coordinator) of half the moves and the target of the other half.

Every run is a ``testbed run`` (local provider) without the Spark analysis; the numbers are read
from the run's JSON-lines logs. Prints them and writes benchmarks/results/mobility.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from common import pct  # noqa: E402

TOPO = HERE / "topologies" / "mobility-path.yaml"


def run(runs_dir: Path, sets: dict[str, str]) -> Path:
    cmd = [sys.executable, "-m", "testbed.cli", "--runs-dir", str(runs_dir), "run", str(TOPO), "--no-analyze",
           "--json"]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"run failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    doc = json.loads(p.stdout)
    return Path(doc["runs"][0]["run_dir"])


def moves(run_dir: Path) -> tuple[dict[str, dict], float]:
    """mid -> {begin_s, outcome, dur_ms, msgs}; and the run's workload duration in seconds."""
    t0 = json.loads((run_dir / "manifest.json").read_text()).get("t0_wall_ns", 0)
    out: dict[str, dict] = {}
    for path in sorted((run_dir / "logs").glob("*.jsonl")):
        with open(path) as f:
            for line in f:
                if '"ev":"move_' not in line:
                    continue
                e = json.loads(line)
                m = out.setdefault(e.get("mid", ""), {"msgs": 0})
                if e["ev"] == "move_begin":
                    m["begin_s"] = (e["t"] - t0) / 1e9
                elif e["ev"] == "move_end":
                    m["outcome"], m["dur_ms"] = e["outcome"], e["dur_ms"]
                elif e["ev"] == "move_traffic":
                    m["msgs"] += int(e["msgs"])
    plan = json.loads((run_dir / "plan.json").read_text())
    return out, float(plan["duration_s"])


def latency(runs_dir: Path, movement: str, duration: int, warmup: float = 2.0) -> dict:
    rd = run(runs_dir, {"movement": movement, "duration": f"{duration}s"})
    ms, _ = moves(rd)
    done = [m for m in ms.values() if m.get("outcome") == "commit" and m.get("begin_s", 0) >= warmup]
    lat = [m["dur_ms"] for m in done]
    msgs = [m["msgs"] for m in done]
    if not lat:
        raise SystemExit(f"{movement}: no committed move in {rd}")
    return {"movement": movement, "moves": len(lat), "p50_ms": round(pct(lat, 50), 2),
            "p99_ms": round(pct(lat, 99), 2), "mean_ms": round(sum(lat) / len(lat), 2),
            "msgs_per_move": round(sum(msgs) / len(msgs), 2), "run_dir": str(rd)}


def throughput(runs_dir: Path, clients: int, duration: int) -> dict:
    rd = run(runs_dir, {"movement": "reconfiguration", "hops": "1", "clients": str(clients), "pause": "20ms",
                        "workload": "distinct", "duration": f"{duration}s"})
    ms, dur = moves(rd)
    lo, hi = 2.0, dur - 3.0  # the steady part: after the first moves, before the quiesce
    commits = [m for m in ms.values() if m.get("outcome") == "commit" and lo <= m.get("begin_s", -1) < hi]
    other = sum(1 for m in ms.values() if m.get("outcome") not in (None, "commit"))
    lat = [m["dur_ms"] for m in commits]
    return {"clients": clients, "window_s": hi - lo, "commits": len(commits),
            "moves_per_s": round(len(commits) / (hi - lo), 1), "not_committed": other,
            "p50_ms_under_saturation": round(pct(lat, 50), 2) if lat else None, "run_dir": str(rd)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=int, default=20, help="seconds per latency run")
    ap.add_argument("--pair-clients", default="200,400,800", help="client counts of the coordinator sweep")
    ap.add_argument("--pair-duration", type=int, default=15)
    ap.add_argument("--runs-dir", default=None, help="where the runs go (default: a temporary directory)")
    ap.add_argument("--out", default=str(HERE / "results" / "mobility.json"))
    args = ap.parse_args()
    tmp = None
    if args.runs_dir:
        runs_dir = Path(args.runs_dir)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench-mobility-")
        runs_dir = Path(tmp.name)
    t = time.time()
    load = os.getloadavg()
    rec = latency(runs_dir, "reconfiguration", args.duration)
    cov = latency(runs_dir, "covering", args.duration)
    sweep = [throughput(runs_dir, int(n), args.pair_duration) for n in args.pair_clients.split(",")]
    thr = max(sweep, key=lambda r: r["moves_per_s"])
    res = {
        "what": "mobility moves, real processes, local provider, 1 ms links",
        "path": {"hops": 6, "link_delay_ms": 1, "workload": "covered", "clients": 10, "pause_s": 1.0,
                 "reconfiguration": rec, "covering": cov,
                 "ratio_covering_over_reconfiguration_p50": round(cov["p50_ms"] / rec["p50_ms"], 3),
                 "paper_ratio": "> 10 (at 400 clients on a 14-broker overlay)"},
        "coordinator": {"sustained_moves_per_s": thr["moves_per_s"], "at_clients": thr["clients"],
                        "sweep": sweep},
        "loadavg_at_start": [round(x, 2) for x in load],
        "cpus": os.cpu_count(),
        "seconds": round(time.time() - t, 1),
    }
    for k in ("reconfiguration", "covering"):
        r = res["path"][k]
        print(f"6-hop path, {k:15s}: p50 {r['p50_ms']:8.2f} ms  p99 {r['p99_ms']:8.2f} ms  "
              f"messages/move {r['msgs_per_move']:6.1f}  ({r['moves']} moves)")
    print(f"ratio covering / reconfiguration (p50): {res['path']['ratio_covering_over_reconfiguration_p50']}"
          f"  (paper: > 10x at 400 clients)")
    for r in sweep:
        print(f"two brokers, {r['clients']:4d} clients: {r['moves_per_s']:7.1f} committed moves/s "
              f"({r['commits']} in {r['window_s']:.0f} s; p50 {r['p50_ms_under_saturation']} ms)")
    print(f"one broker as coordinator sustains {thr['moves_per_s']} moves/s (at {thr['clients']} clients)")
    print(f"load average at start: {res['loadavg_at_start']} on {res['cpus']} CPUs")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(f"wrote {out}")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
