"""Randomized mobility topologies on the in-memory runtime: broker trees the examples never use
(3-9 brokers, any shape), mobile clients starting at random brokers and moving either between
two random brokers or to any broker, several clients moving at once (each move coordinated by
its own source: several coordinators at a time), publishers and stationary subscribers at random
brokers, both movement protocols; and with a crash and restart of a random broker.

Checked on the logged histories with the plain-Python predicates of the harness:

- no fault: every move commits; no duplicate; reconfiguration loses nothing, covering loses only
  inside its moves' windows; one started copy per client at the end; no tentative entry left;
- a broker crashes and restarts: no duplicate; at most one started copy per client; every move
  ends (commit, abort or reject); no tentative entry left after the restart's re-sync; no loss
  outside the moves' windows and the fault's (crash to restart + the move timeout).

``PYTHONPATH=tests/unit .venv/bin/python -m tests.unit.mobility.test_randomized N`` runs N seeds of each
and prints the failures.
"""

from __future__ import annotations

import collections
import os
import random
import sys
import tempfile

import pytest

from .harness import configs, duplicates, final_copies, missing, run

MOVE_TIMEOUT_S = 2.0


def generate(seed: int, movement: str, crash: bool = False) -> dict:
    """One random case: brokers (a tree), the groups, the movement and (``crash``) the fault."""
    rng = random.Random(seed * 7919 + (1 if movement == "covering" else 0) + (2 if crash else 0))
    n = rng.randint(3, 9)
    names = [f"b{i}" for i in range(1, n + 1)]
    brokers = {names[0]: []}
    for i, b in enumerate(names[1:], start=1):
        brokers[b] = [rng.choice(names[:i])]  # a random tree: each broker joins an earlier one
    starts = rng.sample(names, k=min(len(names), rng.randint(1, 3)))
    routes = []
    if rng.random() < 0.5:  # clients shuttle between two brokers; otherwise they go anywhere
        a, b = rng.sample(names, 2)
        routes = [[a, b]]
        starts = [a, b]
    mobile = {"m": {"count": rng.randint(2, 8), "workload": "random", "start": starts, "routes": routes,
                    "pause": round(rng.uniform(0.4, 1.5), 2), "first_move": round(rng.uniform(0.3, 1.2), 2),
                    "moving": "all", "seed": seed, "assign": "random", "start_by": "client"}}
    pubs = rng.sample(names, k=min(len(names), rng.randint(1, 3)))
    groups = {"pubs": {"role": "publisher", "count": len(pubs), "attach": pubs, "rate_per_s": 50.0,
                       "extra": {"attrs": {"w": "choice(cov,tree,chain,dist)", "x": "uniform(0,100)"}}},
              "stay": {"role": "subscriber", "count": 2, "attach": rng.sample(names, k=min(2, len(names))),
                       "filter": "[w,eq,'cov']"}}
    case = {"seed": seed, "movement": movement, "brokers": brokers, "mobile": mobile, "groups": groups,
            "duration": 6.0, "crash": None}
    if crash:
        victim = rng.choice(names)
        at = round(rng.uniform(1.0, 3.0), 2)
        case["crash"] = (victim, at, round(at + rng.uniform(0.3, 1.5), 2))
    return case


def _t0(sim) -> int:
    return min(r["t"] for r in sim.logs)


def _crash_ns(sim, crash) -> tuple[int, int]:
    """(down, up) of the crash in log time (run(): the workload starts 0.5 s after the first event)."""
    t0 = _t0(sim)
    return t0 + int((0.5 + crash[1]) * 1e9), t0 + int((0.5 + crash[2]) * 1e9)


def _attributed_moves(sim, case) -> set[str]:
    """Moves the crash may leave without an end (docs/mobility.md, P2): its source crashed after it
    began; or (covering, which has no timeout) the crashed broker is on its path and it began
    while the broker was down or just before (its messages across the broker were dropped)."""
    if case["crash"] is None:
        return set()
    victim = case["crash"][0]
    down, up = _crash_ns(sim, case["crash"])
    out = set()
    for b in sim.events("move_begin"):
        if b["src"] == victim and b["t"] <= down:
            out.add(b["mid"])
        elif case["movement"] == "covering" and victim in b["path"] and down - int(0.5e9) <= b["t"] <= up:
            out.add(b["mid"])
    return out


def _lost_clients(sim, case, attributed: set[str]) -> dict[str, int]:
    """Clients the crash may take (section 4.1): hosted by the crashed broker when it crashed, or
    moving in an attributed move; client -> from when."""
    if case["crash"] is None:
        return {}
    victim = case["crash"][0]
    down, _ = _crash_ns(sim, case["crash"])
    at: dict[str, str] = {}
    for r in sim.events("client_state"):
        if r["t"] <= down:
            if r["state"] == "started":
                at[r["client"]] = r["node"]
            elif at.get(r["client"]) == r["node"]:
                at.pop(r["client"])
    out = {c: down for c, n in at.items() if n == victim}
    for b in sim.events("move_begin"):
        if b["mid"] in attributed:
            out[b["client"]] = min(out.get(b["client"], b["t"]), b["t"])
    return out


def _windows(sim, case, lost: dict[str, int]) -> dict[str, list[tuple[int, int]]]:
    """client -> [(lo, hi)] ns where a loss is the protocol's (a move) or the fault's (the crash)."""
    ends = {e["mid"]: e["t"] for e in sim.events("move_end")}
    last = max(r["t"] for r in sim.logs)
    out: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for b in sim.events("move_begin"):
        out[b["client"]].append((b["t"] - int(0.1e9), ends.get(b["mid"], last) + int(0.1e9)))
    if case["crash"] is not None:
        down, up = _crash_ns(sim, case["crash"])
        for c in {s["client"] for s in sim.events("subscribe")}:
            # from 0.1 s before the crash: publications on their way to the broker died with it
            out[c].append((down - int(0.1e9), up + int((MOVE_TIMEOUT_S + 0.5) * 1e9)))
    for c, t in lost.items():
        out[c].append((t, last))
    return out


def simulate(case: dict):
    cfgs = configs(case["brokers"], case["mobile"], case["groups"], movement=case["movement"],
                   move_timeout=MOVE_TIMEOUT_S)
    actions = []
    if case["crash"]:
        victim, down, up = case["crash"]
        actions = [(down, lambda s: s.crash(victim)), (up, lambda s: s.restart(victim))]
    with tempfile.TemporaryDirectory(prefix="mobility-random-") as d:
        for n, c in cfgs.items():  # a node's incarnations are counted there: a restarted broker hosts no clients
            c["state_dir"] = os.path.join(d, n)
        return run(cfgs, duration=case["duration"], actions=actions, tail=MOVE_TIMEOUT_S + 1.0)


def check(case: dict) -> list[str]:
    """The violations of one case (empty: it passed)."""
    return violations(simulate(case), case)


def violations(sim, case: dict) -> list[str]:
    bad = []
    begins, ends = sim.events("move_begin"), sim.events("move_end")
    outcomes = collections.Counter(e["outcome"] for e in ends)
    attributed = _attributed_moves(sim, case)
    lost = _lost_clients(sim, case, attributed)
    if not begins:
        bad.append("no move began")
    if dup := duplicates(sim):
        bad.append(f"{len(dup)} duplicate deliveries, e.g. {dup[0]}")
    if case["crash"] is None and set(outcomes) != {"commit"}:
        bad.append(f"outcomes {dict(outcomes)}")
    if open_ := {e["mid"] for e in begins} - {e["mid"] for e in ends} - attributed:
        bad.append(f"moves that never ended: {sorted(open_)[:3]}")
    copies = final_copies(sim)
    clients = {f"m-{i}" for i in range(case["mobile"]["m"]["count"])}
    if many := {c: ns for c, ns in copies.items() if len(ns) > 1}:
        bad.append(f"more than one started copy: {many}")
    if gone := sorted(c for c in clients if not copies.get(c) and c not in lost):
        bad.append(f"clients lost without a crash to blame: {gone}")
    dumps = {}
    for d in sim.events("rt_dump"):
        dumps[d["node"]] = d
    left = {n: [e for e in d["tentative"] if e[0] not in attributed] for n, d in dumps.items()}
    if left := {n: es for n, es in left.items() if es}:
        bad.append(f"tentative entries left: {left}")
    missed = missing(sim)
    win = _windows(sim, case, lost)
    if case["movement"] == "reconfiguration" and case["crash"] is None:
        if missed:
            bad.append(f"{len(missed)} lost, e.g. {missed[0]}")
    elif outside := [x for x in missed if not any(lo <= x[2] <= hi for lo, hi in win.get(x[0], ()))]:
        bad.append(f"{len(outside)} lost outside every move/fault window, e.g. {outside[0]}")
    return bad


SEEDS = range(1, 9)


@pytest.mark.parametrize("movement", ["reconfiguration", "covering"])
@pytest.mark.parametrize("seed", SEEDS)
def test_random_mobility_topology_without_faults(seed, movement):
    case = generate(seed, movement)
    assert check(case) == [], case


@pytest.mark.parametrize("movement", ["reconfiguration", "covering"])
@pytest.mark.parametrize("seed", SEEDS)
def test_random_mobility_topology_with_a_crash_and_restart(seed, movement):
    case = generate(seed, movement, crash=True)
    assert check(case) == [], case


def test_the_cases_vary():
    cases = [generate(s, "reconfiguration") for s in SEEDS]
    assert len({len(c["brokers"]) for c in cases}) >= 3
    assert any(c["mobile"]["m"]["routes"] for c in cases) and any(not c["mobile"]["m"]["routes"] for c in cases)
    assert all(generate(s, "covering", crash=True)["crash"] for s in SEEDS)


def test_the_checker_fails_on_broken_histories():
    """The checker can fail: a clean history with one delivery doubled, one dropped outside any
    move, and a second started copy of a client is reported three ways."""
    case = generate(1, "reconfiguration")
    sim = simulate(case)
    assert violations(sim, case) == []
    delivers = [r for r in sim.logs if r["ev"] == "deliver" and r["client"].startswith("stay")]
    sim.logs.append(dict(delivers[0]))
    assert any("duplicate" in v for v in violations(sim, case))
    sim.logs.remove(delivers[0])
    sim.logs.remove(delivers[0])  # both copies gone: a loss (a stationary subscriber: no move window)
    assert any("lost" in v for v in violations(sim, case))
    sim.logs.append(dict(delivers[0]))
    st = next(r for r in sim.logs if r["ev"] == "client_state" and r["state"] == "started")
    other = next(b for b in case["brokers"] if b != st["node"])
    sim.logs.append(dict(st, node=other, t=max(r["t"] for r in sim.logs) + 1))
    assert any("more than one started copy" in v for v in violations(sim, case))


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    fails = 0
    for crash in (False, True):
        for mv in ("reconfiguration", "covering"):
            for s in range(1, n + 1):
                c = generate(s, mv, crash)
                b = check(c)
                if b:
                    fails += 1
                    print(mv, "crash" if crash else "clean", s, b[:3], flush=True)
    print("failures:", fails, "of", 4 * n)
