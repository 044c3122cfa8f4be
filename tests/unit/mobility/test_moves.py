"""Moves on the in-memory runtime: reconfiguration keeps exactly-once and completeness,
rejects and aborts roll back, covering moves lose publications inside move windows only."""

import collections

import pytest

from .harness import CHAIN, configs, duplicates, final_copies, missing, publishers, run

MOBILE = {"m": {"count": 6, "workload": "random", "start": ["b1", "b6"], "routes": [["b1", "b6"]],
                "pause": 1.0, "first_move": 1.0, "moving": "all", "seed": 3, "assign": "random",
                "start_by": "client"}}


def outcomes(sim):
    return collections.Counter(e["outcome"] for e in sim.events("move_end"))


def test_reconfiguration_moves_commit_exactly_once_and_complete():
    sim = run(configs(CHAIN, MOBILE, publishers(["b1", "b4", "b7"], rate=100.0)), duration=8.0)
    begins, ends = sim.events("move_begin"), sim.events("move_end")
    assert len(begins) >= 30 and outcomes(sim) == {"commit": len(begins)}
    assert {e["mid"] for e in begins} == {e["mid"] for e in ends}
    assert all(e["path_len"] == 5 for e in ends)
    assert duplicates(sim) == []
    assert missing(sim) == []
    # the target merged its queue (what the dual hop sent it while the source still ran); with
    # FIFO links nothing in it had been delivered at the source too: (2) travels ahead of every
    # publication that took the tentative hop, so the source stops first (the section 4.3 proof)
    merges = sim.events("move_merge")
    assert len(merges) == len(ends) and sum(m["queued"] for m in merges) > 0
    assert sum(m["skipped"] for m in merges) == 0
    # one started copy per client at the end; no tentative entry left anywhere
    assert {c: len(ns) for c, ns in final_copies(sim).items()} == {f"m-{i}": 1 for i in range(6)}
    assert all(d["tentative"] == [] for d in sim.events("rt_dump"))
    # every routing change of a move is tagged with it, at brokers on its path, for its client
    paths = {e["mid"]: set(e["path"]) for e in begins}
    changes = sim.events("rt_change")
    assert changes and all(c["node"] in paths[c["mid"]] and c["owner"] == c["mid"].split("#")[0]
                           for c in changes)
    ops = collections.Counter((c["mid"], c["op"]) for c in changes)
    assert all(ops[(m, "prepare")] == 6 and ops[(m, "commit")] == 6 for m in paths)
    # no subscription messages for moves: only the protocol's own, 4 per link of the path
    traffic = collections.Counter()
    for t in sim.events("move_traffic"):
        traffic[t["mid"]] += t["msgs"]
    assert set(traffic.values()) == {4 * 5}


def test_stationary_subscribers_are_unaffected():
    groups = publishers(["b1", "b4", "b7"])
    groups["stay"] = {"role": "subscriber", "count": 2, "attach": ["b2", "b6"], "filter": "[w,eq,'cov']"}
    sim = run(configs(CHAIN, MOBILE, groups), duration=5.0)
    assert [m for m in missing(sim) if m[0].startswith("stay")] == []
    assert duplicates(sim) == []
    assert sum(1 for d in sim.events("deliver") if d["client"].startswith("stay")) > 50


def test_a_rejecting_target_keeps_the_client_at_the_source():
    cfgs = configs(CHAIN, {"m": dict(MOBILE["m"], count=2, first_move=0.5, pause=1.5)},
                   publishers(["b1", "b4", "b7"]))

    def reject(sim):
        for b in ("b1", "b6"):
            sim.nodes[b].on_control("reject", {"for": 2.0})

    sim = run(cfgs, duration=6.0, actions=[(0.0, reject)])
    out = outcomes(sim)
    assert out["reject"] >= 2 and out["commit"] >= 1 and set(out) <= {"reject", "commit"}
    rejected = {e["mid"] for e in sim.events("move_end", outcome="reject")}
    # a rejected move never touched a routing table nor stopped the source copy
    assert not [c for c in sim.events("rt_change") if c["mid"] in rejected]
    assert not [s for s in sim.events("client_state") if s["mid"] in rejected and s["state"] != "started"]
    assert duplicates(sim) == [] and missing(sim) == []
    assert {c: len(ns) for c, ns in final_copies(sim).items()} == {"m-0": 1, "m-1": 1}


def test_a_slow_path_aborts_and_rolls_back_every_tentative_entry():
    # (2) needs 5 hops of 40 ms back: a 0.15 s timeout aborts every move; ABORT and (2) cross
    slow = {}
    for b, ns in CHAIN.items():
        for n in ns:
            slow[(b, n)] = slow[(n, b)] = 40.0
    cfgs = configs(CHAIN, {"m": dict(MOBILE["m"], count=2)}, publishers(["b1", "b4", "b7"]), move_timeout=0.15)
    sim = run(cfgs, duration=5.0, delays=slow, tail=2.0)
    out = outcomes(sim)
    assert out["abort"] >= 4 and set(out) == {"abort"}
    assert all(d["tentative"] == [] for d in sim.events("rt_dump"))
    ops = collections.Counter(c["op"] for c in sim.events("rt_change"))
    assert ops["prepare"] > 0 and ops["commit"] == 0 and ops["abort"] >= ops["prepare"]
    # the target copies were discarded, the sources resumed: one copy each, at the start broker
    assert sim.events("client_state", state="discarded")
    assert sorted(final_copies(sim).items()) == [("m-0", ["b1"]), ("m-1", ["b6"])]
    assert duplicates(sim) == [] and missing(sim, margin_s=1.0) == []


def test_covering_moves_commit_and_lose_only_inside_move_windows():
    cfgs = configs(CHAIN, MOBILE, publishers(["b1", "b4", "b7"], rate=50.0), movement="covering")
    sim = run(cfgs, duration=8.0)
    assert outcomes(sim)["commit"] >= 30 and set(outcomes(sim)) == {"commit"}
    assert duplicates(sim) == []
    windows = collections.defaultdict(list)
    for b in sim.events("move_begin"):
        windows[b["client"]].append([b["t"], None])  # widened by 0.1 s: publications in flight
    ends = {e["mid"]: e["t"] for e in sim.events("move_end")}
    for b in sim.events("move_begin"):
        for w in windows[b["client"]]:
            if w[0] == b["t"]:
                w[1] = ends[b["mid"]] + int(0.1e9)
    lost = missing(sim)
    assert lost, "covering movement loses publications between unsubscribe and resubscribe"
    assert all(any(lo - int(0.1e9) <= t <= hi for lo, hi in windows[c]) for c, _, t in lost)
    # the waves were acknowledged (Dijkstra-Scholten) and the subscription messages counted
    kinds = collections.Counter()
    for t in sim.events("move_traffic"):
        kinds.update(t["by_kind"])
    assert kinds["mack"] > 0 and kinds["sub"] > 0 and kinds["unsub"] > 0
    assert {c: len(ns) for c, ns in final_copies(sim).items()} == {f"m-{i}": 1 for i in range(6)}


def test_covering_root_moves_retract_other_clients_entries():
    # every client has the covered workload in round-robin: m-0 holds the root, m-1..m-9 the bins
    mobile = {"m": dict(MOBILE["m"], count=10, workload="covered", assign="round-robin",
                        start=["b6"], routes=[["b1", "b6"]], moving={"templates": [1]})}
    cfgs = configs(CHAIN, mobile, publishers(["b1"], rate=20.0), movement="covering")
    sim = run(cfgs, duration=5.0)
    roots = {e["mid"] for e in sim.events("move_end")}
    assert roots and all(m.startswith("m-0#") for m in roots)
    others = [c for c in sim.events("rt_change") if c["owner"] != "m-0"]
    assert {c["op"] for c in others} == {"fwd", "retract", "add", "del"}  # the root moves others
    # the others' entries moved around, yet they lose nothing (retract keeps a cover in place)
    assert {c for c, _, _ in missing(sim)} <= {"m-0"}
    assert duplicates(sim) == []


@pytest.mark.parametrize("movement", ["reconfiguration", "covering"])
def test_control_move_and_skips(movement):
    cfgs = configs(CHAIN, {"m": dict(MOBILE["m"], count=2, moving=0)}, publishers(["b4"]), movement=movement)

    def moves(sim):
        assert sim.nodes["b1"].on_control("move", {"client": "m-0", "to": "b7"}) == {"ok": True, "reason": ""}
        r = sim.nodes["b1"].on_control("move", {"client": "m-1", "to": "b2"})
        assert r == {"ok": False, "reason": "client not started here", "error": "client not started here"}
        assert sim.nodes["b6"].on_control("move", {"client": "m-1", "to": "b6"})["reason"] == \
            "client already at the target"
        # the schedule asks every broker, quietly: one that does not host the client logs no skip
        r = sim.nodes["b2"].on_control("move", {"client": "m-1", "to": "b1", "quiet": True})
        assert r["ok"] is False and r["error"] == "client not started here"
        # ... and the target that already hosts it (the request came after the move) logs none either
        r = sim.nodes["b6"].on_control("move", {"client": "m-1", "to": "b6", "quiet": True})
        assert r["ok"] is False and r["error"] == "client already at the target"

    sim = run(cfgs, duration=2.0, actions=[(0.2, moves)])
    [e] = sim.events("move_end")
    assert e["outcome"] == "commit" and e["dst"] == "b7" and e["path_len"] == 3
    assert len(sim.events("move_skipped")) == 2
    assert final_copies(sim)["m-0"] == ["b7"]


@pytest.mark.parametrize("movement", ["reconfiguration", "covering"])
def test_a_late_copy_of_a_served_move_request_is_not_a_second_move(movement):
    """The schedule sends a move to every broker at once with one request id. The client moves for
    it, then moves on (here: another move); a copy of the first request reaching the broker it is
    at now is answered quietly, because the id travelled with the client's state."""
    cfgs = configs(CHAIN, {"m": dict(MOBILE["m"], count=1, moving=0)}, publishers(["b4"]), movement=movement)
    late = {}

    def first(sim):
        r = sim.nodes["b1"].on_control("move", {"client": "m-0", "to": "b7", "quiet": True, "req": "r1"})
        assert r["ok"], r

    def second(sim):
        assert sim.nodes["b7"].on_control("move", {"client": "m-0", "to": "b6"})["ok"]

    def copy_of_first(sim):
        late["reply"] = sim.nodes["b6"].on_control("move", {"client": "m-0", "to": "b7", "quiet": True, "req": "r1"})

    sim = run(cfgs, duration=3.0, actions=[(0.2, first), (1.0, second), (1.8, copy_of_first)])
    assert late["reply"] == {"ok": False, "error": "request already served", "reason": "request already served"}
    assert [(e["src"], e["dst"], e["outcome"]) for e in sim.events("move_end")] == [
        ("b1", "b7", "commit"), ("b7", "b6", "commit")]
    assert sim.events("move_skipped") == [] and final_copies(sim)["m-0"] == ["b6"]


def test_the_merge_delivers_payload_then_queue_skipping_ids_the_source_delivered():
    """With FIFO links the target's queue never holds what the source delivered (see above), so
    the skip is exercised by planting such an id: the source 'delivered' q1 since the move began,
    the target queued q1 and q2; the merge delivers q2 only, right after the copy starts."""
    from .harness import Sim
    cfgs = configs(CHAIN, {"m": dict(MOBILE["m"], count=1, start=["b1"], moving=0)}, publishers(["b4"], 1.0))
    sim = Sim(cfgs, delay_ms=1.0)
    sim.start()
    sim.run_for(0.5)
    sim.start_workload(0.0, 2.0)
    assert sim.nodes["b1"].on_control("move", {"client": "m-0", "to": "b6"})["ok"]
    sim.run_for(0.006)  # (1) has reached b6 (5 hops), (2) is on its way back
    tgt, src = sim.nodes["b6"].copies["m-0"], sim.nodes["b1"].copies["m-0"]
    assert tgt.state == "queued" and src.state == "started"
    q = lambda pid: (pid, "pubs-0", 1, 0, 3)  # noqa: E731
    tgt.queue += [q("x:1"), q("x:2")]
    src.tracking.add("x:1")
    sim.run_for(0.1)
    [m] = sim.events("move_merge")
    assert (m["queued"], m["skipped"], m["payload"]) == (2, 1, 0)
    got = [d["pub_id"] for d in sim.events("deliver", client="m-0")]
    assert got == ["x:2"]
    started = sim.events("client_state", client="m-0", copy="tgt", state="started")[0]
    deliver = sim.events("deliver", client="m-0")[0]
    assert started["m"] <= deliver["m"] and sim.logs.index(started) < sim.logs.index(deliver)


def test_a_covering_move_ending_after_the_client_came_back_does_not_log_its_new_copy_clean():
    """Under congestion a covering move can end at its source (both waves acknowledged, then done)
    after the client, started at the target, already moved back to that source (#30: 5.6 s moves
    with a 3 s pause). The old source copy is replaced when the client comes back: its ``clean``
    is logged then, before the new copy starts, never after it (the checks read the log: a ``clean``
    after ``started`` made P1 flag the new copy's deliveries and P2 find no started copy)."""
    slow = {}
    for a, b in (("b3", "b4"), ("b4", "b5")):  # 0.4 s each way on two links: a traversal takes > 0.8 s
        slow[(a, b)] = slow[(b, a)] = 400.0
    mobile = {"m": dict(MOBILE["m"], count=1, pause=0.3, first_move=0.3)}
    sim = run(configs(CHAIN, mobile, publishers(["b2"], rate=20.0), movement="covering"), duration=6.0,
              delays=slow)
    states = [(e["t"], e["node"], e["mid"], e["copy"], e["state"]) for e in sim.events("client_state")]
    ends = {e["mid"]: e["t"] for e in sim.events("move_end")}
    begins = {e["mid"]: e["t"] for e in sim.events("move_begin")}
    # the situation: a move that began after the previous one started at its target but before that
    # previous move ended at its source
    overlap = [m for m in begins if any(m != p and begins[p] < begins[m] < ends.get(p, 0) for p in begins)]
    assert overlap, (begins, ends)
    last: dict[str, str] = {}
    for t, node, mid, copy, state in sorted(states):
        last[node] = state
    started_at_end = [n for n, s in last.items() if s == "started"]
    assert len(started_at_end) == 1, (started_at_end, sorted(states))
    # every source clean of a committed move is logged, once
    cleans = collections.Counter(mid for _, _, mid, copy, state in states if copy == "src" and state == "clean")
    assert {m for m, e in ends.items()} <= set(cleans) and set(cleans.values()) == {1}
