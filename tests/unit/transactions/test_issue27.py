"""Issue #27's broker bugs, each driven directly on the broker classes on the in-memory runtime:

* D-TX: a snapshot superseded before a transaction's init arrives was garbage-collected, and
  ``versions.get(ssid, self.table)`` silently fell back to the current table (the conflict check
  then compared the current table with itself); a restarted broker's snapshot counter began at 0.
* S-TX: an operation forwarded to a neighbour that was down was never re-sent once its
  transaction committed at the origin; a re-sent outcome discarded buffered operations.
* A commit held for a dependency that never arrives stayed held for ever, with nothing logged.
"""

from __future__ import annotations

import pytest

from .harness import LINE3, scenario
from tests.unit.pubsub.harness import Sim

PUB = {"p": "q", "x": 1}
FILT = "[p,eq,'q'],[x,eq,1]"


def _sim(variant: str, **params) -> Sim:
    sim = Sim(scenario(variant, brokers=LINE3, **params), delay_ms=5.0)
    sim.start()
    sim.run_for(1.0)  # past settle: the brokers take transaction messages at once
    return sim


def _phases(sim, node, tx, phase):
    return [r for r in sim.events("tx_phase", node=node, tx=tx, phase=phase)]


def _dtx_commit_sub(b1, tx, ssid):
    """At leaf b1 (neighbour b2): transaction ``tx`` subscribes FILT from b1's local client and
    commits; b1's routes for PUB move from nowhere to that client."""
    b1.on_message("b2", {"k": "txinit", "tx": tx, "o": ["z", 1], "ssid": ssid})
    b1.on_message("e", {"k": "txop", "tx": tx, "c": "e-0",
                        "op": {"id": f"{tx}/1", "n": 1, "kind": "sub", "c": "e-0", "sid": f"{tx}/s", "f": FILT}})
    b1.on_message("b2", {"k": "txprep", "tx": tx})
    b1.on_message("b2", {"k": "txcmt", "tx": tx})


def test_dtx_conflict_is_found_against_a_snapshot_superseded_before_the_init_arrived():
    sim = _sim("dtx")
    b1 = sim.nodes["b1"]
    _dtx_commit_sub(b1, "t1", 0)  # t1 committed here: b1 at ssid 1, no transaction open
    assert b1.ssid == 1
    # t2's coordinator's broker took snapshot 0 before t1 reached it: t2 routes on version 0
    b1.on_message("b2", {"k": "txinit", "tx": "t2", "o": ["y", 1], "ssid": 0})
    b1.on_message("b2", {"k": "txop", "tx": "t2", "op": {"id": "t2/1", "n": 1, "kind": "pub", "c": "y", "a": PUB}})
    b1.on_message("b2", {"k": "txprep", "tx": "t2"})
    prep = _phases(sim, "b1", "t2", "prepare")
    assert len(prep) == 1 and prep[0]["conflict"] is True, prep  # version 0 routes PUB nowhere, 1 to e-0


def test_dtx_a_missing_snapshot_aborts_the_transaction_logged():
    sim = _sim("dtx")
    b1 = sim.nodes["b1"]
    b1.on_message("b2", {"k": "txinit", "tx": "t9", "o": ["y", 1], "ssid": 7})  # b1 never had snapshot 7
    b1.on_message("b2", {"k": "txprep", "tx": "t9"})
    prep = _phases(sim, "b1", "t9", "prepare")
    assert len(prep) == 1 and prep[0]["conflict"] is True
    missing = sim.events("tx_snapshot_missing", node="b1", tx="t9")
    assert len(missing) == 1 and missing[0]["ssid"] == 7


def test_dtx_snapshot_ids_survive_a_broker_restart():
    sim = _sim("dtx")
    for i in range(3):
        for b in ("b1", "b2", "b3"):  # three commits everywhere: every broker at ssid 3
            node = sim.nodes[b]
            node.on_message("b2" if b != "b2" else "b1", {"k": "txinit", "tx": f"c{i}", "o": ["z", i], "ssid": i})
            node.on_message("b2" if b != "b2" else "b1", {"k": "txcmt", "tx": f"c{i}"})
    sim.run_for(0.5)
    assert [sim.nodes[b].ssid for b in ("b1", "b2", "b3")] == [3, 3, 3]
    sim.crash("b2")
    sim.run_for(0.2)
    sim.restart("b2")
    sim.run_for(1.5)  # reconnected, settled
    assert sim.nodes["b2"].ssid == 3


def test_stx_an_operation_committed_at_its_origin_reaches_a_neighbour_that_was_down():
    sim = _sim("stx")
    # a standing subscription behind b2 (non-transactional, from b3's agent): b1 routes PUB to b2
    sim.nodes["b3"].on_message("a", {"k": "sub", "c": "a-0", "id": "s1", "f": FILT})
    sim.run_for(0.5)
    sim.crash("b2")
    b1 = sim.nodes["b1"]
    b1.on_message("e", {"k": "txop", "tx": "t1", "c": "e-0", "d": [],
                        "op": {"id": "t1/1", "n": 1, "kind": "pub", "c": "e-0", "a": PUB}})
    b1.on_message("e", {"k": "txcmt", "tx": "t1", "c": "e-0", "d": [["t1/1", "e-0", "", "pub"]]})
    assert [r["dests"] for r in sim.events("tx_proc", node="b1", tx="t1")] == [["b2"]]
    sim.run_for(0.3)
    sim.restart("b2")
    sim.run_for(2.0)
    assert sim.events("tx_proc", node="b2", tx="t1"), "the committed operation never reached b2"
    assert sim.events("tx_proc", node="b3", tx="t1")


def test_stx_a_re_sent_outcome_keeps_the_buffered_operations_of_its_transaction():
    sim = _sim("stx")
    b1 = sim.nodes["b1"]
    # a dependency b1 must wait for: a sub of client y (joined via b2) that an adv here satisfies
    b1.on_message("b2", {"k": "join", "c": "y"})
    b1.on_message("e", {"k": "adv", "c": "e-0", "id": "v1", "f": FILT})
    dep = ["t1/1", "y", FILT, "sub"]
    b1.on_message("b2", {"k": "txop", "tx": "t1", "d": [dep],
                         "op": {"id": "t1/2", "n": 2, "kind": "pub", "c": "y", "a": PUB}})
    assert b1.buffer and not sim.events("tx_proc", node="b1", tx="t1")
    b1.on_message("b2", {"k": "txcmt", "tx": "t1", "rs": True})  # the outcome, re-sent after a restart
    b1.on_message("b2", {"k": "txop", "tx": "t1", "d": [],
                         "op": {"id": "t1/1", "n": 1, "kind": "sub", "c": "y", "sid": "t1/s", "f": FILT}})
    done = [r["op_id"] for r in sim.events("tx_proc", node="b1", tx="t1")]
    assert done == ["t1/1", "t1/2"], done


def test_stx_a_commit_held_for_a_dependency_that_never_comes_times_out_logged():
    sim = _sim("stx", hold_timeout=2.0)
    b1 = sim.nodes["b1"]
    b1.on_message("b2", {"k": "join", "c": "y"})
    b1.on_message("e", {"k": "adv", "c": "e-0", "id": "v1", "f": FILT})
    dep = ["t1/4", "y", FILT, "usub"]  # op4 never arrives here
    b1.on_message("b2", {"k": "txcmt", "tx": "t1", "d": [dep]})
    sim.run_for(1.0)
    assert not _phases(sim, "b1", "t1", "commit")
    sim.run_for(2.0)
    assert len(_phases(sim, "b1", "t1", "commit")) == 1
    stuck = sim.events("tx_hold_timeout", node="b1", tx="t1")
    assert len(stuck) == 1 and stuck[0]["missing"] == ["t1/4"]


# -- S-TX: committed transactions lost around a restart (issue #27, seed 305 of the sim sweep) --
#
# The TXC's broker b5 crashed; the TXC went on beginning transactions, whose operations and commit
# were lost with it. When b5 came back the TXC re-sent, in this order, its unacknowledged commits
# (txcmt rs, no dependencies) and then the operations; b5 held both for `settle` and then took the
# commit first: nothing of the transaction buffered, so it ended it at once, passed it on to its
# neighbours (every other broker ended it too, before seeing one operation) and to no client (none
# had taken part yet). The operations that followed were "late" operations of a committed
# transaction: processed at once, without their dependencies (op5 reached D before D's op4), and
# the clients they reached (D, then A) were never sent the outcome: nothing was delivered.

def test_stx_seed_305_every_committed_transaction_reaches_its_clients():
    from .harness import lost_commits, run_random

    sim, d = run_random(305, "stx", True)
    assert d["crash"] and d["crash"]["victim"] == "b5"
    ends = [r for r in sim.logs if r["ev"] == "tx_end"]
    assert ends and all(r["outcome"] == "committed" for r in ends)
    assert lost_commits(sim.logs) == []


def test_stx_operations_arriving_after_their_commit_keep_their_dependencies_and_reach_the_outcome():
    """The shape of seed 305 on the line b1-b2-b3 (E at b1, D at b2, A a-0 at b3): b2 learns the
    commit of t1 (re-sent, rs) before any of its operations, then gets op1 (to D) and op5. op5
    must wait for D's op4 and A's op3 (it would reach D otherwise), and D and A, which take part
    only now, must still learn that t1 committed: op1, op2 and op5 delivered, op5 to A only."""
    sim = _sim("stx")
    b2 = sim.nodes["b2"]
    t, f = "e-0.0:1", "[p,eq,'p0.0'],[x,eq,1]"
    dep = {1: [f"{t}/1", "e-0", "", "tcm"], 2: [f"{t}/2", "d-0", "", "tcm"], 3: [f"{t}/3", "a-0", f, "sub"],
           4: [f"{t}/4", "d-0", f, "usub"], 5: [f"{t}/5", "e-0", "", "pub"]}
    plan = {str(k): [dep[j] for j in range(1, k)] for k in range(1, 6)}
    ctx = {"tx": t, "proc": "p0.0", "x": 1, "d": "d-0", "agent": "a-0", "e": "e-0", "plan": plan}
    b2.on_message("b1", {"k": "txcmt", "tx": t, "rs": True})
    b2.on_message("b1", {"k": "txop", "tx": t, "d": [],
                         "op": {"id": f"{t}/1", "n": 1, "kind": "tcm", "c": "e-0", "a": {"p": "p0.0", "x": 1, "v": 0},
                                "ctx": ctx}})
    b2.on_message("b1", {"k": "txop", "tx": t, "d": plan["5"],
                         "op": {"id": f"{t}/5", "n": 5, "kind": "pub", "c": "e-0", "a": {"p": "p0.0", "x": 1, "v": 1}}})
    sim.run_for(1.0)
    got = sorted((r["client"], r["n"]) for r in sim.events("tx_deliver", tx=t))
    assert got == [("a-0", 2), ("a-0", 5), ("d-0", 1)], got
    assert not sim.events("tx_recv", tx=t, client="d-0", n=5)  # op5 never routed to D
    done = [r["op_id"].rsplit("/", 1)[1] for r in sim.events("tx_proc", node="b2", tx=t)]
    assert done.index("5") > max(done.index("3"), done.index("4")), done
    assert {r["client"] for r in sim.events("tx_outcome", tx=t, outcome="committed")} == {"d-0", "a-0"}


def test_stx_txmanager_re_sends_operations_before_the_outcome_to_a_restarted_broker():
    """A TXC whose broker was down when it began a transaction re-sends the operations first and
    then the commit, with its dependencies (a commit ahead of the operations ended the transaction
    at the restarted broker before any of them)."""
    from testbed.protocols.transactions.nodes.txmanager import TXManager

    sent: list[dict] = []

    class Rt:
        def log(self, ev, **kw):
            pass

    m = TXManager(Rt(), "e-0", "b1", "stx", send=sent.append)
    m.beginTX("t")
    m.txTCM("t", {"p": "q", "x": 1}, n=1, deps=[])
    m.txPub("t", {"p": "q", "x": 1}, n=5, deps=[["t/1", "e-0", "", "tcm"]])
    m.commitTX("t")
    sent.clear()
    for what in m.RESYNC:
        m.resync(what)
    assert [(x["k"], x.get("op", {}).get("id")) for x in sent] == [("txop", "t/1"), ("txop", "t/5"), ("txcmt", None)]
    assert sent[-1]["rs"] is True and [d[0] for d in sent[-1]["d"]] == ["t/1", "t/5"]


def test_stx_a_publication_received_after_the_commit_is_delivered():
    """A participant that learned the commit first (an operation re-sent after a restart comes
    after it) delivers the late publication of the committed transaction (it used to drop it)."""
    from testbed.protocols.transactions.nodes.txmanager import TXManager

    logged: list[tuple] = []

    class Rt:
        def log(self, ev, **kw):
            logged.append((ev, kw.get("op_id")))

    m = TXManager(Rt(), "a-0", "b3", "stx", send=lambda msg: None)
    m.on_message({"k": "txop", "tx": "t", "d": [], "op": {"id": "t/2", "n": 2, "kind": "pub", "c": "d-0", "a": {}}})
    m.on_message({"k": "txcmt", "tx": "t"})
    m.on_message({"k": "txop", "tx": "t", "d": [], "op": {"id": "t/5", "n": 5, "kind": "pub", "c": "e-0", "a": {}}})
    assert [x for x in logged if x[0] == "tx_deliver"] == [("tx_deliver", "t/2"), ("tx_deliver", "t/5")]
    m.on_message({"k": "txop", "tx": "t", "d": [], "op": {"id": "t/5", "n": 5, "kind": "pub", "c": "e-0", "a": {}}})
    assert len([x for x in logged if x[0] == "tx_deliver"]) == 2  # once


# -- S-TX: a restarted broker forgot which operations it had processed (seed 453 of the sim sweep) --
#
# b2 processed op1 (E's tcm, on to D) and op3 (A's sub, acknowledged with txopok: its sender
# stopped keeping it), then crashed with op5 and the commit buffered (waiting for op4). Restarted
# empty, it took the TXC's re-sent op1 as new: processed again on the re-learnt table, where A's
# subscription (op3, brought back by the routing re-sync) already was, so op1 reached A; and op5
# waited for op3 for ever (never re-sent: acknowledged before the crash) until the hold timeout.

def test_stx_seed_453_every_committed_transaction_reaches_its_clients_without_hold_timeouts():
    from .harness import lost_commits, run_random

    sim, d = run_random(453, "stx", True)
    assert d["crash"] and d["crash"]["victim"] == "b2"
    assert lost_commits(sim.logs) == []
    assert not sim.events("tx_hold_timeout")
    p1 = [r for r in sim.events("tx_recv") if r["n"] == 1 and not r["client"].startswith("d-")]
    assert p1 == [], p1  # op1 reaches only D


def test_stx_a_restarted_broker_relearns_the_operations_it_had_processed():
    """b2 processes A's op3 (from b3, acknowledged) and crashes; restarted, it learns from its
    neighbours that it had processed it (txknown), so op5, which depends on op3, goes on."""
    sim = _sim("stx")
    b3 = sim.nodes["b3"]
    t, f = "t1", "[p,eq,'p0.0'],[x,eq,1]"
    b3.on_message("a", {"k": "txop", "tx": t, "c": "a-0", "d": [],
                        "op": {"id": f"{t}/3", "n": 3, "kind": "sub", "c": "a-0", "sid": f"{t}/3", "f": f}})
    sim.run_for(0.2)
    assert [r["dests"] for r in sim.events("tx_proc", node="b2", tx=t)] == [["b1"]]
    assert sim.nodes["b3"].known_at == {}  # b3 never received t1/3 from b2: it does not count it
    sim.crash("b2")
    sim.run_for(0.3)
    sim.restart("b2")
    sim.run_for(1.5)  # reconnected, settled
    b2 = sim.nodes["b2"]
    assert (t, f"{t}/3") in b2.processed
    b2.on_message("b1", {"k": "txop", "tx": t, "d": [[f"{t}/3", "a-0", f, "sub"]],
                         "op": {"id": f"{t}/5", "n": 5, "kind": "pub", "c": "e-0", "a": {"p": "p0.0", "x": 1, "v": 1}}})
    [dests] = [r["dests"] for r in sim.events("tx_proc", node="b2", tx=t, op_id=f"{t}/5")]
    assert "b3" in dests, dests  # toward A (and to D, whose standing subscription no op4 removed here)
    sim.run_for(0.2)
    assert sim.events("tx_recv", tx=t, client="a-0", n=5)


# -- S-TX: a restarted broker took its held messages before its clients had re-synchronised --
#
# Seed 401 on real processes: D's broker b6 restarted; its neighbour's connection and D's came back
# ~1 s later (reconnection back-off), just before and just after the end of `settle`. b6 then
# processed the re-sent op1s on a table without D's subscriptions (D re-subscribed 20 ms later):
# routed nowhere, so D never issued op2/op4, the commits waited for them elsewhere until the hold
# timeout, and op5 reached D. A fixed `settle` is a guess; the broker must wait for its peers.

def test_stx_a_restarted_broker_waits_until_its_neighbours_and_clients_re_synchronised(tmp_path):
    from .harness import lost_commits

    cfgs = scenario("stx", transactions=8, think=0.4, timeout=2.0, settle=0.5)
    for n, c in cfgs.items():
        c["state_dir"] = str(tmp_path / n)  # stable storage, as every provider gives a node
    sim = Sim(cfgs, delay_ms=5.0)
    sim.start()
    sim.run_for(1.0)
    sim.start_workload(0.0, 10.0)
    sim.run_for(1.0)
    sim.crash("b2")  # D's broker, the middle of the line
    sim.run_for(0.5)
    slow = int(1.5e9)  # D's connection to the restarted b2 comes back 1.5 s after it: past settle
    sim.delays[("b2", "d")] = sim.delays[("d", "b2")] = slow
    sim.restart("b2")
    sim.run_for(1.6)
    del sim.delays[("b2", "d")], sim.delays[("d", "b2")]
    sim.run_for(10.0 - 3.1)
    sim.shutdown()
    assert sim.events("client_resync", node="d")
    assert lost_commits(sim.logs) == []
    assert not sim.events("tx_hold_timeout")
    [done] = sim.events("tx_resync_done", node="b2")
    assert done["missing"] == [] and done["waited_ms"] >= 1500


def test_stx_a_restarted_broker_goes_on_without_a_peer_that_does_not_come_back(tmp_path):
    """D's process never reconnects: the restarted b2 waits params.resync_wait after settle, logs
    whom it missed, and then processes what it held."""
    cfgs = scenario("stx", transactions=4, think=0.4, timeout=2.0, settle=0.5, resync_wait=1.0)
    for n, c in cfgs.items():
        c["state_dir"] = str(tmp_path / n)
    sim = Sim(cfgs, delay_ms=5.0)
    sim.start()
    sim.run_for(1.0)
    sim.start_workload(0.0, 6.0)
    sim.run_for(0.5)
    sim.crash("b2")
    sim.run_for(0.3)
    sim.delays[("b2", "d")] = sim.delays[("d", "b2")] = int(60e9)  # never within the run
    sim.restart("b2")
    sim.run_for(5.0)
    [done] = sim.events("tx_resync_done", node="b2")
    assert done["missing"] == ["d"] and 1490 <= done["waited_ms"] <= 1600, done
    [held] = sim.events("tx_held", node="b2")
    assert held["m"] >= done["m"] and held["count"] > 0


# -- S-TX: an operation processed and acknowledged, whose delivery died with the broker --
#
# Seed 405 on real processes: b3 processed op5 (from b2) for its local agent, acknowledged it
# (txopok: b2 stopped keeping it) and was killed before the message to the agent left the
# process. Restarted, it learned from b2 that it had processed op5 (txknown counted what b2 had
# sent it and seen acknowledged) and nobody re-sent it: the agent never got op5. What a broker
# processed is known only from where its effects arrived: the neighbours and clients that
# received operations from it; the operations sent to it are re-sent to it after a restart.

def test_stx_an_operation_whose_delivery_died_with_the_broker_is_re_sent():
    sim = _sim("stx")
    b1, b2 = sim.nodes["b1"], sim.nodes["b2"]
    t = "t1"
    sim.rts["d"].alive = False  # b2's message to D is lost, as in a kill before it left
    b1.on_message("e", {"k": "txop", "tx": t, "c": "e-0", "d": [],
                        "op": {"id": f"{t}/6", "n": 6, "kind": "pub", "c": "e-0", "a": {"p": "p0.0", "x": 1, "v": 2}}})
    b1.on_message("e", {"k": "txcmt", "tx": t, "c": "e-0", "d": [[f"{t}/6", "e-0", "", "pub"]]})
    sim.run_for(0.1)
    assert [r["dests"] for r in sim.events("tx_proc", node="b2", tx=t)] == [["d/d-0"]]
    sim.crash("b2")
    sim.rts["d"].alive = True
    sim.run_for(0.3)
    sim.restart("b2")
    sim.run_for(2.0)
    assert [r["n"] for r in sim.events("tx_deliver", tx=t, client="d-0")] == [6]


def test_stx_a_standing_subscription_re_issued_to_a_restarted_broker_is_removed_again_by_op4():
    """Seed 405 on real processes, P5: D's op4 removed its standing subscription at b2 and b1; b2
    restarted; D re-issued the subscription (the transaction had no outcome yet) and re-sent op4,
    which b2 knew processed (txknown) and dropped: the subscription stayed at b2 and b1."""
    sim = _sim("stx")
    b2 = sim.nodes["b2"]
    t, f, sid = "e-0.0:1", "[p,eq,'p0.0'],[x,eq,1]", "d-0:s:p0.0:1"
    dep = {1: [f"{t}/1", "e-0", "", "tcm"], 2: [f"{t}/2", "d-0", "", "tcm"], 3: [f"{t}/3", "a-0", f, "sub"],
           4: [f"{t}/4", "d-0", f, "usub"]}
    plan = {str(k): [dep[j] for j in range(1, k)] for k in range(1, 5)}
    ctx = {"tx": t, "proc": "p0.0", "x": 1, "d": "d-0", "agent": "a-0", "e": "e-0", "plan": plan}
    assert sid in b2.table.prt and sid in sim.nodes["b1"].table.prt
    b2.on_message("b1", {"k": "txop", "tx": t, "d": [],
                         "op": {"id": f"{t}/1", "n": 1, "kind": "tcm", "c": "e-0", "a": {"p": "p0.0", "x": 1, "v": 0},
                                "ctx": ctx}})
    sim.run_for(0.3)  # D issues op2 and op4; op4 removes the subscription at b2 and b1
    assert sim.events("tx_proc", node="b1", op_id=f"{t}/4")
    assert sid not in b2.table.prt and sid not in sim.nodes["b1"].table.prt
    sim.crash("b2")
    sim.run_for(0.3)
    sim.restart("b2")
    sim.run_for(2.0)
    assert sim.events("client_resync", node="d")
    assert sid not in sim.nodes["b2"].table.prt and sid not in sim.nodes["b1"].table.prt


# -- D-TX / D-TXNI: a committed write lost at a broker that restarted during its transaction --
#
# Sim seeds 511 and 553 (D-TX): the interior broker b1 crashed after it had processed D's op4
# (the usub of D's standing subscription) and before the commit reached it. Restarted empty, it
# re-learnt its routes from its neighbours; b2 (seed 511), which had not committed yet, still held
# the subscription in its stable table (op4 lived in the transaction's TXRS) and re-sent it; b1
# passed it on to b3, which had committed. The re-sent commit found no context at b1 (its writes
# died with it) and b2's own commit replayed op4 on its table without telling anyone: the
# subscription stayed at b1 and b3 (P5). Seeds 573 (D-TX) and 583 (D-TXNI): the agent's broker
# crashed after processing A's op3 (a sub) and before the commit; the restarted broker never got
# the sub again (the agent re-issues committed subscriptions only, and this one had no outcome
# yet), so publications for A stopped one hop short of it (P5).

def test_dtx_seed_511_a_subscription_a_committed_op4_removed_leaves_the_restarted_broker_too():
    from .harness import run_random, stale_routes

    sim, d = run_random(511, "dtx", True)
    assert d["crash"] and d["crash"]["victim"] == "b1"
    assert stale_routes(sim.logs) == []


def test_dtx_seed_553_a_subscription_a_committed_op4_removed_leaves_the_restarted_broker_too():
    from .harness import run_random, stale_routes

    sim, d = run_random(553, "dtx", True)
    assert d["crash"] and d["crash"]["victim"] == "b1"
    assert stale_routes(sim.logs) == []


def test_dtxni_seed_583_a_committed_subscription_reaches_its_restarted_broker():
    from .harness import run_random, stale_routes

    sim, d = run_random(583, "dtxni", True)
    assert d["crash"] and d["crash"]["victim"] == "b2"
    assert stale_routes(sim.logs) == []


def test_dtx_seed_573_a_committed_subscription_reaches_its_restarted_broker():
    from .harness import run_random, stale_routes

    sim, d = run_random(573, "dtx", True)
    assert d["crash"] and d["crash"]["victim"] == "b6"
    assert stale_routes(sim.logs) == []


# -- S-TX: open. A subscription known processed at a restarted broker, but lost there --
#
# Sim seed 442 with a crash (not in the sweep: its even seeds run without one). A's broker b6
# processed A's op3 (sub) and passed it on to b4, then crashed before op5 arrived. Restarted, it
# learned from b4 (txknown: b4 had received op3 from it) that it had processed op3, but its PRT
# no longer held the subscription (A re-issues committed subscriptions only, and op3's
# transaction had no outcome at A yet): A's re-sent op3 was dropped as known, op5 (re-sent by b4)
# was processed with no destination, and A never got it (P3 expected, P5 at b6).

def test_stx_seed_442_crash_a_subscription_known_processed_is_back_at_the_restarted_broker():
    from .harness import lost_commits, run_random, stale_routes

    sim, d = run_random(442, "stx", True)
    assert d["crash"] and d["crash"]["victim"] == "b6"
    assert stale_routes(sim.logs) == [] and lost_commits(sim.logs) == []
