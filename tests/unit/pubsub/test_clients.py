"""Client host pieces: attribute generators, derived advertisements, attachment, re-issue."""

import random

import pytest

from testbed.protocols.pubsub.nodes.clients import advertisement_for, make_attr_source, parse_generator
from testbed.protocols.pubsub.nodes.filters import matches, parse

from .harness import Sim, topology


def test_generators_and_derived_advertisement_cover_every_draw():
    spec = {"class": "STOCK", "n": 3, "price": "uniform(10, 20)", "sym": "choice(IBM,'MSFT')",
            "lvl": "choice(1,2.5,4)"}
    gens = {a: parse_generator(s) for a, s in spec.items()}
    assert gens["price"] == ("uniform", [10.0, 20.0])
    assert gens["sym"] == ("choice", ["IBM", "MSFT"])
    assert gens["lvl"] == ("choice", [1, 2.5, 4])
    adv = parse(advertisement_for(gens))
    assert adv == parse("[class,eq,'STOCK'],[n,eq,3],[price,>=,10.0],[price,<=,20.0],"
                        "[sym,isPresent,''],[lvl,>=,1],[lvl,<=,4]")
    draw = make_attr_source(gens, random.Random(3))
    for _ in range(200):
        a = draw()
        assert matches(adv, a), a
        assert 10 <= a["price"] <= 20 and a["sym"] in ("IBM", "MSFT")
    with pytest.raises(ValueError, match="uniform takes two numbers"):
        parse_generator("uniform(1)")
    with pytest.raises(ValueError, match="an attribute value is a number"):
        parse_generator(True)


def test_clients_attach_round_robin_and_bad_config_is_one_line():
    cfgs = topology({"b1": ["b2"], "b2": ["b1"]},
                    {"subs": {"role": "subscriber", "count": 5, "attach": ["b1", "b2"], "filter": "[x,>,1]"}})
    sim = Sim(cfgs)
    sim.start()
    sim.run_for(0.1)
    host = sim.nodes["subs"]
    assert host.broker_of == {"subs-0": "b1", "subs-1": "b2", "subs-2": "b1", "subs-3": "b2", "subs-4": "b1"}
    assert [r["broker"] for r in sim.events("subscribe")] == ["b1", "b2", "b1", "b2", "b1"]
    assert host.status()["subscriptions"] == 5
    bad = topology({"b1": []}, {"subs": {"role": "subscriber", "count": 1, "attach": ["b1"], "filter": "[x,>,]"}})
    with pytest.raises(ValueError, match="col 6"):
        Sim(bad).start()


def test_client_process_restart_reissues_same_ids_without_duplicates():
    cfgs = topology({"b1": []}, {
        "pubs": {"role": "publisher", "count": 1, "attach": ["b1"], "rate_per_s": 20,
                 "extra": {"attrs": {"x": 5}}},
        "subs": {"role": "subscriber", "count": 2, "attach": ["b1"], "filter": "[x,>,1]"}})
    sim = Sim(cfgs)
    sim.start()
    sim.run_for(0.2)
    sim.start_workload(0.0, 3.0)
    sim.run_for(1.0)
    sim.crash("subs")
    sim.run_for(0.2)
    sim.restart("subs")
    sim.run_for(2.0)
    b1 = sim.nodes["b1"]
    assert sorted(b1.table.prt) == ["subs-0:s1", "subs-1:s1"]  # same ids, one entry each
    dl = [(r["client"], r["pub_id"]) for r in sim.events("deliver")]
    assert len(dl) == len(set(dl)) and len(dl) > 60


def test_restarted_publisher_resumes_the_schedule_and_ends_with_the_run():
    cfgs = topology({"b1": []}, {
        "pubs": {"role": "publisher", "count": 1, "attach": ["b1"], "rate_per_s": 10,
                 "extra": {"attrs": {"x": 5}}},
        "subs": {"role": "subscriber", "count": 1, "attach": ["b1"], "filter": "[x,>,1]"}})
    sim = Sim(cfgs)
    sim.start()
    sim.run_for(0.2)
    t0 = sim.start_workload(0.0, 4.0)
    sim.run_for(1.0)
    sim.crash("pubs")
    sim.run_for(1.0)
    sim.restart("pubs")
    sim.run_for(0.1)
    # what the controller does after a restart: the same t0 and duration, now in the past
    sim.drive(sim.nodes["pubs"].start_workload(t0, 4.0))
    sim.run_for(5.0)
    pubs = [r for r in sim.events("publish")]
    ts = [(r["t"] - t0) / 1e9 for r in pubs]
    assert max(ts) < 4.0  # the restarted process stops at t0 + duration, not restart + duration
    # about 10 before the crash and 10/s from the restart (~2.1 s) to the end: no burst of the
    # publications that fell due while it was down
    assert 25 <= len(pubs) <= 32, len(pubs)
    assert not [t for t in ts if 1.05 < t < 2.05]
