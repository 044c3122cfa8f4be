"""The transactions protocol on real processes: every variant of Fig 5 (3 brokers, 5 ms links),
about 20 transactions each, then the Spark checks P1-P9 (+ the pub/sub checks) on the logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import api

TOPOS = Path(__file__).resolve().parents[2] / "topologies" / "transactions"
# the protocol's properties, on the fast setting these tests were written for (5 ms links, no broker
# service time); the paper's costs (costs.j2) are the reproduction's, tested there
FAST = {"service_ms": 0, "link_delay": "5ms", "link_jitter": "1ms"}
VARIANTS = ("dtx", "dtxni", "stx", "blwait")
# BL-WAIT is correct only when its fixed wait outlasts the agent's subscription on its way to E's
# broker (2 hops of 5 ms here). The default 200 ms failed once in CI (2026-11-27: transaction 17 of
# 20 aborted, op5 never reached the agent; the same test passed idle) on a machine at load ~10, where
# a process can stall longer than that. These tests check the protocol's properties, not BL-WAIT's
# timing (the reproduction's wait search does): a wait with room for a loaded machine, and a
# duration bound that leaves it time (the run ends when the TXC is done).
SLOW_MACHINE = {"blwait": {"wait": "600ms", "duration": "30s"}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for v in VARIANTS:
        [rd] = api.run(str(TOPOS / f"fig5-{v}.yaml"),
                       set_vars={**FAST, "duration": "16s", "timeout": "2s", "transactions": 20,
                                 **SLOW_MACHINE.get(v, {})},
                       runs_dir=str(root), analyze=False)
        out[v] = Path(rd.path)
    return out


def events(run: Path, ev: str) -> list[dict]:
    out = []
    for f in sorted((run / "logs").glob("*.jsonl")):
        out += [json.loads(line) for line in f.read_text().splitlines() if f'"ev":"{ev}"' in line]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_transaction_commits_on_real_processes(runs, variant):
    ends = events(runs[variant], "tx_end")
    assert len(ends) == 20, [e["reason"] for e in ends if e["outcome"] != "committed"]
    assert {e["outcome"] for e in ends} == {"committed"}
    assert all(e["latency_ms"] > 0 for e in ends)
    assert not events(runs[variant], "node_error")


@pytest.mark.slow
@pytest.mark.spark
def test_spark_checks_pass_on_every_variant(runs):
    from testbed.registry import checks_for
    from testbed.analysis.context import AnalysisContext
    from testbed.analysis.ingest import ingest
    from testbed.analysis.session import spark_session

    spark = spark_session()
    checks = checks_for("transactions")
    names = [c.__name__ for c in checks]
    assert "check_sequential_consistency" in names and "check_completeness" in names  # P1.., P8
    for v, run in runs.items():
        ing = ingest(spark, run, write=False)
        ctx = AnalysisContext.build(spark, run, json.loads((run / "plan.json").read_text()),
                                    json.loads((run / "manifest.json").read_text()), dict(ing))
        res = {r.name: r for r in (c(ctx) for c in checks)}
        assert all(r.passed for r in res.values()), {n: r.examples for n, r in res.items() if not r.passed}
        if v != "blwait":
            assert res["transactions.p1_order"].details["pairs"] >= 20 * 10  # 5 ops: 10 ordered pairs each
        assert ctx.results["transactions.summary"]["committed"] == 20  # (latencies: benchmarks, not tests)


# ---- beyond the paper: broker b2 crashes mid-transactions and restarts (crash.yaml) ------------
@pytest.fixture(scope="module")
def crash_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    out = {}
    for v in ("dtx", "dtxni", "stx"):
        [rd] = api.run(str(TOPOS / "crash.yaml"), set_vars={**FAST, "variant": v}, runs_dir=str(root),
                       analyze=False)
        out[v] = Path(rd.path)
    return out


@pytest.mark.slow
@pytest.mark.spark
def test_a_broker_crash_ends_every_transaction_with_one_outcome_and_no_partial_delivery(crash_runs):
    from testbed.registry import checks_for
    from testbed.analysis.context import AnalysisContext
    from testbed.analysis.ingest import ingest
    from testbed.analysis.session import spark_session

    spark = spark_session()
    for v, run in crash_runs.items():
        starts = [e for e in events(run, "node_start") if e["node"] == "b2"]
        assert [e["restarted"] for e in starts] == [False, True]  # the crash and restart happened
        begun, ends = events(run, "tx_begin"), events(run, "tx_end")
        why = (v, len(begun), events(run, "node_error"),
               {f.name: f.read_text()[-400:] for f in (run / "logs").glob("*.stderr") if f.read_text().strip()})
        assert len(begun) >= 15, why
        assert sorted(e["tx"] for e in ends) == sorted(e["tx"] for e in begun), why
        ing = ingest(spark, run, write=False)
        ctx = AnalysisContext.build(spark, run, json.loads((run / "plan.json").read_text()),
                                    json.loads((run / "manifest.json").read_text()), dict(ing))
        res = {r.name: r for r in (c(ctx) for c in checks_for("transactions"))}
        for name in ("transactions.p3_atomicity", "transactions.p4_agreement"):
            assert res[name].passed, (v, name, res[name].examples)
        # P3/P4 are what a crash must not break (the issue). The other checks are reported, not
        # asserted here: after a restart a broker can miss a re-learnt subscription (P5 at b2, seen
        # once in CI-like runs for D-TX; S-TX more often) - a known limit, see docs/transactions.md
