"""How often `testbed compare`'s "moved" rule flags an unchanged value, and how often it sees a shift.

    .venv/bin/python benchmarks/bench_compare_rule.py [--seeds 3] [--trials 20000]

Two reproductions of one value claim, each the mean of ``--seeds`` seeds drawn from a normal
distribution (sd 1); B's drawn ``shift`` standard deviations higher. For each shift: the share of
trials that `testbed.experiments.compare.moved` flags (A's and B's 95 % t-intervals disjoint, the
rule used) and that the other rule considered would flag (B's mean outside A's interval). At shift
0 that share is the false-alarm rate per claim: a comparison of ~150 claims expects about 150x it
false "moved" rows. Pure computation: prints the table and writes
benchmarks/results/compare_rule.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from testbed.experiments import compare as K  # noqa: E402
from testbed.experiments.claims import mean, spread, t_interval  # noqa: E402


def claim(xs: list[float]) -> dict:
    return {"kind": "value", "verdict": "pass",
            "measured": {"mean": mean(xs), "spread": spread(xs), "n": len(xs), "ci": list(t_interval(xs))}}


def rates(seeds: int, trials: int, shift: float, rng: random.Random) -> tuple[float, float]:
    disjoint = outside = 0
    for _ in range(trials):
        a = [rng.gauss(0, 1) for _ in range(seeds)]
        b = [rng.gauss(shift, 1) for _ in range(seeds)]
        disjoint += K.moved(claim(a), claim(b))[0] is True
        lo, hi = t_interval(a)
        outside += not lo <= mean(b) <= hi
    return disjoint / trials, outside / trials


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--trials", type=int, default=20000)
    args = ap.parse_args()
    rng = random.Random(31)
    rows = []
    print(f"{args.seeds} seeds per side, {args.trials} trials per shift (normal seeds, sd 1)")
    print("shift (sd)  moved: intervals disjoint  B's mean outside A's interval")
    for shift in (0, 1, 2, 3, 4, 6):
        d, o = rates(args.seeds, args.trials, shift, rng)
        rows.append({"shift_sd": shift, "disjoint": d, "outside": o})
        print(f"{shift:>10}  {d:>24.4f}  {o:>29.4f}")
    out = HERE / "results" / "compare_rule.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"seeds": args.seeds, "trials": args.trials, "rows": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
