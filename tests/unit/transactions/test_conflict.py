"""P6's second half (spec §3.3): in a conflict run (``params.conflict``: probe transactions
publish into the event space a dispatch moves from D to A) no committed publication reaches both
the old and the new subscriber. Required for D-TX; D-TXNI and S-TX report it."""

from __future__ import annotations

import pytest

from .test_checks import ctx_of, failed, history

pytestmark = pytest.mark.spark

P6 = "transactions.p6_commit_order"


def _probes(logs):
    return {r["tx"]: r for r in logs if r["ev"] == "tx_begin" and r["kind"] == "probe"}


def test_a_dtx_conflict_run_overlaps_the_dispatches_and_passes_every_check(spark):
    logs = history("dtx", conflict=True)
    probes = _probes(logs)
    ends = {r["tx"]: r["outcome"] for r in logs if r["ev"] == "tx_end"}
    # the workload did overlap: D-TX aborted probes on a conflict, and committed others
    assert {ends[t] for t in probes} == {"committed", "aborted"}
    assert any(r["ev"] == "tx_phase" and r["phase"] == "prepare" and r["conflict"] for r in logs)
    assert all(ends[t] == "committed" for t in ends if t not in probes)  # every dispatch committed
    assert failed(spark, logs, "dtx", conflict=True) == {}
    from testbed.protocols.transactions.analysis import checks as C

    r = C.check_commit_order(ctx_of(spark, logs, "dtx", conflict=True))
    assert r.details["probes"] == len(probes) and r.details["conflicts_flagged"] > 0


def _deliver_to_both(logs):
    """A committed probe publication delivered to the dispatcher as well as the agent: the
    interleaving sub[A], pub, usub[D] that §3.3 forbids."""
    probes = _probes(logs)
    ends = {r["tx"]: r["outcome"] for r in logs if r["ev"] == "tx_end"}
    dl = next(r for r in logs if r["ev"] == "tx_deliver" and r["tx"] in probes and ends[r["tx"]] == "committed")
    b = probes[dl["tx"]]
    assert dl["client"] in (b["agent"], b["dispatcher"])
    other = b["dispatcher"] if dl["client"] == b["agent"] else b["agent"]
    node = other.split("-")[0]
    t = dl["t"] + 1000
    logs += [{**dl, "ev": "tx_recv", "client": other, "node": node, "kind": "pub", "t": t},
             {"t": t + 1, "m": dl["m"] + 1, "node": node, "ev": "tx_outcome", "client": other, "tx": dl["tx"],
              "outcome": "committed"},
             {**dl, "client": other, "node": node, "t": t + 2}]
    for r in logs[-3:]:
        if r["ev"] == "tx_recv":
            r.pop("outcome", None)
    return dl["tx"]


def test_p6_fails_when_a_committed_publication_reaches_old_and_new_subscriber(spark):
    logs = history("dtx", conflict=True)
    tx = _deliver_to_both(logs)
    bad = failed(spark, logs, "dtx", conflict=True)
    assert set(bad) == {P6}
    assert bad[P6].violations == 1 and tx in bad[P6].examples[0]["tx"]
    assert "delivered to both the old subscriber d-0 and the new one a-" in bad[P6].examples[0]["what"]


@pytest.mark.parametrize("variant", ["dtxni", "stx"])
def test_dtxni_and_stx_report_it_and_do_not_fail(spark, variant):
    logs = history(variant, conflict=True)
    assert _probes(logs)
    assert failed(spark, logs, variant, conflict=True) == {}
    _deliver_to_both(logs)
    assert P6 not in failed(spark, logs, variant, conflict=True)
    from testbed.protocols.transactions.analysis import checks as C

    r = C.check_commit_order(ctx_of(spark, logs, variant, conflict=True))
    assert r.passed and r.details["violations_found"] == 1 and r.details["required"] is False
