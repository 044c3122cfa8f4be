"""One line per mobility run directory, without Spark: the counted moves (committed, begun at or after
the warm-up) with their mean / p50 / p99 latency and messages per move (``measure.summary``, the
numbers the reproduction computes, and per workload when the run has a plan), and the brokers'
congestion after the warm-up (``measure.congestion_summary``: the busiest broker, its busy fraction,
the longest queue, the mean wait, the highest received rate and CPU share). A diagnostic for runs made
with `testbed run`, e.g. Fig 9 one workload per run (docs/mobility.md, "Results: paper scale"):

    PYTHONPATH=. .venv/bin/python scripts/mobility_run_summary.py RUN_DIR [RUN_DIR ...] [--warmup 30]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from testbed.protocols.mobility.analysis import measure as M
from testbed.protocols.mobility.experiments import _brokers


def moves(run_dir: str) -> pd.DataFrame:
    """``measure.moves`` of one run, read with plain Python instead of Spark (same columns)."""
    t0 = M.run_t0_ns(run_dir)
    rows: dict[str, dict] = {}
    for f in sorted(Path(run_dir, "logs").glob("*.jsonl")):
        with open(f) as fh:
            for line in fh:
                if "move_" not in line:  # a cheap pre-filter; ``ev`` decides
                    continue
                e = json.loads(line)
                ev = e.get("ev")
                if ev not in ("move_begin", "move_end", "move_traffic"):
                    continue
                r = rows.setdefault(e["mid"], {"run": Path(run_dir).name, "mid": e["mid"], "msgs": 0})
                if ev == "move_begin":
                    r.update(client=e.get("client"), src=e.get("src"), dst=e.get("dst"), movement=e.get("movement"),
                             begin=(e["t"] - t0) / 1e9)
                elif ev == "move_end":
                    r.setdefault("outcome", e.get("outcome"))
                    r.setdefault("dur_ms", e.get("dur_ms"))
                    r.setdefault("path_len", e.get("path_len"))
                else:
                    r["msgs"] += int(e.get("msgs") or 0)
    df = pd.DataFrame([r for r in rows.values() if "begin" in r], columns=M.MOVE_COLUMNS)
    return df.sort_values("begin").reset_index(drop=True)


def summarize(run_dir: str, warmup_s: float) -> str:
    df = moves(run_dir)
    plan_file = Path(run_dir, "plan.json")
    plan = json.loads(plan_file.read_text()) if plan_file.exists() else None
    if plan is not None:
        df = M.annotate(df, plan)
    s = M.summary(df, warmup_s)
    cg = M.congestion_summary(M.congestion(run_dir, _brokers(plan) if plan else None), warmup_s, float("inf"))
    head = f"{Path(run_dir).name}: {s['moves']} counted moves"
    if s["moves"]:
        head += (f", mean {s['lat_mean_ms']:.0f} ms, p50 {s['lat_p50_ms']:.0f}, p99 {s['lat_p99_ms']:.0f}, "
                 f"{s['msgs_per_move']:.1f} msgs/move")
    return (f"{head}; outcomes {s['outcomes']}; busiest broker {cg['busy_broker']} busy {cg['busy_mean_max']:.2f}, "
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
