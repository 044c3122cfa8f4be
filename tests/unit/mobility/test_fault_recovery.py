"""Reconfiguration moves whose (4) or (5) is lost, on the in-memory runtime (virtual clock, FIFO
links): a cut between (2) and (4), a path broker that crashes after (2) passed it, a target that
crashes while its copy is queued, a lost (5). The source has committed when it sends (4), so it
re-sends (4) every ``move_timeout`` until (5) arrives; (4) is idempotent on the path. In every case
exactly one copy is started at the end, nothing is delivered twice, and what is missed was
published inside the fault's window. (The same cases on real processes with the Spark checks:
tests/integration/test_mobility_faults2.py.)"""

import collections

from pubsub.harness import WALL0

from .harness import (CHAIN, configs, duplicates, egress_dies_with_sender, final_copies, missing, publishers,
                      run)

AFTER = 0.5  # run(): the workload starts 0.5 s into the simulation
SLOW = {("b3", "b4"): 600.0, ("b4", "b3"): 600.0}  # each move message takes ~0.6 s over b3-b4
# with SLOW and a move at 1.0 s: (1) reaches b6 at ~1.6 s, (2) leaves b4 at ~1.6 s and reaches b1 at
# ~2.2 s, (4) leaves b3 at ~2.2 s and reaches b6 at ~2.8 s, (5) reaches b1 at ~3.4 s
MOBILE = {"m": {"count": 2, "workload": "random", "start": ["b1", "b6"], "moving": 0, "seed": 3,
                "assign": "random", "start_by": "client"}}


def cfgs(tmp_path=None):
    out = configs(CHAIN, MOBILE, publishers(["b2", "b4", "b7"], rate=40.0))
    if tmp_path is not None:  # restarts count incarnations there (a restarted broker hosts no clients)
        for n, c in out.items():
            c["state_dir"] = str(tmp_path / n)
    return out


def move(client, to):
    def act(sim):
        res = [sim.nodes[b].on_control("move", {"client": client, "to": to, "quiet": True}) for b in CHAIN]
        assert sum(1 for r in res if r["ok"]) == 1, res
    return act


def cut(a, b, lo, hi):
    """Frames sent between a and b in [lo, hi) (seconds from the workload start) are dropped at the
    sender, as the link emulation's cut does."""
    def install(sim):
        send = sim._send

        def dropping(src, dst, msg):
            t = sim.now / 1e9 - AFTER
            if {src, dst} == {a, b} and lo <= t < hi:
                sim.dropped += 1
                return
            send(src, dst, msg)
        sim._send = dropping
    return install


def steps(sim, mid):
    return [(e["node"], e["step"]) for e in sim.events("move_step", mid=mid)]


def t_s(e):
    return (e["t"] - WALL0) / 1e9 - AFTER


def lost_outside(sim, lo, hi):
    # settle 1.5 s: with the slow link, routing needs ~1.2 s to set up (adv one way, sub back)
    return [m for m in missing(sim, margin_s=1.0, settle_s=1.5) if not lo <= (m[2] - WALL0) / 1e9 - AFTER <= hi]


def test_a_cut_between_2_and_4_is_survived_by_resending_4():
    sim = run(cfgs(), duration=8.0, delays=SLOW, tail=2.0,
              actions=[(0.0, cut("b3", "b4", 1.9, 2.5)), (1.0, move("m-0", "b6"))])
    ends = sim.events("move_end", mid="m-0#1")
    assert [e["outcome"] for e in ends] == ["commit"]
    assert ends[0]["dur_ms"] > 2000  # one re-send after move_timeout (2 s)
    assert steps(sim, "m-0#1") == [("b1", "xfer_sent"), ("b1", "xfer_resent"), ("b6", "xfer_recv"),
                                   ("b1", "done_recv")]
    assert final_copies(sim) == {"m-0": ["b6"], "m-1": ["b6"]}
    assert duplicates(sim) == []
    assert all(d["tentative"] == [] for d in sim.events("rt_dump"))
    # b1-b3 committed on the first (4), b4-b6 on the re-sent one: one prepare and one commit each
    ops = collections.Counter((c["node"], c["op"]) for c in sim.events("rt_change", mid="m-0#1"))
    assert ops == {(b, op): 1 for b in ("b1", "b2", "b3", "b4", "b5", "b6") for op in ("prepare", "commit")}
    # lost: only what crossed b3-b4 during the cut
    assert lost_outside(sim, 1.85, 2.55) == []
    assert sum(1 for d in sim.events("deliver", client="m-0", node="b6")) > 20


def test_without_the_resend_the_cut_would_lose_the_client():
    """The failure the re-send fixes: drop every (4) copy after the first one is cut, and the client
    stays stopped at the source and queued at the target (no started copy)."""
    def drop_resends(sim):
        send = sim._send

        def dropping(src, dst, msg):
            if msg.get("k") == "mxfer" and sim.now / 1e9 - AFTER > 2.5:
                return
            send(src, dst, msg)
        sim._send = dropping

    sim = run(cfgs(), duration=8.0, delays=SLOW, tail=2.0,
              actions=[(0.0, cut("b3", "b4", 1.9, 2.5)), (0.0, drop_resends), (1.0, move("m-0", "b6"))])
    assert sim.events("move_end", mid="m-0#1") == []
    assert "m-0" not in final_copies(sim)


def test_a_path_broker_crash_after_2_passed_commits_from_the_resent_4(tmp_path):
    # b4 prepared and sent (2) at ~1.6 s; it crashes at 2.0 s (before (4) reaches it at ~2.8 s: dropped)
    # and restarts at 2.5 s without its tentative entry; the re-sent (4) prepares and commits there
    sim = run(cfgs(tmp_path), duration=8.0, delays=SLOW, tail=2.0,
              actions=[(1.0, move("m-0", "b6")), (2.0, lambda s: s.crash("b4")),
                       (2.5, lambda s: s.restart("b4"))])
    assert [e["outcome"] for e in sim.events("move_end", mid="m-0#1")] == ["commit"]
    assert ("b1", "xfer_resent") in steps(sim, "m-0#1")
    assert final_copies(sim) == {"m-0": ["b6"], "m-1": ["b6"]}
    assert duplicates(sim) == []
    b4 = [(c["op"], c["hop"]) for c in sim.events("rt_change", mid="m-0#1", node="b4")]
    assert b4 == [("prepare", "b5"), ("prepare", "b5"), ("commit", "b5")]  # old incarnation, then from (4)
    assert all(d["tentative"] == [] for d in sim.events("rt_dump"))
    # after the commit every publisher reaches the client at b6 again (b4 routes it toward b5)
    late = [d for d in sim.events("deliver", client="m-0") if t_s(d) > 5.0]
    assert late and {d["node"] for d in late} == {"b6"}
    assert {d["publisher"] for d in late} >= {"pubs-0", "pubs-1"}
    assert lost_outside(sim, 1.35, 4.9) == []  # (publications in flight on the slow link to b4 die too)


def test_a_target_crash_while_queued_is_survived_by_starting_the_client_from_4(tmp_path):
    # b6 queued the copy at ~1.6 s and crashes at 2.0 s (its queue and clients die), restarts at 2.4 s;
    # (4) arrives at ~2.8 s: the restarted target starts the client from it
    sim = run(cfgs(tmp_path), duration=8.0, delays=SLOW, tail=2.0,
              actions=[(1.0, move("m-0", "b6")), (2.0, lambda s: s.crash("b6")),
                       (2.4, lambda s: s.restart("b6"))])
    assert [e["outcome"] for e in sim.events("move_end", mid="m-0#1")] == ["commit"]
    assert ("b6", "xfer_adopt") in steps(sim, "m-0#1")
    assert final_copies(sim)["m-0"] == ["b6"]  # (m-1 died with b6's first incarnation)
    assert duplicates(sim) == []
    assert sum(1 for d in sim.events("deliver", client="m-0", node="b6") if t_s(d) > 3.5) > 20
    assert [m for m in lost_outside(sim, 1.9, 3.0) if m[0] == "m-0"] == []


def test_a_lost_5_is_answered_again_without_a_second_merge():
    def drop_first_done(sim):
        send = sim._send
        dropped = []

        def dropping(src, dst, msg):
            if msg.get("k") == "mdone" and not dropped:
                dropped.append(msg)
                return
            send(src, dst, msg)
        sim._send = dropping

    sim = run(cfgs(), duration=6.0, delays=SLOW, tail=2.0,
              actions=[(0.0, drop_first_done), (1.0, move("m-0", "b6"))])
    assert [e["outcome"] for e in sim.events("move_end", mid="m-0#1")] == ["commit"]
    assert steps(sim, "m-0#1") == [("b1", "xfer_sent"), ("b6", "xfer_recv"), ("b1", "xfer_resent"),
                                   ("b6", "xfer_dup"), ("b1", "done_recv")]
    assert len(sim.events("move_merge", mid="m-0#1")) == 1
    assert duplicates(sim) == [] and missing(sim, margin_s=1.0, settle_s=1.5) == []
    assert final_copies(sim) == {"m-0": ["b6"], "m-1": ["b6"]}


def test_a_stale_resent_4_does_not_undo_a_later_move():
    """(4) of move #1 re-sent (a slow (5)) reaches the path after the client moved on (#2): the
    hops that handled #2 only relay it, and the old target does not start a second copy."""
    # 1 ms links: #1 commits at b6 at ~1.0 s, #2 (b6 -> b5) at ~2.5 s, #1's (4) is re-sent at ~3.0 s
    def hold_first_done(sim):
        send = sim._send
        held = []

        def holding(src, dst, msg):
            if msg.get("k") == "mdone" and msg["mid"] == "m-0#1" and src == "b6" and not held:
                held.append(msg)  # (5) of #1 leaves only at 4.5 s: the source re-sends (4) at ~3.0 s
                sim.at(int((AFTER + 4.5) * 1e9), lambda: send(src, dst, msg))
                return
            send(src, dst, msg)
        sim._send = holding

    sim = run(cfgs(), duration=9.0, tail=2.0,
              actions=[(0.0, hold_first_done), (1.0, move("m-0", "b6")), (2.5, move("m-0", "b5"))])
    ends = {e["mid"]: e["outcome"] for e in sim.events("move_end", client="m-0")}
    assert ends == {"m-0#1": "commit", "m-0#2": "commit"}
    assert final_copies(sim)["m-0"] == ["b5"]
    assert duplicates(sim) == []
    dumps = {d["node"]: {e[0]: e[1] for e in d["prt"]} for d in sim.events("rt_dump")}
    sid = next(iter(s["sub_id"] for s in sim.events("subscribe", client="m-0")))
    assert dumps["b5"][sid] == "@m-0" and dumps["b6"][sid] == "b5" and dumps["b4"][sid] == "b5"


def test_an_abort_dropped_at_a_down_neighbour_is_resent_when_it_comes_back(tmp_path):
    # b4 prepared and holds (2) in its egress (slow link) when it crashes at 1.9 s: (2) dies with it.
    # The source times out at 3.0 s; its ABORT reaches b3 while b4 is still down (dropped); b4 restarts
    # at 3.5 s and b3 sends the ABORT again on the reconnect: b5 and b6 roll back, b6 discards its copy
    sim = run(cfgs(tmp_path), duration=6.0, delays=SLOW, tail=2.0,
              actions=[(0.0, lambda s: egress_dies_with_sender(s)), (1.0, move("m-0", "b6")),
                       (1.9, lambda s: s.crash("b4")), (3.5, lambda s: s.restart("b4"))])
    assert [e["outcome"] for e in sim.events("move_end", mid="m-0#1")] == ["abort"]
    st = steps(sim, "m-0#1")
    assert ("b3", "abort_resent") in st and ("b6", "discard") in st
    assert all(d["tentative"] == [] for d in sim.events("rt_dump"))
    assert final_copies(sim) == {"m-0": ["b1"], "m-1": ["b6"]}
    assert duplicates(sim) == []


def test_without_the_abort_resend_the_target_keeps_its_queued_copy(tmp_path):
    """The failure the re-send fixes (seen on real processes when b4's restart took ~2 s under load)."""
    from testbed.protocols.mobility.nodes.broker import MobilityBroker

    orig = MobilityBroker.on_peer_up
    MobilityBroker.on_peer_up = lambda self, peer: super(MobilityBroker, self).on_peer_up(peer)
    try:
        sim = run(cfgs(tmp_path), duration=6.0, delays=SLOW, tail=2.0,
                  actions=[(0.0, lambda s: egress_dies_with_sender(s)), (1.0, move("m-0", "b6")),
                           (1.9, lambda s: s.crash("b4")), (3.5, lambda s: s.restart("b4"))])
    finally:
        MobilityBroker.on_peer_up = orig
    assert ("b6", "discard") not in steps(sim, "m-0#1")
    assert [d["node"] for d in sim.events("rt_dump") if d["tentative"]] == ["b5", "b6"]
