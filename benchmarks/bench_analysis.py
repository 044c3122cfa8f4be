"""Analysis benchmark: analyze() wall time per phase on synthetic run directories of growing size.

    .venv/bin/python benchmarks/bench_analysis.py [--rates 5 50 200] [--duration 60] [--subscribers 8]

Each size is one synthetic pub/sub run (testbed.testing.synthetic: 2 publishers,
``--subscribers`` STOCK subscribers + 1 narrower one, a 2 s stall) analysed end to end
with one local[2] SparkSession shared by all sizes (its start-up is timed separately).
Prints the numbers and writes benchmarks/results/analysis.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from testbed.analysis.job import analyze  # noqa: E402
from testbed.analysis.session import spark_session  # noqa: E402
from testbed.testing.synthetic import make_run_dir  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", type=float, nargs="+", default=[5.0, 50.0, 200.0], help="msgs/s per publisher")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--subscribers", type=int, default=8)
    args = ap.parse_args()

    t = time.monotonic()
    spark = spark_session()
    spark.range(1).count()
    startup = time.monotonic() - t
    print(f"spark start-up: {startup:.2f} s")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, rate in enumerate(args.rates):
            t = time.monotonic()
            syn = make_run_dir(Path(tmp) / str(i), duration_s=args.duration, publishers=2,
                               subscribers=args.subscribers, rate_per_s=rate)
            gen_s = time.monotonic() - t
            phases: dict[str, float] = {}

            def progress(line: str) -> None:
                m = re.match(r"(\w+)(?: (\w+))?:.*?([\d.]+) s(?: total)?\)", line)
                if m:
                    name = m.group(2) or m.group(1)
                    phases["total" if name == "report" else name] = float(m.group(3))

            t = time.monotonic()
            res = analyze(syn.path, spark=spark, progress=progress)
            total = time.monotonic() - t
            row = {"rate_per_publisher": rate, "events": syn.events, "deliveries": syn.deliveries,
                   "generate_s": round(gen_s, 2), "analyze_s": round(total, 2),
                   "events_per_s": round(syn.events / total), "phases_s": phases,
                   "checks_passed": sum(c.passed for c in res.checks), "checks": len(res.checks)}
            rows.append(row)
            print(f"{syn.events:>8} events ({syn.deliveries} deliveries): analyze {total:6.2f} s "
                  f"({row['events_per_s']} events/s)  phases {phases}")
    spark.stop()
    out = HERE / "results" / "analysis.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"spark_startup_s": round(startup, 2), "master": "local[2]",
                               "duration_s": args.duration, "runs": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
