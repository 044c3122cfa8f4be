"""The Spark checks on histories of moves under faults (logged by the real broker code on the
in-memory runtime, written as run directories): what a crashed path broker loses is attributed
to its crash (P8, per incarnation), and a covering move cut by a fault on its path is attributed
to that fault (P2); the same histories without the fault in them fail."""

from __future__ import annotations

import json

import pytest

from .harness import CHAIN, Sim, configs, egress_dies_with_sender, publishers
from .test_checks import AFTER, DURATION, results, write_run
from .test_fault_recovery import MOBILE, SLOW

pytestmark = pytest.mark.spark


def simulate(tmp_path, actions, movement="reconfiguration", delays=SLOW, rate=20.0):
    """A run of DURATION s with scheduled actions [(t from the workload start, fn(sim, restarts))];
    returns (configs, logs, {node: restart wall ns})."""
    cfgs = configs(CHAIN, MOBILE, publishers(["b2", "b4", "b7"], rate=rate), movement=movement)
    for n, c in cfgs.items():
        c["state_dir"] = str(tmp_path / "state" / n)
    sim = Sim(cfgs, delay_ms=1.0, delays=delays)
    egress_dies_with_sender(sim)
    sim.start()
    sim.run_for(AFTER)
    sim.start_workload(0.0, DURATION)
    restarts: dict[str, int] = {}
    for at, fn in actions:
        sim.run_until(int((AFTER + at) * 1e9))
        fn(sim, restarts)
    sim.run_until(int((AFTER + DURATION + 1.0) * 1e9))
    for name, node in sim.nodes.items():
        if sim.rts[name].alive:
            sim.drive(node.stop_workload())
    sim.shutdown()
    return cfgs, sim.logs, restarts


def move(client, to):
    def act(sim, _):
        assert sum(1 for b in CHAIN if sim.nodes[b].on_control("move", {"client": client, "to": to,
                                                                        "quiet": True})["ok"]) == 1
    return act


def crash(n):
    return lambda sim, _: sim.crash(n)


def restart(n):
    def act(sim, restarts):
        restarts[n] = sim.rts["b1" if n != "b1" else "b2"].wall_ns()
        sim.restart(n)
    return act


def steps(logs):
    return [(r["node"], r["step"]) for r in logs if r["ev"] == "move_step"]


def test_a_path_broker_crash_after_2_passed_is_attributed_per_incarnation(spark, tmp_path):
    # (slow b3-b4, a move at 0 s) b4 prepares and sends (2) at ~0.6 s, which reaches b3 at ~1.2 s; b4
    # crashes at 1.5 s, before (4) (sent by b3 at ~1.2 s) reaches it: dropped; b4 restarts at 1.7 s and
    # the re-sent (4) (~3.2 s) prepares and commits there again: the move commits
    cfgs, logs, restarts = simulate(tmp_path, [(0.0, move("m-0", "b6")), (1.5, crash("b4")),
                                               (1.7, restart("b4"))])
    assert [r["outcome"] for r in logs if r["ev"] == "move_end"] == ["commit"]
    assert ("b1", "xfer_resent") in steps(logs)
    res = results(spark, write_run(tmp_path / "run", cfgs, logs, restarts=restarts))
    failed = {k: (r.violations, r.examples[:2]) for k, r in res.items() if not r.passed}
    assert failed.keys() <= {"P4", "P5"}  # (this test gives no fault windows: losses are not attributed)
    assert res["P8"].details["lost_with_a_crashed_broker"] == 1 and res["P8"].attributed == 1
    assert res["P2"].details["outcomes"] == {"commit": 1}
    # the same history without the restart in it: b4's first prepare was never committed there
    res = results(spark, write_run(tmp_path / "run2", cfgs, logs), only={"P8"})
    assert not res["P8"].passed
    assert {(e["node"], e["what"]) for e in res["P8"].examples} == {
        ("b4", "committed move without prepare + commit here")}


def test_a_path_broker_crash_with_2_in_its_egress_aborts_and_is_attributed(spark, tmp_path):
    # b4 prepares at ~0.6 s; (2) waits in its egress for the slow link and dies with it at 1.0 s. The
    # source times out at 2.0 s and aborts; ABORT reaches the restarted b4 (nothing to roll back: its
    # tentative entry died with it), then b5 and b6 (rolled back, the queued copy discarded)
    cfgs, logs, restarts = simulate(tmp_path, [(0.0, move("m-0", "b6")), (1.0, crash("b4")),
                                               (1.5, restart("b4"))])
    assert [r["outcome"] for r in logs if r["ev"] == "move_end"] == ["abort"]
    assert ("b6", "discard") in steps(logs)
    res = results(spark, write_run(tmp_path / "run", cfgs, logs, restarts=restarts))
    failed = {k: (r.violations, r.examples[:2]) for k, r in res.items() if not r.passed}
    assert failed.keys() <= {"P4", "P5"}
    assert res["P8"].details["lost_with_a_crashed_broker"] == 1
    res = results(spark, write_run(tmp_path / "run2", cfgs, logs), only={"P8"})
    assert {(e["node"], e["what"]) for e in res["P8"].examples} == {("b4", "aborted move not rolled back here")}


def cut(sim, _):
    """An action for simulate(): frames between b3 and b4 dropped from 1 s to 2 s after AFTER."""
    send = sim._send

    def dropping(src, dst, msg):
        if {src, dst} == {"b3", "b4"} and 1.0 <= sim.now / 1e9 - AFTER < 2.0:
            return
        send(src, dst, msg)
    sim._send = dropping


def test_a_covering_move_cut_by_a_fault_on_its_path_is_attributed_to_it(spark, tmp_path):
    """Covering under a cut of b3-b4 (frames dropped): cxfer and the unsubscription wave are dropped,
    the move never ends and the client is lost. With the cut in the manifest's timeline P2 attributes
    both to it; without it they are P2 violations."""
    cfgs, logs, _ = simulate(tmp_path, [(0.0, cut), (1.2, move("m-0", "b6"))], movement="covering", delays=None)
    assert [r for r in logs if r["ev"] == "move_end"] == []
    run = write_run(tmp_path / "run", cfgs, logs)
    m = json.loads((run / "manifest.json").read_text())
    m["timeline"] = [{"fault": 0, "op": "cut", "target": ["b3", "b4"], "planned_s": 1.0, "actual_s": 1.0,
                      "status": "done", "window": [1.0, 2.0], "source": "cut: [b3, b4]"},
                     {"fault": 0, "op": "heal", "target": ["b3", "b4"], "planned_s": 2.0, "actual_s": 2.0,
                      "status": "done", "window": [1.0, 2.0], "source": "cut: [b3, b4]"}]
    (run / "manifest.json").write_text(json.dumps(m))
    res = results(spark, run, only={"P1", "P2", "P3"})
    p2 = res["P2"]
    assert p2.passed, (p2.violations, p2.examples)
    assert p2.details["moves_cut_by_faults"] == 1 and p2.details["clients_lost_by_faults"] == 1
    assert p2.details["cut_moves"] == ["m-0#1"] and p2.attributed == 2
    assert res["P3"].passed and res["P1"].passed
    # without the cut in the history the lost client and the endless move are violations
    res = results(spark, write_run(tmp_path / "run2", cfgs, logs), only={"P2"})
    assert not res["P2"].passed and res["P2"].violations == 2


def crash_run(root, cfgs, logs, restarts, node: str, down: float, up: float):
    """The run directory of a history with ``node`` crashed at ``down`` and restarted at ``up``
    (s from the workload start) in its manifest's timeline, as the schedule writes it: (path, manifest)."""
    run = write_run(root, cfgs, logs, restarts=restarts)
    m = json.loads((run / "manifest.json").read_text())
    m["timeline"] = [{"fault": 0, "op": "crash", "target": [node], "planned_s": down, "actual_s": down,
                      "status": "done", "window": [down, up], "source": f"crash: {node}"},
                     {"fault": 1, "op": "restart", "target": [node], "planned_s": up, "actual_s": up,
                      "status": "done", "window": [up, up], "source": f"restart: {node}"}]
    (run / "manifest.json").write_text(json.dumps(m))
    return run, m


def test_a_client_lost_with_its_broker_has_its_later_misses_attributed_to_the_crash(spark, tmp_path):
    """The target crashes after the commit and restarts early: the moved client (and m-1, hosted
    there) is gone for the rest of the run, beyond the crash's attribution window. P4 attributes
    its misses from the crash on to the crash (section 4.1), not only those inside the window."""
    from testbed.protocols.pubsub.nodes.filters import matches, parse

    from pubsub.harness import WALL0

    cfgs, logs, restarts = simulate(tmp_path, [(0.0, move("m-0", "b6")), (2.3, crash("b6")),
                                               (2.6, restart("b6"))], rate=100.0, delays=None)
    assert [r["outcome"] for r in logs if r["ev"] == "move_end"] == ["commit"]
    run, _ = crash_run(tmp_path / "run", cfgs, logs, restarts, "b6", 2.3, 2.6)
    res = results(spark, run, only={"P2", "P4"})
    assert res["P4"].passed, (res["P4"].violations, res["P4"].examples[:3], res["P4"].details)
    assert res["P2"].details["clients_lost_in_crashes"] == 2  # m-0 (moved there), m-1
    # the case needs the rule: the dead clients match publications after the window (2.3 - 2 .. 2.6 + 2 s)
    # and before the end of the expectations (DURATION - travel margin 0.5 s)
    fs = [parse(r["filter"]) for r in logs if r["ev"] == "subscribe" and r["client"] in ("m-0", "m-1")]
    late = [(f, r) for f in fs for r in logs if r["ev"] == "publish"
            and 4.7 < (r["t"] - WALL0) / 1e9 - AFTER < DURATION - 0.55 and matches(f, r["attrs"])]
    assert late
    assert res["P4"].attributed >= len(late)


def test_a_client_started_again_from_4_by_its_restarted_target_has_the_misses_before_that_attributed(spark, tmp_path):
    """The target crashes while its copy is queued and restarts only after (4) was dropped on its
    way there; the source re-sends (4) after the move timeout and the restarted target starts the
    client from it (``xfer_adopt``). Until then the client existed nowhere: publications that reached
    the restarted b6 for it were dropped, after the crash's window (which ends at the re-sync). P4
    attributes them to the crash (seen in CI on real processes: 2 misses at 5.07-5.12 s)."""
    from testbed.protocols.mobility.analysis.checks import ADOPTED

    cfgs, logs, restarts = simulate(tmp_path, [(0.0, move("m-0", "b6")), (1.0, crash("b6")),
                                               (2.0, restart("b6"))], rate=100.0)
    assert ("b1", "xfer_resent") in steps(logs) and ("b6", "xfer_adopt") in steps(logs)
    run, m = crash_run(tmp_path / "run", cfgs, logs, restarts, "b6", 1.0, 2.0)
    res = results(spark, run, only={"P1", "P3", "P4"})
    assert res["P4"].passed, (res["P4"].violations, res["P4"].examples[:3], res["P4"].details)
    assert res["P4"].attributed > 0 and res["P1"].passed and res["P3"].passed
    # the misses between the restart's re-sync and the adoption are the rule's
    from testbed.analysis.context import AnalysisContext, AnalysisOptions
    from testbed.analysis.ingest import ingest
    from testbed.protocols.mobility.analysis import checks as K

    ctx = AnalysisContext.build(spark, run, json.loads((run / "plan.json").read_text()), m,
                                dict(ingest(spark, run, write=False)), AnalysisOptions(settle_s=0.3, travel_margin_s=0.5))
    rows = [tuple(r) for r in K._dead_clients(ctx).collect()]
    ctx.release()
    [(client, fault, lo, hi, why)] = [r for r in rows if r[4] == ADOPTED]
    assert (client, fault, why) == ("m-0", 0, ADOPTED) and lo < 2.0 < hi


def test_adopted_rows_pick_the_latest_crash_of_the_target_before_the_adoption():
    from testbed.protocols.mobility.analysis.checks import ADOPTED, adopted_rows

    crashes = [(0, 1.0, {"b6"}), (3, 6.0, {"b6"}), (1, 2.0, {"b4"})]
    assert adopted_rows([("b6", "m-0", 4.0)], crashes, 0.5) == [("m-0", 0, 1.0, 4.5, ADOPTED)]
    assert adopted_rows([("b6", "m-0", 7.0)], crashes, 0.5) == [("m-0", 3, 6.0, 7.5, ADOPTED)]
    assert adopted_rows([("b5", "m-0", 4.0)], crashes, 0.5) == []  # no crash of that broker
    assert adopted_rows([("b6", "m-0", 0.5)], crashes, 0.5) == []  # adopted before any crash window
