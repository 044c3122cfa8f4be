"""Analysis benchmark: analyze() wall time per phase on synthetic run directories of growing size.

    .venv/bin/python benchmarks/bench_analysis.py [--rates 5 50 200 1500] [--duration 60] [--subscribers 8]
                                                 [--batch 8] [--plain]

Each size is one synthetic pub/sub run (testbed.testing.synthetic: 2 publishers,
``--subscribers`` STOCK subscribers + 1 narrower one, a 2 s stall) analysed end to end
with one local[2] SparkSession shared by all sizes (its start-up is timed separately).
Also measured: re-analysis of the smallest run (its stored Parquet reused, no JSON parse),
the cost slope (seconds per million events, least squares over the sizes) and, with
``--batch N``, N small runs analysed in the one session (``api.analyze_runs``): the fixed
cost per run. ``--plain``: a plain single-process Python pass of four checks over the same logs
right after each size's Spark analysis (``testbed.testing.plain_checks``): the ratio measured in
one run. The machine's load average is recorded with the numbers.
Prints the numbers and writes benchmarks/results/analysis.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from testbed.analysis.job import analyze  # noqa: E402
from testbed.analysis.session import spark_session  # noqa: E402
from testbed.testing.synthetic import Synthetic, make_run_dir  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", type=float, nargs="+", default=[5.0, 50.0, 200.0], help="msgs/s per publisher")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--subscribers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=0, help="also analyse N small runs (rate 5, 20 s) in the session, "
                                                        "again (Parquet reused), and read them all with read_runs")
    ap.add_argument("--keep", metavar="DIR", help="keep the generated runs in DIR and reuse them on the next call "
                                                  "(same rate, duration, subscribers): no regeneration")
    ap.add_argument("--java-opts", default="", help="driver JVM options, e.g. -XX:TieredStopAtLevel=4 (C2 JIT, "
                                                     "what `testbed analyze` uses for logs over 256 MB)")
    ap.add_argument("--plain", action="store_true",
                    help="also run a plain single-process Python pass of four checks (testbed.testing.plain_checks) "
                         "over the same logs right after Spark's analysis of each size: the ratio in one run (#33)")
    ap.add_argument("--out", default="analysis.json", help="result file name under benchmarks/results/")
    args = ap.parse_args()

    t = time.monotonic()
    spark = spark_session(java_opts=args.java_opts)
    spark.range(1).count()
    startup = time.monotonic() - t
    print(f"spark start-up: {startup:.2f} s")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, rate in enumerate(args.rates):
            t = time.monotonic()
            syn = _run(Path(args.keep) if args.keep else Path(tmp), f"r{rate:g}-d{args.duration:g}-s{args.subscribers}",
                       duration_s=args.duration, subscribers=args.subscribers, rate_per_s=rate)
            gen_s = time.monotonic() - t
            phases: dict[str, float] = {}
            cpu: dict[str, float] = {}
            py_cpu: dict[str, float] = {}
            last_cpu = [_jvm_cpu_s(spark)]
            last_py = [time.process_time()]

            def progress(line: str) -> None:
                m = re.match(r"(\w+)(?: (\w+))?:.*?([\d.]+) s(?: total)?\)", line)
                if m:
                    name = m.group(2) or m.group(1)
                    phases["total" if name == "report" else name] = float(m.group(3))
                    now = _jvm_cpu_s(spark)
                    if name != "report" and now is not None:
                        cpu[name] = round(now - last_cpu[0], 1)
                        last_cpu[0] = now
                    if name != "report":
                        py_cpu[name] = round(time.process_time() - last_py[0], 1)
                        last_py[0] = time.process_time()

            t = time.monotonic()
            cpu0 = _jvm_cpu_s(spark)
            py0 = time.process_time()
            last_cpu[0], last_py[0] = cpu0, py0
            res = analyze(syn.path, spark=spark, progress=progress, reuse=False)  # parse (a kept run has Parquet)
            total = time.monotonic() - t
            jvm_cpu = None if cpu0 is None else round(_jvm_cpu_s(spark) - cpu0, 1)
            driver_cpu = round(time.process_time() - py0, 1)
            row = {"rate_per_publisher": rate, "events": syn.events, "deliveries": syn.deliveries,
                   "input_mb": round(res.ingest.get("input_bytes", 0) / 1e6, 1),
                   "generate_s": round(gen_s, 2), "analyze_s": round(total, 2),
                   "events_per_s": round(syn.events / total), "phases_s": phases,
                   "jvm_cpu_s": jvm_cpu, "phases_jvm_cpu_s": dict(cpu),
                   # the Python driver's own CPU (the pyarrow ingest runs there, not in the JVM)
                   "driver_cpu_s": driver_cpu, "phases_driver_cpu_s": dict(py_cpu),
                   "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                   "load_average_after": [round(x, 2) for x in os.getloadavg()],
                   "checks_passed": sum(c.passed for c in res.checks), "checks": len(res.checks),
                   "verdicts": {c.name: [c.passed, c.violations, c.attributed] for c in res.checks}}
            if args.plain:
                from testbed.testing.plain_checks import run_checks

                t, c0 = time.monotonic(), time.process_time()
                plain = run_checks(syn.path)
                plain_s = time.monotonic() - t
                row["plain"] = {"s": round(plain_s, 2), "cpu_s": round(time.process_time() - c0, 2),
                                "events_per_s": round(plain.events / plain_s), "events": plain.events,
                                "violations": plain.violations, "attributed": plain.attributed,
                                "load_average_after": [round(x, 2) for x in os.getloadavg()]}
                # > 1: Spark's whole analysis (ingest, checks, metrics, figures) took less wall time
                # than the plain pass's four checks
                row["plain_s_over_spark_s"] = round(plain_s / total, 3)
                print(f"{'':>8} plain Python pass (four checks): {plain_s:6.2f} s ({row['plain']['events_per_s']} "
                      f"events/s), violations {plain.violations}, attributed {plain.attributed}; "
                      f"plain / Spark wall {row['plain_s_over_spark_s']}", flush=True)
            if i == 0:  # re-analysis of an unchanged run: the stored Parquet is reused
                phases = {}
                cpu.clear()
                last_cpu[0] = _jvm_cpu_s(spark)
                t = time.monotonic()
                again = analyze(syn.path, spark=spark, progress=progress)
                row["reanalyze_s"] = round(time.monotonic() - t, 2)
                row["reanalyze_phases_s"] = phases
                row["reanalyze_phases_jvm_cpu_s"] = dict(cpu)
                row["reanalyze_reused_parquet"] = bool(again.ingest.get("reused"))
            rows.append(row)
            print(f"{syn.events:>8} events ({syn.deliveries} deliveries): analyze {total:6.2f} s "
                  f"({row['events_per_s']} events/s)  phases {row['phases_s']}  JVM CPU {jvm_cpu} s "
                  f"{row['phases_jvm_cpu_s']}  driver CPU {driver_cpu} s {row['phases_driver_cpu_s']} "
                  f"peak RSS {row['driver_peak_rss_mb']} MB  load {row['load_average_after']}"
                  + (f"  re-analysis {row['reanalyze_s']} s (reused Parquet: {row['reanalyze_reused_parquet']})"
                     if "reanalyze_s" in row else ""))
        batch = None
        if args.batch:
            from testbed.api import analyze_runs

            dirs = [str(make_run_dir(Path(tmp) / f"batch{j}", run_id=f"batch-{j}", duration_s=20.0, publishers=2,
                                     subscribers=2, rate_per_s=5.0).path) for j in range(args.batch)]
            t = time.monotonic()
            res = analyze_runs(dirs)  # reuses the benchmark's active session
            b_s = time.monotonic() - t
            t = time.monotonic()
            again = analyze_runs(dirs)  # unchanged runs: their Parquet is reused
            r_s = time.monotonic() - t
            # a figure's multi-run read: one Spark job over every run's Parquet
            from testbed.analysis.batch import read_runs

            sc = spark.sparkContext
            sc.setJobGroup("bench-read-runs", "read_runs over the batch")
            t = time.monotonic()
            per_run = read_runs(spark, dirs, "deliver").groupBy("run_id").count().collect()
            rr_s = time.monotonic() - t
            jobs = len(sc.statusTracker().getJobIdsForGroup("bench-read-runs"))
            sc.setJobGroup("", "")
            batch = {"runs": args.batch, "events_per_run": res[0].ingest["lines"], "total_s": round(b_s, 2),
                     "per_run_s": round(b_s / args.batch, 2),
                     "reanalysis_per_run_s": round(r_s / args.batch, 2),
                     "reanalysis_reused_parquet": all(a.ingest.get("reused") for a in again),
                     "verdicts_same": [[c.passed for c in a.checks] for a in res]
                                      == [[c.passed for c in a.checks] for a in again],
                     "read_runs_s": round(rr_s, 2), "read_runs_jobs": jobs, "read_runs_groups": len(per_run)}
            print(f"batch: {args.batch} small runs in one session: {b_s:.2f} s ({b_s / args.batch:.2f} s per run); "
                  f"again with the Parquet reused ({batch['reanalysis_reused_parquet']}): {r_s:.2f} s "
                  f"({r_s / args.batch:.2f} s per run); read_runs over all: {rr_s:.2f} s in {jobs} Spark job(s)")
    spark.stop()
    slope = _slope([(r["events"], r["analyze_s"]) for r in rows])
    if slope:
        print(f"cost: {slope['s_per_million_events']} s per million events + {slope['intercept_s']} s "
              f"({slope['marginal_events_per_s']} events/s marginal)")
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    out = HERE / "results" / args.out
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"spark_startup_s": round(startup, 2), "master": "local[2]",
                               "duration_s": args.duration, "java_opts": args.java_opts, "runs": rows, "slope": slope, "batch": batch,
                               "load_average": [round(x, 2) for x in load], "cores": os.cpu_count()},
                              indent=1) + "\n")
    print(f"wrote {out}")


def _jvm_cpu_s(spark) -> float | None:
    """CPU seconds (user + system) the Spark JVM has used so far (Linux /proc; None elsewhere).

    Load-independent where wall time is not: on a shared machine a phase's wall time grows with
    the other jobs, its CPU time much less."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (AttributeError, OSError, IndexError, ValueError):
        return None


def _run(root: Path, name: str, **kw) -> Synthetic:
    """A synthetic run under ``root/name`` (generated, or reused from an earlier --keep)."""
    root = root.resolve()
    meta = root / name / "synthetic.json"
    if meta.exists():
        d = json.loads(meta.read_text())
        return Synthetic(root / name / "synthetic-run", d["publications"], d["deliveries"], d["lost_in_fault"],
                         d["events"])
    if (root / name).exists():
        import shutil

        shutil.rmtree(root / name)
    syn = make_run_dir(root / name, publishers=2, stream=True, **kw)
    meta.write_text(json.dumps({"path": str(syn.path.resolve()), "publications": syn.publications,
                                "deliveries": syn.deliveries, "lost_in_fault": syn.lost_in_fault,
                                "events": syn.events}))
    return syn


def _slope(points: list[tuple[int, float]]) -> dict | None:
    """Least-squares line seconds = a + b * events over the sizes."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if not sxx:
        return None
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    a = my - b * mx
    return {"s_per_million_events": round(b * 1e6, 2), "intercept_s": round(a, 2),
            "marginal_events_per_s": round(1 / b) if b > 0 else None}


if __name__ == "__main__":
    main()
