"""Randomized ordering topologies on real processes, checked for TNO, completeness, liveness.

A small fixed-seed set (about 15 s each on the 2-core machine); the larger sweep is
``scripts/ordering_sweep.py`` (its summary is in docs/ordering.md). The seeds are chosen
to cover what issue #11 broke: three TM servers with hash placement and unequal delays,
client groups on several brokers, a paused TM server, a crashed and restarted one.
"""

from __future__ import annotations

import pytest

from testbed.protocols.ordering.analysis.randomized import describe, generate
from testbed.protocols.ordering.sweep import run_and_check

CASES = [(3, "none"), (2, "pause"), (8, "crash")]


@pytest.mark.slow
@pytest.mark.parametrize("seed,fault", CASES)
def test_random_topology_keeps_tno_completeness_liveness(seed, fault, tmp_path):
    topo = generate(seed, fault=fault)
    d = describe(topo)
    r = run_and_check(topo, tmp_path)
    assert r["notified"] > 500, (d, r["run_dir"])
    for prop in ("tno", "completeness", "liveness"):
        assert r[prop]["passed"], (prop, d, r[prop], r["run_dir"])
    assert r["completeness"]["expected"] > 500


def test_cases_cover_the_issue():
    d = {c: describe(generate(c[0], fault=c[1])) for c in CASES}
    assert d[(3, "none")]["servers"] == 3 and d[(3, "none")]["strategy"] == "hash"
    assert all(x["multi_attach"] for x in d.values())
    assert {x["fault"] for x in d.values()} == {"none", "pause", "crash"}
