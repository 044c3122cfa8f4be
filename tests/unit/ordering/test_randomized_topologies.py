"""The generator of randomized ordering topologies: every one is valid and covers the ranges."""

from __future__ import annotations

from collections import Counter

import pytest

from testbed import api
from testbed.protocols.ordering.analysis.randomized import FAULTS, describe, generate, write

SEEDS = range(40)


@pytest.fixture(scope="module")
def drawn():
    return {s: generate(s) for s in SEEDS}


def test_same_seed_same_topology():
    assert generate(7) == generate(7) and generate(7) != generate(8)


def test_every_generated_topology_validates(drawn, tmp_path):
    for seed, topo in drawn.items():
        path = write(topo, tmp_path / f"t{seed}.yaml")
        text = api.validate(str(path))  # raises TopologyError with every problem
        assert "ordering" in text


def test_generator_covers_the_ranges(drawn):
    d = [describe(t) for t in drawn.values()]
    assert {x["sites"] for x in d} == {2, 3, 4, 5}
    assert {x["servers"] for x in d} == {1, 2, 3, 4, 5}
    assert {x["strategy"] for x in d} == {"range", "hash"}
    assert {x["fault"] for x in d} == set(FAULTS)
    assert {x["jitter"] for x in d} == {True, False}
    assert any(x["multi_attach"] for x in d) and any(not x["multi_attach"] for x in d)
    assert max(x["max_delay_ms"] for x in d) > 100 and min(x["max_delay_ms"] for x in d) < 60
    per_site = Counter()
    for t in drawn.values():
        for site in t["sites"]:
            per_site[sum(1 for n in t["nodes"].values() if n["role"] == "broker" and n["site"] == site)] += 1
    assert set(per_site) == {1, 2, 3}



def test_faults_can_be_forced():
    assert "faults" not in generate(3, fault="none")
    assert [f.get("pause") for f in generate(3, fault="pause")["faults"]][0]
    kinds = [next(iter(k for k in f if k not in ("at", "for"))) for f in generate(3, fault="crash")["faults"]]
    assert kinds == ["crash", "restart"]
    with pytest.raises(ValueError):
        generate(3, fault="flood")


def test_ens_settle_shorter_than_the_broker_tree_is_an_error(tmp_path):
    """Found by the randomized runs: brokers 0.23 s apart, ens_settle 0.3 s -- a subscriber's
    dummy was published where the other subscribers' subscriptions had not arrived yet."""
    from testbed.errors import TopologyError

    topo = generate(3, fault="none")
    topo["params"]["ens_settle"] = "300ms"
    path = write(topo, tmp_path / "short.yaml")
    with pytest.raises(TopologyError) as e:
        api.validate(str(path))
    msg = str(e.value)
    assert "short.yaml:" in msg and "params.ens_settle" in msg and "at least 0.7s" in msg
    topo["params"]["ens_settle"] = "0.7s"
    api.validate(str(write(topo, tmp_path / "ok.yaml")))
