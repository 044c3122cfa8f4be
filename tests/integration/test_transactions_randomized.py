"""Randomized transactions topologies on real processes, every check of the protocol (Spark).

A few fixed seeds (issue #27); the larger sweep is ``scripts/transactions_sweep.py`` (its numbers
are in docs/transactions.md). Seed 201 draws 4 brokers, 2 instances x 2 threads, and (with a crash)
an interior broker b2 crashed at 1.5 s for 0.6 s; seed 200 draws 3 instances x 2 threads on 4
brokers, no crash. Both carry the §3.3 conflict workload.
"""

from __future__ import annotations

import pytest

from testbed.protocols.transactions.analysis.randomized import describe, generate
from testbed.protocols.transactions.sweep import run_and_check

# S-TX with a crash loses committed transactions begun while the restarted broker settles: an open
# bug of issue #27 (seed 201 here, seed 305 of the in-memory sweep; docs/transactions.md). The case
# stays, marked as the known failure it is, so its fix shows as an XPASS.
OPEN_STX_CRASH_BUG = pytest.mark.xfail(reason="issue #27: S-TX loses committed transactions begun while a "
                                              "restarted broker settles (open)", strict=False)
CASES = [(201, "dtx", True), pytest.param(201, "stx", True, marks=OPEN_STX_CRASH_BUG), (200, "stx", False),
         (200, "dtx", False)]


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("seed,variant,crash", CASES)
def test_random_transactions_topology_passes_every_check(seed, variant, crash, tmp_path):
    topo = generate(seed, variant, crash=crash, duration_s=10)
    r = run_and_check(topo, tmp_path)
    assert r["checks"] > 5, r
    assert r["passed"], (describe(seed, crash), r["failed"], r["examples"], r["run_dir"])


def test_cases_cover_the_issue():
    d = describe(201, True)
    assert d["crash_interior"] and d["instances"] * d["threads"] >= 4
    assert describe(200, False)["crash"] == "none"
