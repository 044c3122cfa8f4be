"""One line per mobility run directory, without Spark: the counted moves (committed, begun at or after
the warm-up), their mean / p50 / p99 latency and messages per move, and the brokers' congestion after
the warm-up (``measure.congestion_summary`` over the plan's brokers: the busiest broker, its busy fraction, the longest queue,
the mean wait, the highest received rate and CPU share). A diagnostic for runs made with
`testbed run`, e.g. Fig 9 one workload per run (docs/mobility.md, "Results: paper scale"):

    PYTHONPATH=. .venv/bin/python scripts/mobility_run_summary.py RUN_DIR [RUN_DIR ...] [--warmup 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path

from testbed.protocols.mobility.analysis import measure as M


def summarize(run_dir: str, warmup_s: float) -> str:
    t0 = M.run_t0_ns(run_dir)
    begin: dict[str, float] = {}
    end: dict[str, tuple] = {}
    msgs: Counter = Counter()
    for f in sorted(Path(run_dir, "logs").glob("*.jsonl")):
        with open(f) as fh:
            for line in fh:
                if "move_" not in line:  # a cheap pre-filter; ``ev`` decides
                    continue
                e = json.loads(line)
                if e["ev"] == "move_begin":
                    begin[e["mid"]] = (e["t"] - t0) / 1e9
                elif e["ev"] == "move_end":
                    end[e["mid"]] = (e.get("outcome"), e.get("dur_ms"))
                elif e["ev"] == "move_traffic":
                    msgs[e["mid"]] += int(e.get("msgs") or 0)
    counted = [m for m, b in begin.items() if b >= warmup_s and end.get(m, (None,))[0] == "commit"]
    lat = sorted(float(end[m][1]) for m in counted)
    outcomes = Counter(str(end.get(m, (None,))[0]) for m in begin)
    plan = Path(run_dir, "plan.json")
    brokers = ({n for n, v in json.loads(plan.read_text()).get("nodes", {}).items() if (v or {}).get("role") == "broker"}
               if plan.exists() else None)  # without a plan: every node's log
    cg = M.congestion_summary(M.congestion(run_dir, brokers), warmup_s, float("inf"))
    head = f"{Path(run_dir).name}: {len(lat)} counted moves"
    if lat:
        head += (f", mean {statistics.fmean(lat):.0f} ms, p50 {lat[len(lat) // 2]:.0f}, "
                 f"p99 {lat[min(len(lat) - 1, int(len(lat) * 0.99))]:.0f}, "
                 f"{statistics.fmean(msgs[m] for m in counted):.1f} msgs/move")
    return (f"{head}; outcomes {dict(outcomes)}; busiest broker {cg['busy_broker']} busy {cg['busy_mean_max']:.2f}, "
            f"longest queue {cg['queue_max']:.0f}, mean wait {cg['wait_ms_mean']:.1f} ms, "
            f"{cg['recv_per_s_max']:.0f} msgs/s received, CPU at most {cg['cpu_max']:.2f} core")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--warmup", type=float, default=30.0, help="seconds after t0 not counted (default 30)")
    a = ap.parse_args()
    for r in a.runs:
        print(summarize(r, a.warmup))


if __name__ == "__main__":
    main()
