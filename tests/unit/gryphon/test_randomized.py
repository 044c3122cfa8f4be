"""Randomized Gryphon topologies in the simulated harness: topologies the examples never use.

A random tree of cells (the paper's virtual brokers, 1-3 replica brokers each; every member of a
cell is linked to every member of its parent cell, a link bundle), rooted at one or two PHBs (a
PHB hosting 1-3 publishers; a second PHB hangs below a random cell), SHBs (1-4, one broker each)
under random cells, subscribers pass-all or filtered; then one fault: a stall then crash and
restart of an intermediate broker, a crash and restart of a PHB, a cut and heal of a link, or
none. Guaranteed delivery must hold on the logged history (``history_violations``): every
subscriber gets each pubend's stream exactly once, gapless and in tick order, after recovery.

``PYTHONPATH=tests/unit .venv/bin/python -m tests.unit.gryphon.test_randomized N`` runs N seeds
and prints the failures.
"""

from __future__ import annotations

import random
import sys
import tempfile

import pytest

from .harness import Sim, history_violations, make_configs

T0 = 1.0
CLEAN = {"duplicates": 0, "order": 0, "gaps": 0, "unpublished": 0, "missing_streams": 0}
FAULTS = ("none", "ib-crash", "phb-crash", "cut")


def generate(seed: int, fault: str) -> dict:
    rng = random.Random(seed * 104729 + FAULTS.index(fault))
    nodes: dict[str, dict] = {}
    cells: dict[str, list[str]] = {}
    phbs = ["p1"]
    nodes["p1"] = {"neighbors": []}
    cells["p1"] = ["p1"]
    order = ["p1"]  # cells in creation order: a new one hangs below an earlier one (a tree)
    nb = 0
    for i in range(1, rng.randint(2, 4) + 1):  # intermediate cells
        cell = f"ib{i}"
        parent = rng.choice(order)
        members = []
        for _ in range(rng.randint(1, 3)):
            nb += 1
            b = f"b{nb}"
            members.append(b)
            nodes[b] = {"cell": cell, "neighbors": list(cells[parent])}
        for a, b in zip(members, members[1:]):  # cell peers
            nodes[b]["neighbors"].append(a)
        cells[cell] = members
        order.append(cell)
    if rng.random() < 0.4:  # a second PHB below a random intermediate cell
        parent = rng.choice(order[1:])
        nodes["p2"] = {"neighbors": list(cells[parent])}
        cells["p2"] = ["p2"]
        phbs.append("p2")
    shbs = []
    for i in range(1, rng.randint(1, 4) + 1):
        s = f"s{i}"
        nodes[s] = {"neighbors": list(cells[rng.choice(order[1:])])}
        shbs.append(s)
    clients = {"pubs": {"role": "publisher", "count": rng.randint(1, 3) * len(phbs), "attach": phbs,
                        "rate_per_s": 30.0, "extra": {"attr_space": 6}}}
    sub = {"role": "subscriber", "count": len(shbs) * rng.randint(1, 2), "attach": shbs}
    if rng.random() < 0.5:
        sub["extra"] = {"filter_mod": rng.choice([2, 3, 6])}
    clients["subs"] = sub
    ibs = [b for c in order[1:] for b in cells[c]]
    case = {"seed": seed, "fault": fault, "nodes": nodes, "clients": clients, "faults": []}
    at = round(rng.uniform(1.5, 3.5), 2)
    if fault == "ib-crash":
        b = rng.choice(ibs)
        case["faults"] = [(at, "stall", b), (at + 1.0, "crash", b), (at + rng.uniform(1.5, 3.0), "restart", b)]
    elif fault == "phb-crash":
        p = rng.choice(phbs)
        case["faults"] = [(at, "stall", p), (at + 0.5, "crash", p), (at + rng.uniform(1.5, 3.0), "restart", p)]
    elif fault == "cut":
        a = rng.choice(ibs + shbs)
        b = rng.choice(nodes[a]["neighbors"])
        case["faults"] = [(at, "cut", a, b), (at + rng.uniform(1.0, 3.0), "heal", a, b)]
    return case


def simulate(case: dict, duration: float = 6.0, tail: float = 8.0) -> Sim:
    params = {"gct": 0.2, "nrt": 0.6, "aet": 10.0, "dct": None, "link_timeout": 1.0}
    with tempfile.TemporaryDirectory(prefix="gryphon-random-") as d:
        sim = Sim(make_configs(case["nodes"], case["clients"], params=params, state_root=d))
        sim.start()
        sim.run_until(T0)
        sim.workload(duration)
        for f in case["faults"]:
            at, op, *args = f
            sim.schedule(T0 + at, (lambda op=op, args=args: getattr(sim, op)(*args)))
        sim.run_until(T0 + duration + tail)
    return sim


def check(case: dict) -> dict:
    sim = simulate(case)
    v = history_violations(sim.events)
    if not sim.ev("g_deliver"):
        v["no_delivery"] = 1
    return {k: n for k, n in v.items() if n}


SEEDS = range(1, 7)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_gryphon_topology_delivers_exactly_once(seed, fault):
    case = generate(seed, fault)
    assert check(case) == {}, case


def test_the_cases_vary():
    cases = [generate(s, f) for s in SEEDS for f in FAULTS]
    assert len({len(c["nodes"]) for c in cases}) >= 4
    assert any("p2" in c["nodes"] for c in cases) and any("filter_mod" in c["clients"]["subs"].get("extra", {})
                                                          for c in cases)
    assert any(len([n for n, d in c["nodes"].items() if d.get("cell") == "ib1"]) >= 2 for c in cases)


def test_the_checker_fails_when_a_subend_skips_gaps(monkeypatch):
    """Under the intermediate crash the checker sees a subend that delivers past its gaps."""
    from testbed.protocols.gryphon.nodes import streams

    from .harness import skip_gaps

    case = next(c for c in (generate(s, "ib-crash") for s in range(1, 40))
                if len([b for b in c["nodes"] if b.startswith("b")]) >= 2)
    assert check(case) == {}
    monkeypatch.setattr(streams.SubendStream, "_advance", skip_gaps)
    assert check(case).get("gaps", 0) > 0


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    fails = 0
    for f in FAULTS:
        for s in range(1, n + 1):
            got = check(generate(s, f))
            if got:
                fails += 1
                print(f, s, got, flush=True)
    print("failures:", fails, "of", len(FAULTS) * n)
