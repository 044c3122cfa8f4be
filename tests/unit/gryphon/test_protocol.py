"""Gryphon brokers and clients in the simulated harness, across the paper's failures (Figs 6-8)."""

import pytest

from testbed.protocols.gryphon.nodes.pubend import LOG_FORCE_S

from .harness import Sim, fig3, history_violations

T0 = 1.0  # the workload starts here (sim seconds)
CLEAN = {"duplicates": 0, "order": 0, "gaps": 0, "unpublished": 0, "missing_streams": 0}


def run(tmp_path, faults=(), *, params=None, until=14.0, duration=10.0, delays=None):
    sim = Sim(fig3(str(tmp_path), params))
    sim.link_delay.update(delays or {})
    sim.start()
    sim.run_until(T0)
    sim.workload(duration)
    for at, fn in faults:
        sim.schedule(T0 + at, (lambda f=fn: f(sim)))
    sim.run_until(T0 + until)
    return sim


def nack_range(sim, node):
    return sum(e["range_ms"] for e in sim.ev("g_nack", node=node))


def test_failure_free_exactly_once_no_nacks(tmp_path):
    sim = run(tmp_path, until=11.0)
    assert history_violations(sim.events) == CLEAN
    assert len(sim.ev("g_deliver")) == 5 * 4 * 250
    assert sim.ev("g_nack") == []
    # pubends are spread over the link bundles of both intermediate cells
    vias = {e["via"] for e in sim.ev("g_route", node="p1")}
    assert vias == {"b1", "b2", "b3", "b4"}


def test_link_stall_then_fail_recovers_via_cell_peer(tmp_path):
    faults = [(3.0, lambda s: s.stall("b1")),
              (5.5, lambda s: (s.unstall("b1"), s.cut("b1", "s1"))),
              (9.0, lambda s: s.heal("b1", "s1"))]
    sim = run(tmp_path, faults)
    assert history_violations(sim.events) == CLEAN
    s1 = sim.ev("g_nack", node="s1")
    assert s1 and all(e["to"] == ["b2"] for e in s1)  # s1 nacks go to b2 (b1 is stalled / cut)
    assert len(s1) > 1  # ranges chopped into several nacks
    lat = [(e["t"] - e["pub_t"]) / 1e9 for e in sim.ev("g_deliver", client="subs-2")]
    assert max(lat) < LOG_FORCE_S + 0.05  # s3 is not on the failure path (log force + hops)


def test_intermediate_crash_restart_nack_consolidation(tmp_path):
    faults = [(3.0, lambda s: s.stall("b1")), (5.5, lambda s: s.crash("b1")),
              (8.0, lambda s: s.restart("b1"))]
    sim = run(tmp_path, faults)
    assert history_violations(sim.events) == CLEAN
    r1, r2, rb2 = nack_range(sim, "s1"), nack_range(sim, "s2"), nack_range(sim, "b2")
    assert r1 > 0 and r1 == r2  # s1 and s2 lost the same messages
    assert rb2 == pytest.approx((r1 + r2) / 2, rel=0.1)  # b2 consolidates their nacks
    assert {tuple(e["to"]) for e in sim.ev("g_nack", node="b2")} == {("p1",)}
    restart_t = sim.rts["b1"].wall_ns() - int((sim.now - T0 - 8.0) * 1e9)
    assert not [e for e in sim.ev("g_nack") if e["t"] > restart_t + 1e9]  # no nacks at restart


def test_phb_crash_restart_recovers_from_log(tmp_path):
    faults = [(3.0, lambda s: s.stall("p1")), (4.0, lambda s: s.crash("p1")),
              (7.0, lambda s: s.restart("p1"))]
    sim = run(tmp_path, faults)
    assert history_violations(sim.events) == CLEAN
    rec = sim.ev("g_recover")
    assert len(rec) == 4 and all(e["records"] > 0 for e in rec)
    assert sim.ev("g_ackexp", node="p1")
    crash_t, restart_t = [sim.rts["s1"].wall_ns() - int((sim.now - T0 - x) * 1e9) for x in (4.0, 7.0)]
    assert not [e for e in sim.ev("g_nack") if crash_t < e["t"] < restart_t]  # DCT infinite
    # messages logged (but held by the stall) before the crash are delivered after recovery
    held = {t for e in sim.ev("g_logged", recovered=False) if crash_t - 1e9 < e["t"] < crash_t
            for t in e["ticks"]}
    got = {e["tick"] for e in sim.ev("g_deliver", client="subs-0")}
    assert held and held <= got


def test_best_effort_loses_messages_and_the_checker_sees_it(tmp_path):
    faults = [(3.0, lambda s: s.stall("b1")), (5.5, lambda s: s.crash("b1"))]
    sim = run(tmp_path, faults, params={"mode": "best-effort"})
    v = history_violations(sim.events, exclude_brokers=set())
    assert v["gaps"] > 0
    assert sim.ev("g_nack") == [] and sim.ev("g_logged")


def test_broken_subend_that_skips_gaps_is_caught(tmp_path, monkeypatch):
    from testbed.protocols.gryphon.nodes import streams

    from .harness import skip_gaps

    monkeypatch.setattr(streams.SubendStream, "_advance", skip_gaps)
    faults = [(3.0, lambda s: s.stall("b1")), (5.5, lambda s: s.crash("b1"))]
    sim = run(tmp_path, faults)
    assert history_violations(sim.events)["gaps"] > 0


def test_broken_downstream_link_routes_sideways_then_upstream_switches(tmp_path):
    faults = [(3.0, lambda s: s.cut("b1", "s1")), (8.0, lambda s: s.heal("b1", "s1"))]
    slow = {("p1", "b1"): 0.3, ("b1", "p1"): 0.3}  # p1 learns of b1's lost link 0.3 s late
    sim = run(tmp_path, faults, params={"link_timeout": 0.5}, delays=slow)
    assert history_violations(sim.events) == CLEAN
    t_cut = sim.rts["b1"].wall_ns() - int((sim.now - T0 - 3.0) * 1e9)
    side = [e for e in sim.ev("g_route", node="b1", cell="s1") if e["sideways"]]
    assert side and all(e["via"] == "b2" and e["t"] > t_cut for e in side)
    # link status tells p1 that b1 no longer reaches s1: p1 moves IB1 traffic to b2
    after = [e for e in sim.ev("g_route", node="p1", cell="ib1") if t_cut < e["t"] < t_cut + 5e9]
    assert after and {e["via"] for e in after} == {"b2"}


def test_filtered_subscribers_get_gapless_streams_without_nacks(tmp_path):
    from .harness import make_configs

    nodes = {"p1": {"neighbors": []}, "s1": {"neighbors": ["p1"]}}
    clients = {"pubs": {"role": "publisher", "count": 2, "attach": ["p1"], "rate_per_s": 100.0,
                        "extra": {"attr_space": 20}},
               "subs": {"role": "subscriber", "count": 3, "attach": ["s1"], "extra": {"filter_mod": 20}}}
    sim = Sim(make_configs(nodes, clients, params={"gct": 0.2, "nrt": 0.6}, state_root=str(tmp_path)))
    sim.start()
    sim.run_until(T0)
    sim.workload(5.0)
    sim.run_until(T0 + 7.0)
    assert history_violations(sim.events) == CLEAN
    d = sim.ev("g_deliver")
    assert len(d) == 3 * (2 * 500) // 20  # each subscriber gets 1/20 of the input
    assert sim.ev("g_nack") == []  # filtered D ticks reach s1 as F bracketing the next D
    assert max(e["t"] - e["pub_t"] for e in d) < (LOG_FORCE_S + 0.05) * 1e9


def test_restarted_publisher_process_resumes_without_reusing_seqs(tmp_path):
    sim = Sim(fig3(str(tmp_path)))
    sim.start()
    sim.run_until(T0)
    t0_wall = sim.rts["pubs"].wall_ns()
    sim.workload(6.0)
    sim.schedule(T0 + 2.0, lambda: sim.crash("pubs"))

    def restart() -> None:
        sim.restart("pubs")
        # what the controller sends a restarted node: the run's t0 and duration (t0 is past)
        from .harness import _run

        _run(sim.nodes["pubs"].start_workload(t0_wall, 6.0))

    sim.schedule(T0 + 3.0, restart)
    sim.run_until(T0 + 9.0)
    pubs = sim.ev("g_publish")
    keys = [(e["pubend"], e["seq"]) for e in pubs]
    assert len(keys) == len(set(keys))  # no seq is published twice
    ts = [(e["t"] - t0_wall) / 1e9 for e in pubs]
    assert max(ts) < 6.0 + 0.1  # ends with the run, not 6 s after the restart
    # 4 pubends at 25/s: about 2 s before the crash and 3 s after the restart, nothing in between
    assert not [t for t in ts if 2.05 < t < 2.95]
    assert 4 * 25 * 5 * 0.9 <= len(pubs) <= 4 * 25 * 5 * 1.1, len(pubs)
