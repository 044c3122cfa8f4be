"""The TXManager library (Table 2) on its own: what it sends and when, per variant, its list of
(seqNo, opID, op, status), buffering until the outcome, and misuse as a clear error."""

from __future__ import annotations

import pytest

from testbed.protocols.transactions.nodes.txmanager import TXError, TXManager


class FakeRt:
    """Records sends and logs (the runtime side a TXManager uses)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []
        self.logs: list[tuple[str, dict]] = []

    def send(self, dst, msg):
        self.sent.append((dst, dict(msg)))

    def log(self, ev, **f):
        self.logs.append((ev, f))

    def kinds(self):
        return [m["k"] for _, m in self.sent]


def mgr(variant="dtx", **kw):
    rt = FakeRt()
    return rt, TXManager(rt, "c2", "b1", variant, **kw)


def test_dtx_sends_one_operation_at_a_time_after_the_init_and_prepares_when_all_are_acknowledged():
    rt, m = mgr()
    decided = []
    tx = m.beginTX("t:1", order=["c2.0", 1])
    a = m.txAdv(tx, "[class,eq,'q'],[x,eq,1]", aid="A1")
    p = m.txPub(tx, {"class": "q", "x": 1})
    m.commitTX(tx, then=decided.append)
    assert rt.kinds() == ["txinit"]  # nothing before initAckMsg: both operations buffered
    assert [s for *_, s in m.status(tx)] == ["buffered", "buffered"]
    m.on_message({"k": "txinitack", "tx": tx})
    assert rt.kinds() == ["txinit", "txop"] and rt.sent[-1][1]["op"]["id"] == a
    assert [s for *_, s in m.status(tx)] == ["active", "buffered"]
    m.on_message({"k": "txack", "tx": tx, "op": p})  # an ack for an operation not sent: ignored
    assert rt.kinds() == ["txinit", "txop"]
    m.on_message({"k": "txack", "tx": tx, "op": a})
    assert rt.sent[-1][1]["op"]["id"] == p and rt.sent[-1][1]["op"]["kind"] == "pub"
    m.on_message({"k": "txack", "tx": tx, "op": p})
    assert rt.kinds()[-1] == "txprep" and [s for *_, s in m.status(tx)] == ["acknowledged"] * 2
    m.on_message({"k": "txprepack", "tx": tx, "ok": False})  # a conflict: FALSE -> abort
    assert decided == ["aborted"] and rt.kinds()[-1] == "txabt"
    assert all(m["c"] == "c2" and d == "b1" for d, m in rt.sent)
    ops = [f for ev, f in rt.logs if ev == "tx_op"]
    assert [(o["kind"], o["sub_id"], o["deps"]) for o in ops] == [("adv", "A1", []), ("pub", "", [a])]


def test_a_received_tcm_is_acknowledged_only_after_the_operations_it_triggered():
    rt = FakeRt()
    issued = []

    def on_tcm(client, tx, op):
        issued.append(m.txSub(tx, "[x,eq,1]", sid="S1"))
        issued.append(m.txUsub(tx, "S0"))

    m = TXManager(rt, "c1", "b3", "dtxni", on_tcm=on_tcm)
    m.on_message({"k": "txop", "tx": "t:1", "op": {"id": "t:1/1", "n": 1, "kind": "tcm", "c": "c2", "a": {}}})
    assert [x["op"]["id"] for _, x in rt.sent] == [issued[0]]  # the sub; no ack of the tcm yet
    m.on_message({"k": "txack", "tx": "t:1", "op": issued[0]})
    assert rt.sent[-1][1]["op"]["id"] == issued[1]
    m.on_message({"k": "txack", "tx": "t:1", "op": issued[1]})
    assert rt.sent[-1][1] == {"k": "txack", "tx": "t:1", "op": "t:1/1", "c": "c1"}
    trig = {f["op_id"]: f["trigger"] for ev, f in rt.logs if ev == "tx_op"}
    assert trig == {issued[0]: "t:1/1", issued[1]: "t:1/1"}
    # the tcm was buffered: delivered (notify) on the commit, and the commit acknowledged
    m.on_message({"k": "txcmt", "tx": "t:1"})
    assert ("tx_deliver", {"client": "c1", "tx": "t:1", "op_id": "t:1/1", "n": 1}) in rt.logs
    assert rt.sent[-1][1]["k"] == "txcmtack"


def test_publications_are_delivered_on_commit_and_discarded_on_abort():
    rt = FakeRt()
    got = []
    m = TXManager(rt, "c1", "b3", "dtx", notify=lambda c, tx, op: got.append(op["id"]))
    for tx in ("t:1", "t:2"):
        m.on_message({"k": "txop", "tx": tx, "op": {"id": f"{tx}/4", "n": 4, "kind": "pub", "c": "c2", "a": {}}})
    assert got == [] and [m for _, m in rt.sent if m["k"] == "txack"]  # acked at once, not delivered
    m.on_message({"k": "txabt", "tx": "t:1"})
    m.on_message({"k": "txcmt", "tx": "t:2"})
    assert got == ["t:2/4"]
    assert ("tx_discard", {"client": "c1", "tx": "t:1", "op_id": "t:1/4", "n": 4}) in rt.logs
    assert m.outcome("t:1") == "aborted" and m.outcome("t:2") == "committed"


def test_stx_sends_everything_at_once_with_dependencies_and_commits_with_all_of_them():
    rt, m = mgr("stx")
    tx = m.beginTX("t:1")
    a = m.txAdv(tx, "[x,eq,1]", aid="A1")
    p = m.txPub(tx, {"x": 1})
    u = m.txUadv(tx, "A1", f="[x,eq,1]")
    assert rt.kinds() == ["txop"] * 3  # no init, no waiting for acks
    assert rt.sent[1][1]["d"] == [[a, "c2", "[x,eq,1]", "adv"]]
    assert [d[0] for d in rt.sent[2][1]["d"]] == [a, p]
    out = []
    m.commitTX(tx, then=out.append, acked=lambda o: out.append("acked " + o))
    assert out == ["committed"] and rt.sent[-1][1]["k"] == "txcmt"
    assert [d[0] for d in rt.sent[-1][1]["d"]] == [a, p, u]
    m.on_message({"k": "txcmtack", "tx": tx, "ok": True})
    assert out == ["committed", "acked committed"]


def test_stx_triggered_operations_inherit_the_tcm_s_dependencies():
    rt = FakeRt()
    m = TXManager(rt, "c1", "b3", "stx", on_tcm=lambda c, tx, op: m.txSub(tx, "[x,eq,1]", sid="S1"))
    m.on_message({"k": "txop", "tx": "t:1", "d": [["t:1/0", "c9", "[x,eq,0]", "sub"]],
                  "op": {"id": "t:1/1", "n": 1, "kind": "tcm", "c": "c2", "a": {}}})
    assert rt.sent[-1][1]["d"] == [["t:1/0", "c9", "[x,eq,0]", "sub"], ["t:1/1", "c2", "", "tcm"]]
    assert not any(x["k"] == "txack" for _, x in rt.sent)  # S-TX: no acknowledgements


@pytest.mark.parametrize("variant", ["dtx", "dtxni", "stx"])
def test_misuse_is_a_clear_error(variant):
    rt, m = mgr(variant)
    with pytest.raises(TXError, match="outside a transaction"):
        m.txPub("nope", {"x": 1})
    tx = m.beginTX()
    with pytest.raises(TXError, match="already begun"):
        m.beginTX(tx)
    with pytest.raises(TXError, match="needs a filter"):
        m.txSub(tx, "")
    with pytest.raises(TXError, match="needs the id"):
        m.txUadv(tx, "")
    m.commitTX(tx)
    with pytest.raises(TXError, match="after commitTX|already committed"):
        m.commitTX(tx)
    with pytest.raises(TXError, match="after commitTX|after committed"):
        m.txPub(tx, {"x": 1})
    with pytest.raises(TXError, match="did not begin"):
        m.commitTX("other")
    tx2 = m.beginTX()
    m.abortTX(tx2)
    with pytest.raises(TXError, match="already aborted"):
        m.abortTX(tx2)
    with pytest.raises(TXError, match="variant"):
        TXManager(rt, "c", "b", "blwait")


def test_abort_after_commit_request_wins_while_the_decision_is_pending():
    rt, m = mgr("dtx")
    tx = m.beginTX()
    m.txPub(tx, {"x": 1})
    m.commitTX(tx)
    m.abortTX(tx)  # e.g. a timeout while the operation is unacknowledged
    assert rt.kinds() == ["txinit", "txabt"] and m.outcome(tx) == "aborted"
    m.on_message({"k": "txinitack", "tx": tx})
    assert rt.kinds() == ["txinit", "txabt"]  # nothing more is sent


def test_an_stx_usub_needs_its_filter_for_the_dependency_checks():
    rt, m = mgr("stx")
    tx = m.beginTX()
    with pytest.raises(TXError, match="filter"):
        m.txUsub(tx, "S1")
    m.txUsub(tx, "S1", f="[x,eq,1]")


@pytest.mark.parametrize("variant", ["dtx", "dtxni"])
def test_a_commit_after_the_broker_restarted_re_issues_the_clients_routing_operations(variant):
    """Sim seeds 573/583: the restarted broker lost the transaction's context with A's sub in it;
    the commit that comes after resync() makes the client send it again as a plain routing
    message (same id and filter). Without a restart, or on an abort, nothing more is sent."""
    rt = FakeRt()

    def on_tcm(c, tx, op):
        m.txSub(tx, "[p,eq,'q'],[x,eq,1]", sid=f"{tx}/3", n=3)

    m = TXManager(rt, "a-0", "b3", variant, on_tcm=on_tcm)
    for tx in ("t1", "t2", "t3"):
        m.on_message({"k": "txop", "tx": tx, "op": {"id": f"{tx}/2", "n": 2, "kind": "tcm", "c": "d-0", "a": {}}})
        m.on_message({"k": "txack", "tx": tx, "op": f"{tx}/3"})
    m.resync("queries")  # b3 came back: t1 and t3 are open here
    m.on_message({"k": "txcmt", "tx": "t2"})  # (t2 is marked too; see below: it commits)
    sent = len(rt.sent)
    m.on_message({"k": "txcmt", "tx": "t1"})
    plain = [msg for _, msg in rt.sent[sent:] if msg["k"] == "sub"]
    assert plain == [{"k": "sub", "id": "t1/3", "f": "[p,eq,'q'],[x,eq,1]", "c": "a-0"}]
    assert ("tx_reissue", {"client": "a-0", "tx": "t1", "ops": ["t1/3"]}) in rt.logs
    sent = len(rt.sent)
    m.on_message({"k": "txabt", "tx": "t3"})
    assert [msg for _, msg in rt.sent[sent:] if msg["k"] == "sub"] == []
    # a transaction begun after the restart is not re-issued
    m.on_message({"k": "txop", "tx": "t4", "op": {"id": "t4/2", "n": 2, "kind": "tcm", "c": "d-0", "a": {}}})
    sent = len(rt.sent)
    m.on_message({"k": "txcmt", "tx": "t4"})
    assert [msg for _, msg in rt.sent[sent:] if msg["k"] == "sub"] == []
