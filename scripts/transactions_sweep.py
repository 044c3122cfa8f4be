#!/usr/bin/env python3
"""Sweep of randomized transactions topologies: every variant on each, half with a crash.

    PYTHONPATH=. python scripts/transactions_sweep.py [-n 20] [--seed 200] [--variants dtx,dtxni,stx,blwait]
                                                      [--runtime sim|local] [--batch N] [--out runs/transactions-sweep]

Each seed draws a topology with testbed.protocols.transactions.analysis.randomized (a random
tree of 4-9 brokers, 1-3 instances x 1-3 TXC threads, client groups on 1-3 random brokers, the
§3.3 conflict workload on); seeds alternate without / with a crash + restart of a random broker
(even offsets: none, odd: crash), so half the runs have one. ``--runtime local`` runs each on
real processes and analyses it (every check of the protocol, Spark); ``--runtime sim`` runs the
same nodes on the deterministic in-memory runtime of the unit tests (tests/unit/pubsub/harness.py:
the real node code, simulated sockets and clock; seconds per run) and runs the protocol's
checks (P1-P9 with the issue #27 ones) on their logs in one Spark session (``--batch N``: N runs
at a time, as a reproduction's batched checks do: seconds per run instead of ~20). Prints one line per
run and a summary; writes ``OUT/summary.json``. Exit status 1 if any run failed a check.

A failed run is never counted as passed. One kind of failure is the protocol's own finding, not a
bug to fix: BL-WAIT has no recovery (the plain pub/sub broker; docs/transactions.md, "BL-WAIT and
faults"), so with a crash its P2 fails. A BL-WAIT crash run whose only failed check is P2 is
marked ``finding`` (the check's ``checks.no_recovery_finding``) and the summary counts such runs
per variant apart from the unexpected failures; both are failures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def sim_run(seed: int, variant: str, crash: bool, duration_s: float):
    """The topology of ``seed`` on the in-memory runtime: its logs."""
    from tests.unit.transactions.harness import run_random

    sim, d = run_random(seed, variant, crash, duration_s)
    return sim.logs, d


def sim_check(spark, logs, variant: str, crash: bool) -> list:
    from testbed.protocols.transactions.analysis.checks import CHECKS
    from tests.unit.transactions.test_checks import ctx_of

    ctx = ctx_of(spark, logs, variant, conflict=variant != "blwait")
    if crash:
        ctx.plan["actions"] = [{"crash": "x"}]
    out = []
    for chk in CHECKS:
        if chk.__module__.endswith("pubsub.analysis.checks"):
            continue  # the regular-traffic checks (P8): no regular events in these runs
        out.append(chk(ctx))
    return out


def sim_check_batch(spark, runs: dict[str, tuple[list, str, bool]]) -> dict[str, dict[str, tuple[int, list]]]:
    """The protocol's checks on many in-memory runs at once, as the batched checks of a
    reproduction do (``analysis/batch.py``: every id prefixed with its run, one Spark job per check
    and group of runs): runs = {key: (logs, variant, crash)} -> {key: {failed check: (violations,
    examples)}} (only required checks that found violations)."""
    from testbed.protocols.transactions.analysis.batch import CHECKS, KEYS, SEP, per_run
    from tests.unit.transactions.test_checks import ctx_of

    groups: dict[tuple[str, bool], list[str]] = {}
    for k, (_, v, crash) in runs.items():
        groups.setdefault((v, crash), []).append(k)
    out: dict[str, dict[str, tuple[int, list]]] = {k: {} for k in runs}
    for (v, crash), keys in sorted(groups.items()):
        rows = []
        for k in keys:
            for r in runs[k][0]:
                if not r["ev"].startswith("tx_"):
                    continue
                r = dict(r)
                for c in KEYS:
                    if isinstance(r.get(c), str) and r[c]:
                        r[c] = f"{k}{SEP}{r[c]}"
                for c in ("srt", "prt"):
                    if isinstance(r.get(c), dict):
                        r[c] = {f"{k}{SEP}{i}": h for i, h in r[c].items()}
                rows.append(r)
        ctx = ctx_of(spark, rows, v, conflict=v != "blwait")
        if crash:
            ctx.plan["actions"] = [{"crash": "x"}]
        p9 = not crash and v == "blwait"  # batch.group_key: no explicit aborts, faults, conflict workload
        for name, _desc, applies, required, viol, col in CHECKS:
            if not applies(v, p9) or not required(v):
                continue
            for k, (n, ex) in per_run(viol(ctx, v), col).items():
                if n:
                    out[k][name] = (n, ex)
    return out


def finding_of(variant: str, crash: bool, failed: dict[str, int]) -> str:
    """The protocol finding that explains every failed check of a run, or '' (an unexpected
    failure, or none)."""
    from testbed.protocols.transactions.analysis.checks import no_recovery_finding

    plan = {"actions": [{"crash": "x"}] if crash else []}
    if failed and all(no_recovery_finding(variant, plan, name, n) for name, n in failed.items()):
        return "blwait-no-recovery"
    return ""


def main(argv: list[str] | None = None) -> int:
    from testbed.protocols.transactions.analysis.randomized import VARIANTS, describe, generate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("-n", type=int, default=20, help="number of topologies (default 20)")
    ap.add_argument("--seed", type=int, default=200, help="first seed (default 200)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--runtime", choices=("sim", "local"), default="local")
    ap.add_argument("--duration", type=int, default=14, help="workload seconds (default 14)")
    ap.add_argument("--out", default="runs/transactions-sweep", help="work and result directory")
    ap.add_argument("--batch", type=int, default=0, help="sim: check this many runs at once (the batched "
                    "checks, one Spark job per check and variant; default 0: every run on its own)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    variants = [v for v in a.variants.split(",") if v]
    spark = None
    if a.runtime == "sim":
        from testbed.analysis.session import SMALL_DATA_CONF, SMALL_DATA_JAVA_OPTS, spark_session

        spark = spark_session(app="tx-sweep", conf=SMALL_DATA_CONF, java_opts=SMALL_DATA_JAVA_OPTS)
    rows = []
    t_all = time.monotonic()
    pending: dict[str, tuple[list, str, bool]] = {}  # --batch: runs waiting for their checks
    meta: dict[str, dict] = {}

    def show(row: dict) -> None:
        row["finding"] = "" if row["passed"] else finding_of(row["variant"], row["crash"] != "none", row.get("failed") or {})
        verdict = "PASS" if row["passed"] else ("FAIL (finding: " + row["finding"] + ")" if row["finding"] else "FAIL")
        print(f"seed {row['seed']} {row['variant']}: {verdict} "
              f"brokers={row['brokers']} inst={row['instances']}x{row['threads']} tx={row['transactions']} "
              f"crash={row['crash']} ends={row.get('ends', '')} failed={row['failed']} {row['wall_s']} s", flush=True)

    def flush() -> None:
        if not pending:
            return
        t0 = time.monotonic()
        found = sim_check_batch(spark, pending)
        per = round((time.monotonic() - t0) / len(pending), 1)
        for k in pending:
            row = meta.pop(k)
            row.update(passed=not found[k], failed={n: v[0] for n, v in found[k].items()},
                       examples={n: v[1][:2] for n, v in found[k].items()})
            row["wall_s"] = round(row["wall_s"] + per, 1)
            rows.append(row)
            show(row)
        pending.clear()

    for i, seed in enumerate(range(a.seed, a.seed + a.n)):
        crash = i % 2 == 1
        d = describe(seed, crash)
        for v in variants:
            t0 = time.monotonic()
            try:
                if a.runtime == "sim":
                    logs, _ = sim_run(seed, v, crash, a.duration)
                    ends: dict[str, int] = {}
                    for x in logs:
                        if x["ev"] == "tx_end":
                            ends[x["outcome"]] = ends.get(x["outcome"], 0) + 1
                    r = {"ends": ends, "hold_timeouts": sum(1 for x in logs if x["ev"] == "tx_hold_timeout"),
                         "snapshot_missing": sum(1 for x in logs if x["ev"] == "tx_snapshot_missing")}
                    if a.batch > 0:
                        key = f"s{seed}{v}"
                        pending[key] = (logs, v, crash)
                        meta[key] = {"seed": seed, "variant": v, **d, **r, "wall_s": round(time.monotonic() - t0, 1)}
                        if len(pending) >= a.batch:
                            flush()
                        continue
                    res = sim_check(spark, logs, v, crash)
                    r.update(passed=not any(not x.passed for x in res),
                             failed={x.name: x.violations for x in res if not x.passed},
                             examples={x.name: x.examples[:2] for x in res if not x.passed}, checks=len(res))
                else:
                    from testbed.protocols.transactions.sweep import run_and_check

                    r = run_and_check(generate(seed, v, crash=crash, duration_s=a.duration), out)
            except Exception as e:  # noqa: BLE001 - a run that does not start is a result too
                rows.append({"seed": seed, "variant": v, **d, "passed": False, "error": f"{type(e).__name__}: {e}"})
                print(f"seed {seed} {v}: ERROR {type(e).__name__}: {e}", flush=True)
                continue
            row = {"seed": seed, "variant": v, **d, **r, "wall_s": round(time.monotonic() - t0, 1)}
            rows.append(row)
            show(row)
    flush()
    passed = sum(1 for r in rows if r["passed"])
    by: dict[str, dict[str, int]] = {}
    for r in rows:
        k = f"{r['variant']}/{'crash' if r['crash'] != 'none' else 'none'}"
        by.setdefault(k, {"runs": 0, "passed": 0, "failed_finding": 0, "failed_unexpected": 0})
        by[k]["runs"] += 1
        by[k]["passed"] += bool(r["passed"])
        if not r["passed"]:
            by[k]["failed_finding" if r.get("finding") else "failed_unexpected"] += 1
    finding = sum(1 for r in rows if not r["passed"] and r.get("finding"))
    fails: dict[str, int] = {}
    for r in rows:
        for name in r.get("failed", {}) or {}:
            fails[name] = fails.get(name, 0) + 1
    summary = {"runs": len(rows), "passed": passed, "runtime": a.runtime, "first_seed": a.seed,
               "duration_s": a.duration, "wall_s": round(time.monotonic() - t_all, 1),
               "failed_finding": finding, "failed_unexpected": len(rows) - passed - finding,
               "by_variant_fault": by, "failed_checks": fails, "rows": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"{passed}/{len(rows)} passed every check ({a.runtime}, {summary['wall_s']} s); failed: "
          f"{len(rows) - passed} ({finding} BL-WAIT's no-recovery finding, P2 after a crash: failed, shown apart; "
          f"{len(rows) - passed - finding} unexpected); "
          f"by variant/fault: {json.dumps(by)}; failed checks: {json.dumps(fails)}; summary: {out / 'summary.json'}")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
