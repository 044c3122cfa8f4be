"""Issue #27's checks, each passing on a real history and failing on a planted bad one that
the checks before it passed: P3 on the expected recipients (a committed probe nobody received),
the §3.3 serial order (a probe decided after its dispatch delivered to the old subscriber), P1
per process lifetime (a restarted broker's counter starts again) and P5 from the decisions (a
committed usub that never reached one broker)."""

from __future__ import annotations

import pytest

from testbed.protocols.transactions.analysis import checks as C

from .test_checks import ALL, ctx_of, history

pytestmark = pytest.mark.spark

NEW = ALL + [C.check_expected_delivery, C.check_serial_order]
P3E, SER = "transactions.p3_expected", "transactions.p6_serial_order"


def bad(spark, logs, variant, checks, **params):
    ctx = ctx_of(spark, logs, variant, **params)
    return {r.name: r for r in (chk(ctx) for chk in checks) if not r.passed}


def _committed_probes(logs):
    ends = {r["tx"]: r["outcome"] for r in logs if r["ev"] == "tx_end"}
    return [r for r in logs if r["ev"] == "tx_begin" and r["kind"] == "probe" and ends.get(r["tx"]) == "committed"]


@pytest.mark.parametrize("variant", ["dtx", "dtxni", "stx"])
def test_the_new_checks_pass_on_real_conflict_histories(spark, variant):
    logs = history(variant, conflict=True)
    assert _committed_probes(logs)
    assert bad(spark, logs, variant, NEW, conflict=True) == {}


def test_p3_expected_fails_on_a_committed_probe_that_reached_nobody(spark):
    logs = history("dtx", conflict=True)
    tx = _committed_probes(logs)[0]["tx"]
    logs = [r for r in logs if not (r["ev"] in ("tx_recv", "tx_deliver") and r.get("tx") == tx)]
    assert bad(spark, logs, "dtx", ALL, conflict=True) == {}  # what was checked before passes it
    got = bad(spark, logs, "dtx", NEW, conflict=True)
    assert set(got) == {P3E, SER}
    assert got[P3E].examples == [{"tx": tx, "op_id": f"{tx}/6", "expected": [
        next(r["dispatcher"] for r in logs if r.get("tx") == tx and r["ev"] == "tx_begin"),
        next(r["agent"] for r in logs if r.get("tx") == tx and r["ev"] == "tx_begin")], "got": []}]


def test_serial_order_fails_on_a_probe_decided_after_its_dispatch_delivered_to_the_old_subscriber(spark):
    logs = history("dtx", conflict=True)
    begins = {r["tx"]: r for r in logs if r["ev"] == "tx_begin"}
    ctx = ctx_of(spark, logs, "dtx", conflict=True)
    pd = {r["tx"]: r for r in C.probe_dispatch(C.decisions(ctx.df("tx_begin"), ctx.df("tx_outcome"))).collect()}
    late = [t for t, r in pd.items() if r["decided"] == "committed" and r["disp_decided"] == "committed"
            and r["disp_decided_m"] < r["decided_m"]]
    assert late, "the history has no probe committed after its dispatch"
    tx = late[0]
    b = begins[tx]
    for r in logs:  # the §3.3 bug: delivered to D (the snapshot before the dispatch) instead of A
        if r["ev"] in ("tx_recv", "tx_deliver", "tx_outcome") and r.get("tx") == tx and r.get("client") == b["agent"]:
            r["client"] = b["dispatcher"]
            r["node"] = b["dispatcher"].split("-")[0]
    assert bad(spark, logs, "dtx", ALL, conflict=True) == {}
    got = bad(spark, logs, "dtx", NEW, conflict=True)
    assert set(got) == {SER}
    assert got[SER].examples[0]["tx"] == tx and got[SER].examples[0]["got"] == [b["dispatcher"]]
    # S-TX and D-TXNI: reported, not required
    r = C.check_serial_order(ctx_of(spark, logs, "stx", conflict=True))
    assert r.passed and r.details["violations_found"] == 1


def test_p1_compares_counters_within_one_process_lifetime_only(spark):
    logs = history("dtx")
    procs = sorted((r for r in logs if r["ev"] == "tx_proc" and r["node"] == "b2"), key=lambda r: r["t"])
    cut = procs[len(procs) // 2]["t"]
    k = 0
    for r in procs:  # b2 restarted between two operations: its counter began again from 1
        if r["t"] >= cut:
            k += 1
            r["k"] = k
    assert C.order_violations(C.required_order(ctx_of(spark, logs, "dtx").df("tx_op")),
                              ctx_of(spark, logs, "dtx").df("tx_proc")).count() == 0
    assert bad(spark, logs, "dtx", NEW) == {}
    # within the second lifetime, an operation processed out of order still fails
    tx = next(r["tx"] for r in procs if r["t"] >= cut and r["op_id"].endswith("/3")
              and any(q["tx"] == r["tx"] and q["op_id"].endswith("/5") and q["t"] >= cut for q in procs))
    by = {r["op_id"].rsplit("/", 1)[1]: r for r in procs if r["tx"] == tx}
    by["3"]["k"], by["5"]["k"] = by["5"]["k"], by["3"]["k"]
    assert set(bad(spark, logs, "dtx", NEW)) == {"transactions.p1_order"}


def test_p5_fails_on_a_committed_usub_that_never_reached_one_broker(spark):
    logs = history("stx")
    op4 = next(r for r in logs if r["ev"] == "tx_op" and r["op_id"].endswith(":1/4"))
    sid = op4["sub_id"]
    # b2 never processed op4 and still holds the subscription it removed everywhere else
    logs = [r for r in logs if not (r["ev"] == "tx_proc" and r["node"] == "b2" and r["op_id"] == op4["op_id"])]
    tables = [r for r in logs if r["ev"] == "tx_tables" and r["node"] == "b2"][-1]
    tables["prt"][sid] = "b1"
    got = bad(spark, logs, "stx", NEW)
    assert set(got) == {"transactions.p5_tables"}
    assert {"node": "b2", "table": "prt", "sub_id": sid, "expected": False, "actual": True} in got[
        "transactions.p5_tables"].examples


# -- BL-WAIT after a crash: P2 fails, and says why (no recovery), never passes --

def test_blwait_p2_after_a_crash_fails_and_carries_the_no_recovery_finding(spark):
    """Sim seed 503 (BL-WAIT with a crash of b1): op1/op5 lost with the crashed broker. P2 still
    fails; its details carry the finding (shown at the top of the report); the same history
    without faults in the plan fails P2 with no finding (nothing explains it)."""
    from .harness import run_random

    sim, d = run_random(503, "blwait", True)
    assert d["crash"]
    ctx = ctx_of(spark, sim.logs, "blwait")
    ctx.plan["actions"] = [{"crash": d["crash"]["victim"]}]
    r = C.check_scenario_routing(ctx)
    assert not r.passed and r.violations > 0
    assert r.details["finding"].startswith("BL-WAIT has no recovery")
    assert r.details["lost"] + r.details["misrouted"] == r.violations
    assert r.details["transactions_failed"] >= 1
    calm = C.check_scenario_routing(ctx_of(spark, sim.logs, "blwait"))
    assert not calm.passed and calm.violations == r.violations and "finding" not in calm.details


def test_no_recovery_finding_names_only_blwait_p2_with_faults():
    crash = {"actions": [{"crash": "b1"}]}
    assert C.no_recovery_finding("blwait", crash, "transactions.p2_routing", 3)
    assert C.no_recovery_finding("blwait", {"actions": []}, "transactions.p2_routing", 3) is None
    assert C.no_recovery_finding("blwait", crash, "transactions.p2_routing", 0) is None
    assert C.no_recovery_finding("blwait", crash, "transactions.p4_agreement", 3) is None
    for v in ("dtx", "dtxni", "stx"):
        assert C.no_recovery_finding(v, crash, "transactions.p2_routing", 3) is None
