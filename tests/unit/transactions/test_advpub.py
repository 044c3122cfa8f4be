"""Transactional adv/uadv (Alg 2) through the TXManager library: scenario ``advpub`` on the
in-memory runtime (protocols/transactions/nodes/advpub.py), every variant. C1's sub is held at its broker
(no advertisement yet), C2's txAdv releases it (a sub operation the broker issues, acknowledged
before the adv in D-TX/D-TXNI), C2's publication reaches C1 on commit, a txUadv withdraws the
released subscription; aborts leave nothing. Then the Spark checks on these histories, and
each adv/uadv case of P1, P2 and P5 failing on a broken one."""

from __future__ import annotations

import copy

import pytest

from .harness import run_advpub

VARIANTS = ("dtx", "dtxni", "stx")
_SIMS: dict = {}


def sim_of(variant: str, **kw):
    key = (variant, tuple(sorted(kw.items())))
    if key not in _SIMS:
        _SIMS[key] = run_advpub(variant, transactions=6, abort_every=3, **kw)
    return _SIMS[key]


def ev(sim, name, **match):
    return [r for r in sim.logs if r["ev"] == name and all(r.get(k) == v for k, v in match.items())]


def final_tables(sim):
    return {r["node"]: (r["srt"], r["prt"]) for r in ev(sim, "tx_tables")}


@pytest.mark.parametrize("variant", VARIANTS)
def test_an_adv_releases_the_held_subscription_and_the_publication_reaches_the_subscriber(variant):
    sim = sim_of(variant)
    ends = {r["tx"]: r["outcome"] for r in ev(sim, "tx_end")}
    assert ends == {f"e-0.0:{n}": ("aborted" if n % 3 == 0 else "committed") for n in range(1, 7)}
    assert not ev(sim, "node_error") and not ev(sim, "broker_bad_message")
    for n in range(1, 7):
        tx = f"e-0.0:{n}"
        # op2 is held at C1's broker b3 (no advertisement matches): not forwarded
        assert [r["dests"] for r in ev(sim, "tx_proc", tx=tx, op_id=f"{tx}/2")] == [[]]
        # op3 (adv) releases it there: one sub issued by b3, triggered by op3, processed at b2, b1
        [rel] = ev(sim, "tx_op", tx=tx, kind="sub", client="b3")
        assert rel["trigger"] == f"{tx}/3" and rel["sub_id"] == f"{tx}/2"
        assert sorted(r["node"] for r in ev(sim, "tx_proc", tx=tx, op_id=rel["op_id"])) == ["b1", "b2"]
        # op4 reaches C1 (and only C1), delivered iff committed
        delivered = [r["client"] for r in ev(sim, "tx_deliver", tx=tx, n=4)]
        assert delivered == (["a-0"] if ends[tx] == "committed" else [])
        if n % 2 == 0:  # op5 uadv: b2 and b3 withdraw the released subscription (usub operations)
            usubs = ev(sim, "tx_op", tx=tx, kind="usub")
            assert sorted(r["client"] for r in usubs) == ["b2", "b3"]
            assert all(r["trigger"] == f"{tx}/5" for r in usubs)
    srt = {b: set(t[0]) for b, t in final_tables(sim).items()}
    prt = {b: set(t[1]) for b, t in final_tables(sim).items()}
    # committed without uadv: 1, 5 (2, 4 uadv'd; 3, 6 aborted): advertisements everywhere
    for b in ("b1", "b2", "b3"):
        assert {a for a in srt[b] if "/" in a} == {"e-0.0:1/3", "e-0.0:5/3"}
    # the subscriptions: every committed one at C1's broker; along the path only the ones whose
    # advertisement stays (the uadv withdrew the others)
    assert {s for s in prt["b3"] if "/" in s} == {"e-0.0:1/2", "e-0.0:2/2", "e-0.0:4/2", "e-0.0:5/2"}
    for b in ("b1", "b2"):
        assert {s for s in prt[b] if "/" in s} == {"e-0.0:1/2", "e-0.0:5/2"}


def test_the_c1_and_c2_on_one_broker_and_a_deeper_tree():
    tree = {"b1": ["b2", "b3"], "b2": ["b1", "b4"], "b3": ["b1"], "b4": ["b2"]}
    for v in VARIANTS:
        for c2, c1 in ((["b4"], ["b3"]), (["b2"], ["b2"])):
            sim = run_advpub(v, brokers=tree, c2=c2, c1=c1, transactions=4)
            ends = [r["outcome"] for r in ev(sim, "tx_end")]
            assert ends == ["committed"] * 4, (v, c2, c1, ev(sim, "tx_end"))
            assert len(ev(sim, "tx_deliver", n=4)) == 4
            assert not ev(sim, "broker_bad_message")


# ---- the Spark checks on these histories ----------------------------------------------------
def history(variant):
    return copy.deepcopy(sim_of(variant).logs)


def failed(spark, logs, variant):
    from .test_checks import failed as f
    return f(spark, logs, variant, abort_every=3, scenario="advpub")


@pytest.mark.spark
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_check_passes_on_advpub_histories(spark, variant):
    assert failed(spark, history(variant), variant) == {}


@pytest.mark.spark
def test_p1_fails_when_a_released_sub_is_processed_before_the_adv_that_released_it(spark):
    logs = history("dtx")
    rel = next(r for r in logs if r["ev"] == "tx_op" and r["client"] == "b3" and r["tx"] == "e-0.0:1")
    last_k = max(r["k"] for r in logs if r["ev"] == "tx_proc" and r["node"] == "b2")
    for r in logs:  # b2 processed the trigger after everything, so after the sub it released
        if r["ev"] == "tx_proc" and r["node"] == "b2" and r["op_id"] == "e-0.0:1/3":
            r["k"] = last_k + 1
    bad = failed(spark, logs, "dtx")
    assert set(bad) == {"transactions.p1_order"}
    assert bad["transactions.p1_order"].examples[0]["a"] == "e-0.0:1/3"


@pytest.mark.spark
def test_p2_fails_when_the_publication_reaches_someone_else(spark):
    logs = history("stx")
    for r in logs:
        if r["ev"] == "tx_deliver" and r["tx"] == "e-0.0:1" and r["n"] == 4:
            r["client"] = "e-0"
    assert "transactions.p2_routing" in failed(spark, logs, "stx")


@pytest.mark.spark
def test_p5_fails_on_an_aborted_adv_left_in_an_srt(spark):
    logs = history("dtxni")
    t = [r for r in logs if r["ev"] == "tx_tables" and r["node"] == "b2"][-1]
    t["srt"]["e-0.0:3/3"] = "b1"  # transaction 3 aborted: its advertisement must be gone
    bad = failed(spark, logs, "dtxni")
    assert set(bad) == {"transactions.p5_tables"}
    assert bad["transactions.p5_tables"].examples == [
        {"node": "b2", "table": "srt", "sub_id": "e-0.0:3/3", "expected": False, "actual": True}]


@pytest.mark.spark
def test_p5_fails_on_a_committed_uadv_whose_adv_stayed_and_on_a_withdrawn_subscription_that_stayed(spark):
    logs = history("dtx")
    t = [r for r in logs if r["ev"] == "tx_tables" and r["node"] == "b3"][-1]
    t["srt"]["e-0.0:2/3"] = "b2"  # committed uadv (op5 of transaction 2)
    t = [r for r in logs if r["ev"] == "tx_tables" and r["node"] == "b1"][-1]
    t["prt"]["e-0.0:4/2"] = "b2"  # the uadv's triggered usub at b1 (transaction 4)
    bad = failed(spark, logs, "dtx")
    assert set(bad) == {"transactions.p5_tables"}
    assert {(e["node"], e["table"], e["sub_id"]) for e in bad["transactions.p5_tables"].examples} == {
        ("b3", "srt", "e-0.0:2/3"), ("b1", "prt", "e-0.0:4/2")}


@pytest.mark.spark
def test_p5_fails_when_a_released_subscription_is_missing_where_it_was_forwarded(spark):
    logs = history("stx")
    t = [r for r in logs if r["ev"] == "tx_tables" and r["node"] == "b2"][-1]
    del t["prt"]["e-0.0:5/2"]  # released by transaction 5's adv, committed, kept (no uadv)
    bad = failed(spark, logs, "stx")
    assert set(bad) == {"transactions.p5_tables"}
    assert bad["transactions.p5_tables"].examples[0]["sub_id"] == "e-0.0:5/2"
