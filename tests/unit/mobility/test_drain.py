"""The run-end condition of a mobility broker (``status()["finished"]``, watched by the controller:
faults/schedule.py ``all_finished``): a broker is finished once its workload's time is over and no
move it began is open, so a run whose moves outlast ``quiesce`` (saturated brokers: Fig 10's 1,000
covering clients at paper scale took 11-12 s a move against a 3 s quiesce) waits for them, up to
``params.drain``, instead of stopping them half-way."""

from __future__ import annotations

from .harness import CHAIN, Sim, configs

# b3-b4 slow (1.5 s each way): a move b1 -> b6 crosses it several times, far longer than quiesce
SLOW = {("b3", "b4"): 1500.0, ("b4", "b3"): 1500.0}
MOBILE = {"m": {"count": 1, "workload": "random", "start": ["b1"], "routes": [["b1", "b6"]],
                "pause": 0.5, "first_move": 0.1, "moving": "all", "seed": 3, "assign": "random",
                "start_by": "client"}}


def finished(sim: Sim) -> dict[str, bool]:
    return {b: sim.nodes[b].status()["finished"] for b in CHAIN}


def open_sources(sim: Sim) -> set[str]:
    began = {e["mid"]: e["node"] for e in sim.events("move_begin")}
    ended = {e["mid"] for e in sim.events("move_end")}
    return {n for m, n in began.items() if m not in ended}


def test_a_broker_is_finished_when_its_time_is_over_and_no_move_it_began_is_open():
    sim = Sim(configs(CHAIN, MOBILE, quiesce=0.5, move_timeout=30.0), delay_ms=1.0, delays=SLOW)
    sim.start()
    sim.run_for(0.5)
    assert not any(finished(sim).values())  # no workload yet
    duration = 4.0
    sim.start_workload(0.0, duration)
    sim.run_for(duration - 0.2)
    assert not any(finished(sim).values())  # its time is not over
    # the workload's time is over with a move still open (it began before the quiesce; it takes
    # several crossings of the 1.5 s link): its source is not finished, every other broker is
    sim.run_for(0.4)
    src = open_sources(sim)
    assert len(src) == 1, sim.events("move_begin")
    assert finished(sim) == {b: b not in src for b in CHAIN}
    for _ in range(60):  # the move ends: every broker is finished
        sim.run_for(0.5)
        if not open_sources(sim):
            break
    assert not open_sources(sim) and all(finished(sim).values())
    ends = sim.events("move_end")
    assert ends[-1]["outcome"] == "commit" and ends[-1]["dur_ms"] > 2000
    sim.shutdown()


def test_a_broker_without_moves_is_finished_at_the_end_of_its_time():
    sim = Sim(configs(CHAIN, {}), delay_ms=1.0)
    sim.start()
    sim.run_for(0.5)
    sim.start_workload(0.0, 1.0)
    sim.run_for(0.9)
    assert not any(finished(sim).values())
    sim.run_for(0.2)
    assert all(finished(sim).values())
    sim.shutdown()


def test_the_run_may_wait_params_drain_past_its_duration(tmp_path):
    """``params.drain`` reaches the plan (default 30 s), and the controller waits at most that long
    past the duration (never less than the schedule's 2 s drain; a protocol without the key: 2 s)."""
    import dataclasses

    from testbed.faults.schedule import DRAIN_S, drain_s
    from testbed.topology.loader import plans

    from .harness import TOPOLOGY_HEAD

    def plan(params: str):
        p = tmp_path / "t.yaml"
        p.write_text(TOPOLOGY_HEAD + params)
        [pl] = plans(str(p), {}, None)
        return pl

    default = plan("  movement: reconfiguration\n")
    assert default.params["drain"] == 30.0 and drain_s(default) == 30.0
    assert drain_s(plan("  drain: 5s\n")) == 5.0
    assert drain_s(plan("  drain: 0.5s\n")) == DRAIN_S
    assert drain_s(dataclasses.replace(default, params={})) == DRAIN_S
