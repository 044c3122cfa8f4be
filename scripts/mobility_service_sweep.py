#!/usr/bin/env python3
"""How Fig 8's covering / reconfiguration latency ratio varies with the brokers' service time
(docs/mobility.md, "The brokers' per-message cost"): evidence for a chosen value, not a calibration.

    PYTHONPATH=. python scripts/mobility_service_sweep.py [--means 0,2.5,5,10] [--seed 8]
                                                          [--out runs/mobility-service-sweep]

Runs topologies/mobility/fig08-quick.yaml once per (service mean in ms, movement) with
``--set service_ms=<mean>`` (0: no service time), and reads each run's logs directly (no Spark):
the committed moves begun after the join window (the warm-up the reproduction excludes) and
those begun in it, their mean latency, and the brokers' congestion over the run
(``measure.congestion_summary``: the busiest broker's busy fraction, the longest queue, the mean
wait). Prints a table and writes OUT/sweep.json with the load average after every run. The value
in tree14.j2 is never set from this: the sweep shows how much the ratio depends on it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testbed.protocols.mobility.analysis import measure as M  # noqa: E402


def run_numbers(run_dir: Path) -> dict:
    plan = json.loads((run_dir / "plan.json").read_text())
    t0 = M.run_t0_ns(run_dir)
    join = max((float(g.get("join") or 0) for g in plan["params"]["mobile"].values()), default=0.0)
    moves: dict[str, dict] = {}
    for f in (run_dir / "logs").glob("*.jsonl"):
        with open(f) as fh:
            for line in fh:
                if '"move_' not in line:
                    continue
                e = json.loads(line)
                if e.get("ev") == "move_begin":
                    moves.setdefault(e["mid"], {})["begin"] = (e["t"] - t0) / 1e9
                elif e.get("ev") == "move_end":
                    moves.setdefault(e["mid"], {}).update(outcome=e["outcome"], dur=float(e["dur_ms"]))
    done = [m for m in moves.values() if m.get("outcome") == "commit" and "begin" in m]
    late = [m["dur"] for m in done if m["begin"] >= join]
    early = [m["dur"] for m in done if m["begin"] < join]
    brokers = {n for n, v in plan["nodes"].items() if v.get("role") == "broker"}
    cg = M.congestion(run_dir, brokers)
    s = M.congestion_summary(cg, join, float(plan["duration_s"]))
    outcomes: dict[str, int] = {}
    for m in moves.values():
        outcomes[str(m.get("outcome"))] = outcomes.get(str(m.get("outcome")), 0) + 1
    return {"counted": len(late), "lat_mean_ms": statistics.fmean(late) if late else None,
            "early": len(early), "early_lat_mean_ms": statistics.fmean(early) if early else None,
            "outcomes": outcomes, "join_s": join, "busy_broker": s["busy_broker"],
            "busy": s["busy_mean_max"], "queue_max": s["queue_max"], "wait_ms": s["wait_ms_mean"],
            "cpu_mean_max": s["cpu_mean_max"], "recv_per_s_max": s["recv_per_s_max"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--means", default="0,2.5,5,10", help="service means to try, ms (comma-separated; 0 = none)")
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--out", default="runs/mobility-service-sweep")
    a = ap.parse_args()
    means = [float(x) for x in a.means.split(",") if x.strip()]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    topo = REPO / "topologies" / "mobility" / "fig08-quick.yaml"
    points = []
    for m in means:
        for movement in ("reconfiguration", "covering"):
            before = set((out / "runs").glob("*")) if (out / "runs").is_dir() else set()
            t = time.monotonic()
            r = subprocess.run([sys.executable, "-m", "testbed.cli", "--runs-dir", str(out / "runs"), "run", str(topo),
                                "--no-analyze", "--set", f"movement={movement}", "--set", f"service_ms={m:g}",
                                "--set", f"seed={a.seed}"], capture_output=True, text=True, cwd=REPO)
            load = os.getloadavg()[0]
            new = sorted(set((out / "runs").glob("*")) - before)
            if not new:
                print(r.stderr[-2000:], file=sys.stderr)
                raise SystemExit(f"error: the run at service {m:g} ms ({movement}) made no run directory "
                                 f"(exit {r.returncode})")
            p = {"service_ms": m, "movement": movement, "run": new[-1].name, "wall_s": round(time.monotonic() - t, 1),
                 "load1": round(load, 2), **run_numbers(new[-1])}
            points.append(p)
            print(json.dumps(p), flush=True)
    table = []
    for m in means:
        rc, cv = (next(p for p in points if p["service_ms"] == m and p["movement"] == mv)
                  for mv in ("reconfiguration", "covering"))
        ratio = (cv["lat_mean_ms"] / rc["lat_mean_ms"]) if rc["lat_mean_ms"] and cv["lat_mean_ms"] else None
        table.append({"service_ms": m, "ratio": ratio, "reconfiguration": rc, "covering": cv})
        print(f"service {m:g} ms: reconfiguration {rc['lat_mean_ms']:.0f} ms (busiest {rc['busy_broker']} "
              f"{rc['busy']:.2f} busy, queue <= {rc['queue_max']}), covering {cv['lat_mean_ms']:.0f} ms (busiest "
              f"{cv['busy_broker']} {cv['busy']:.2f}, queue <= {cv['queue_max']}): ratio {ratio:.2f}"
              if ratio else f"service {m:g} ms: {rc['lat_mean_ms']} / {cv['lat_mean_ms']}")
    (out / "sweep.json").write_text(json.dumps({"seed": a.seed, "points": points, "table": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
