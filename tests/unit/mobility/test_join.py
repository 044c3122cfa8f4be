"""Clients that join during the run (a mobile group's ``join`` window, docs/mobility.md): each
connects and subscribes at its drawn time after t0, then starts moving; nothing is lost or
duplicated for them (in-memory runtime); a group without ``join`` draws what it always drew."""

import pytest
from pubsub.harness import WALL0

from testbed.protocols.mobility.nodes.workloads import assign

from .harness import CHAIN, configs, duplicates, final_copies, missing, publishers, run

JOINING = {"m": {"count": 6, "workload": "random", "start": ["b1", "b6"], "routes": [["b1", "b6"]],
                 "pause": 1.0, "first_move": 1.0, "moving": "all", "seed": 3, "assign": "random",
                 "start_by": "client", "join": 3.0}}
AFTER = 0.5  # the harness starts the workload 0.5 s after the nodes


def test_clients_join_in_the_window_then_move_and_lose_nothing():
    sim = run(configs(CHAIN, JOINING, publishers(["b1", "b4", "b7"], rate=100.0)), duration=8.0)
    plan = {c["client"]: c for c in assign(dict(JOINING["m"], name="m"), list(CHAIN), 0)}
    subs = {s["client"]: (s["t"] - WALL0) / 1e9 - AFTER for s in sim.events("subscribe")}
    assert set(subs) == set(plan)
    for c, spec in plan.items():  # each subscribed at its own join time, inside the window
        assert 0 < spec["join_at"] < 3.0
        assert subs[c] == pytest.approx(spec["join_at"], abs=0.01)
    begins = sim.events("move_begin")
    first = {}
    for b in begins:
        first.setdefault(b["client"], (b["t"] - WALL0) / 1e9 - AFTER)
    assert set(first) == set(plan)
    for c, t in first.items():  # the first move comes `offset` after joining, never before
        assert t == pytest.approx(plan[c]["join_at"] + plan[c]["offset"], abs=0.01)
    ends = sim.events("move_end")
    assert len(ends) == len(begins) >= 15 and {e["outcome"] for e in ends} == {"commit"}
    assert duplicates(sim) == [] and missing(sim) == []
    assert {c: len(ns) for c, ns in final_copies(sim).items()} == {c: 1 for c in plan}


def test_without_join_every_client_subscribes_before_t0_and_the_draws_are_unchanged():
    plain = dict(JOINING["m"], name="m")
    plain.pop("join")
    sim = run(configs(CHAIN, {"m": {k: v for k, v in plain.items() if k != "name"}}, publishers(["b1"])),
              duration=2.0)
    assert all((s["t"] - WALL0) / 1e9 < AFTER for s in sim.events("subscribe"))
    a, b = assign(plain, list(CHAIN), 0), assign(dict(plain, join=3.0), list(CHAIN), 0)
    assert [dict(x, join_at=0.0) for x in b] == a  # the join draws come from their own stream
    assert all(x["join_at"] == 0.0 for x in a)


def test_join_is_validated():
    from pydantic import ValidationError

    from testbed.protocols.mobility.topology import MobileGroup

    with pytest.raises(ValidationError, match="zero or positive"):
        MobileGroup.model_validate({"count": 2, "join": "-1s"})
    with pytest.raises(ValidationError, match="join is for mobile subscribers"):
        MobileGroup.model_validate({"count": 2, "role": "publisher", "rate": "1/s", "join": "2s"})
