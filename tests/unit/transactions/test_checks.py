"""P1-P9 pass on histories the scenario's nodes log (in-memory runtime) and fail on broken ones:
a reordered operation, a misrouted op5, a partial delivery, a divergent outcome, an aborted
transaction's entry left in a routing table, commits in opposite orders, an abort."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from testbed.analysis.context import AnalysisContext, AnalysisOptions
from testbed.protocols.transactions.analysis import checks as C
from tests.unit.pubsub.harness import WALL0

from .harness import run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from analysis_helpers import events_df  # noqa: E402

pytestmark = pytest.mark.spark

_SIMS: dict = {}


def history(variant: str, **kw) -> list[dict]:
    key = (variant, tuple(sorted(kw.items())))
    if key not in _SIMS:
        _SIMS[key] = run(variant, seconds=6, transactions=3, **kw).logs
    return copy.deepcopy(_SIMS[key])


def by_event(logs: list[dict]) -> dict[str, list[dict]]:
    """The tx_* rows of ``logs`` by event type, as ``ctx_of`` hands them to Spark."""
    by_ev: dict[str, list[dict]] = {}
    for r in logs:
        if not r["ev"].startswith("tx_"):
            continue
        row = {k: v for k, v in r.items() if k not in ("t", "m", "ev")}
        row["s"] = (r["t"] - WALL0) / 1e9
        for k in ("srt", "prt"):
            if k in row:
                row[k] = json.dumps(row[k])
        by_ev.setdefault(r["ev"], []).append(row)
    return by_ev


def ctx_of(spark, logs: list[dict], variant: str, **params) -> AnalysisContext:
    dfs = {ev: events_df(spark, ev, rows) for ev, rows in by_event(logs).items()}
    plan = {"name": "t", "protocol": "transactions", "provider": "local", "duration_s": 6.0,
            "params": {"variant": variant, **params}, "actions": [], "nodes": {}}
    return AnalysisContext.build(spark, Path("/nonexistent"), plan, {"t0_wall_ns": WALL0, "timeline": []},
                                 dfs, AnalysisOptions())


ALL = [C.check_sequential_consistency, C.check_scenario_routing, C.check_delivery_atomicity,
       C.check_agreement, C.check_routing_state, C.check_commit_order, C.check_no_aborts]


NAMES = dict(zip(ALL, ["transactions.p1_order", "transactions.p2_routing", "transactions.p3_atomicity",
                        "transactions.p4_agreement", "transactions.p5_tables", "transactions.p6_commit_order",
                        "transactions.p9_no_aborts"]))
# the unbroken histories the tests below break, by (variant, params); every check runs on them
# (test_every_check_passes_on_a_real_history, test_checks_pass_with_explicit_aborts_...)
CLEAN = {("dtx", ()), ("dtxni", ()), ("stx", ()), ("blwait", ()), ("dtx", (("abort_every", 2),)),
         ("dtxni", (("abort_every", 2),))}
_CLEAN: dict = {}  # (variant, params) -> ({check: result}, {check: the event types it read})


def run_checks(spark, logs, variant, checks, **params) -> tuple[dict, dict]:
    """-> ({check: its result}, {check: the event types it read through ``ctx.df``}) on ``logs``."""
    ctx = ctx_of(spark, logs, variant, **params)
    df = ctx.df
    res, reads = {}, {}
    for chk in checks:
        seen: set[str] = set()
        ctx.df = lambda ev, seen=seen: seen.add(ev) or df(ev)
        res[chk] = chk(ctx)
        assert res[chk].name == NAMES[chk]
        reads[chk] = seen
    return res, reads


def clean(spark, variant, **params) -> tuple[dict, dict]:
    """``run_checks`` of every check on the unbroken history, once per process."""
    key = (variant, tuple(sorted(params.items())))
    assert key in CLEAN
    if key not in _CLEAN:
        _CLEAN[key] = run_checks(spark, history(variant, **params), variant, ALL, **params)
    return _CLEAN[key]


def failed(spark, logs, variant, only: set[str] | None = None, broken: bool = False, **params):
    """{name: result} of the checks that fail on ``logs``. ``only``: just the checks named (an
    assertion about one check's result needs no other).

    ``broken``: ``logs`` is ``history(variant, **params)`` broken by the test (a history in CLEAN);
    then only the checks that read an event type the break touched run again. A check reads the
    history only through ``ctx.df`` (and the plan, the same for both): one that read none of the
    touched types on the clean history computes on the broken one exactly what it computed there,
    and that result stands. So ``set(failed(...)) == {X}`` is still the verdict of all seven checks
    (issue #26: each check is several Spark jobs)."""
    checks = [c for c in ALL if only is None or NAMES[c] in only]
    res = {}
    if broken:
        base, reads = clean(spark, variant, **params)
        was, now = by_event(history(variant, **params)), by_event(logs)
        touched = {ev for ev in set(was) | set(now) if was.get(ev) != now.get(ev)}
        assert touched, "not broken"
        res = {c: base[c] for c in checks if not reads[c] & touched}
    res.update(run_checks(spark, logs, variant, [c for c in checks if c not in res], **params)[0])
    return {r.name: r for r in res.values() if not r.passed}


@pytest.mark.parametrize("variant", ["dtx", "dtxni", "stx", "blwait"])
def test_every_check_passes_on_a_real_history(spark, variant):
    assert {r.name: r for r in clean(spark, variant)[0].values() if not r.passed} == {}


@pytest.mark.parametrize("variant", ["dtx", "dtxni"])
def test_checks_pass_with_explicit_aborts_and_p9_then_does_not_apply(spark, variant):
    logs = history(variant, abort_every=2)
    assert [r["outcome"] for r in logs if r["ev"] == "tx_end"] == ["committed", "aborted", "committed"]
    assert {r.name: r for r in clean(spark, variant, abort_every=2)[0].values() if not r.passed} == {}


def test_p1_fails_on_an_operation_processed_out_of_order(spark):
    logs = history("dtx")
    procs = [r for r in logs if r["ev"] == "tx_proc" and r["node"] == "b1" and r["tx"] == "e-0.0:2"]
    by_n = {int(r["op_id"].rsplit("/", 1)[1]): r for r in procs}
    by_n[3]["k"], by_n[5]["k"] = by_n[5]["k"], by_n[3]["k"]  # b1 processed op5 before op3
    bad = failed(spark, logs, "dtx", broken=True)
    assert set(bad) == {"transactions.p1_order"}
    ex = bad["transactions.p1_order"].examples
    assert {(e["node"], e["a"], e["b"]) for e in ex} >= {("b1", "e-0.0:2/3", "e-0.0:2/5")}


def test_p2_fails_when_op5_reaches_the_dispatcher(spark):
    logs = history("blwait")
    d = next(r for r in logs if r["ev"] == "tx_deliver" and r["op_id"] == "e-0.0:1/1")
    logs.append({**d, "op_id": "e-0.0:1/5", "n": 5, "t": d["t"] + 10**8})
    bad = failed(spark, logs, "blwait", broken=True)
    assert set(bad) == {"transactions.p2_routing"}
    assert bad["transactions.p2_routing"].examples[0]["got"] == ["a-1", "d-0"]


def test_p3_fails_on_a_partial_delivery(spark):
    logs = history("stx")
    i = next(i for i, r in enumerate(logs) if r["ev"] == "tx_deliver" and r["op_id"] == "e-0.0:2/5")
    del logs[i]  # the agent received op5 of a committed transaction and never delivered it
    bad = failed(spark, logs, "stx", broken=True)
    assert "transactions.p3_atomicity" in bad
    assert bad["transactions.p3_atomicity"].examples[0]["problem"] == "not delivered exactly once"
    assert set(bad) <= {"transactions.p3_atomicity", "transactions.p2_routing"}


def test_p3_fails_on_a_delivery_of_an_aborted_transaction(spark):
    logs = history("dtxni", abort_every=2)
    disc = next(r for r in logs if r["ev"] == "tx_discard" and r["n"] == 5)
    logs.append({**disc, "ev": "tx_deliver"})
    bad = failed(spark, logs, "dtxni", broken=True, abort_every=2)
    assert set(bad) == {"transactions.p3_atomicity"}
    assert bad["transactions.p3_atomicity"].examples[0]["problem"] == "delivered although aborted"


def test_p4_fails_on_a_divergent_outcome(spark):
    logs = history("dtx")
    ph = next(r for r in logs if r["ev"] == "tx_phase" and r["phase"] == "commit" and r["node"] == "b3")
    ph["phase"] = "abort"
    bad = failed(spark, logs, "dtx", only={"transactions.p4_agreement"})
    assert "transactions.p4_agreement" in bad
    ex = bad["transactions.p4_agreement"].examples
    assert ex[0]["where"] == "broker b3" and ex[0]["logged"] == "aborted" and ex[0]["expected"] == "committed"
    # and a transaction without an end at its TXC
    logs = history("stx")
    logs = [r for r in logs if not (r["ev"] == "tx_end" and r["tx"] == "e-0.0:3")]
    bad = failed(spark, logs, "stx", only={"transactions.p4_agreement"})
    assert any(e["expected"] == "exactly one tx_end" for e in bad["transactions.p4_agreement"].examples)


def test_p5_fails_on_an_aborted_transaction_s_entry_left_in_a_routing_table(spark):
    logs = history("dtxni", abort_every=2)
    tables = [r for r in logs if r["ev"] == "tx_tables" and r["node"] == "b1"][-1]
    tables["prt"]["e-0.0:2/3"] = "b2"  # the aborted transaction's op3 subscription survived
    bad = failed(spark, logs, "dtxni", broken=True, abort_every=2)
    assert set(bad) == {"transactions.p5_tables"}
    assert bad["transactions.p5_tables"].examples == [
        {"node": "b1", "table": "prt", "sub_id": "e-0.0:2/3", "expected": False, "actual": True}]
    # and a committed unsubscription whose entry is still there
    logs = history("stx")
    tables = [r for r in logs if r["ev"] == "tx_tables" and r["node"] == "b2"][-1]
    tables["prt"]["d-0:s:p0.0:1"] = "d/d-0"
    assert set(failed(spark, logs, "stx", broken=True)) == {"transactions.p5_tables"}


def test_p6_fails_when_two_brokers_commit_in_opposite_orders(spark):
    logs = history("dtx", threads=2)
    commits = [r for r in logs if r["ev"] == "tx_phase" and r["phase"] == "commit" and r["node"] == "b3"]
    commits[0]["t"], commits[1]["t"] = commits[1]["t"], commits[0]["t"]
    bad = failed(spark, logs, "dtx", threads=2)
    assert set(bad) == {"transactions.p6_commit_order"}
    # D-TXNI may reorder: reported, not failed
    assert "transactions.p6_commit_order" not in failed(spark, logs, "dtxni", only={"transactions.p6_commit_order"},
                                                     threads=2)


def test_p9_fails_on_an_abort_in_a_figure_run(spark):
    logs = history("blwait", wait=0.01, timeout=1.0)
    bad = failed(spark, logs, "blwait", only={"transactions.p9_no_aborts", "transactions.p2_routing"})
    assert {"transactions.p9_no_aborts", "transactions.p2_routing"} <= set(bad)
