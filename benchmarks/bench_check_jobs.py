"""Spark jobs and seconds per history check, on the unit tests' own histories (issue #26).

The checks' cost on tiny histories is Spark's per-action overhead (scheduling, planning), not
data: the lever is the number of actions (jobs) a check runs. For each check of the mobility
protocol (a clean reconfiguration run, a covering run) and of the transactions protocol (one real
history per variant) this prints the jobs it ran (Spark's status tracker, one job group per check)
its wall time and the driver JVM's CPU time (the medians of ``--repeat`` passes after one warm-up
pass), and writes them as JSON.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_check_jobs.py [--out FILE] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "unit"))  # the tests import their harnesses as top-level packages


def jvm_cpu_s(spark) -> float:
    """CPU seconds (user + system) of the driver JVM so far: local mode runs every task in it, and
    CPU time, unlike wall time, hardly depends on what else the machine runs."""
    pid = spark.sparkContext._gateway.proc.pid
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def measure(spark, label: str, checks, make_ctx, repeat: int) -> dict[str, dict]:
    """{check: {jobs, s (median of ``repeat``)}}; each pass on a fresh context (nothing shared)."""
    sc = spark.sparkContext
    out: dict[str, dict] = {}
    for i in range(repeat + 1):  # pass 0 warms the JVM and is not counted
        sc.setJobGroup("bench", "bench")
        ctx = make_ctx()
        for c in checks:
            g = f"bench-{label}-{c.__name__}-{i}"
            sc.setJobGroup(g, g)
            t, cpu = time.monotonic(), jvm_cpu_s(spark)
            c(ctx)
            dt, dcpu = time.monotonic() - t, jvm_cpu_s(spark) - cpu
            jobs = len(sc.statusTracker().getJobIdsForGroup(g))
            if i:
                e = out.setdefault(c.__name__, {"jobs": jobs, "times": [], "cpus": []})
                e["times"].append(dt)
                e["cpus"].append(dcpu)
        ctx.release()
    sc.setJobGroup("bench", "bench")
    for e in out.values():
        ts, cs = sorted(e.pop("times")), sorted(e.pop("cpus"))
        e["s"] = round(ts[len(ts) // 2], 3)
        e["jvm_cpu_s"] = round(cs[len(cs) // 2], 3)
    return out


def mobility(spark, repeat: int) -> dict[str, dict]:
    from testbed.analysis.context import AnalysisContext, AnalysisOptions
    from testbed.analysis.ingest import ingest
    from testbed.protocols.mobility.analysis.checks import CHECKS
    from tests.unit.mobility.test_checks import history, write_run

    res = {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    for movement in ("reconfiguration", "covering"):
        root = write_run(tmp / movement, *history(movement))
        plan = json.loads((root / "plan.json").read_text())
        manifest = json.loads((root / "manifest.json").read_text())

        def make_ctx(root=root, plan=plan, manifest=manifest):
            ing = ingest(spark, root, write=False)
            return AnalysisContext.build(spark, root, plan, manifest, dict(ing),
                                         AnalysisOptions(settle_s=0.3, travel_margin_s=0.5))

        res[movement] = measure(spark, movement, CHECKS, make_ctx, repeat)
    return res


def transactions(spark, repeat: int) -> dict[str, dict]:
    from tests.unit.transactions.test_checks import ALL, ctx_of, history

    res = {}
    for variant in ("dtx", "blwait"):
        logs = history(variant)
        res[variant] = measure(spark, variant, ALL, lambda logs=logs, v=variant: ctx_of(spark, logs, v), repeat)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/check_jobs.json")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=["mobility", "transactions"])
    ap.add_argument("--conf", action="append", default=[], metavar="K=V", help="an extra Spark setting")
    a = ap.parse_args()
    from testbed.analysis.session import (
        SMALL_DATA_CONF,
        SMALL_DATA_JAVA_OPTS,
        spark_session,
    )

    conf = {**SMALL_DATA_CONF, **dict(kv.split("=", 1) for kv in a.conf)}
    spark = spark_session(app="bench-check-jobs", conf=conf, java_opts=SMALL_DATA_JAVA_OPTS)
    load0 = os.getloadavg()[0]
    out = {"load_1min_start": round(load0, 2), "conf": conf}
    if a.only in (None, "mobility"):
        out["mobility"] = mobility(spark, a.repeat)
    if a.only in (None, "transactions"):
        out["transactions"] = transactions(spark, a.repeat)
    out["load_1min_end"] = round(os.getloadavg()[0], 2)
    for proto in ("mobility", "transactions"):
        for hist, checks in out.get(proto, {}).items():
            tj = sum(e["jobs"] for e in checks.values())
            ts = sum(e["s"] for e in checks.values())
            tc = sum(e["jvm_cpu_s"] for e in checks.values())
            print(f"{proto}/{hist}: {tj} jobs, {ts:.2f} s wall, {tc:.2f} s JVM CPU")
            for name, e in checks.items():
                print(f"  {name:34s} {e['jobs']:4d} jobs {e['s']:7.3f} s wall {e['jvm_cpu_s']:7.3f} s CPU")
    print(f"load (1 min): {out['load_1min_start']} at the start, {out['load_1min_end']} at the end")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"written to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
