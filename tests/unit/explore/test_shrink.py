"""The shrinker, driven by a property known in advance (a predicate standing in for the runs):
it drops every fault the failure does not need, shortens and moves what is left, lowers counts
and delays, stays within its budget, and is deterministic."""

from __future__ import annotations

from pathlib import Path

from testbed.explore.files import load_base
from testbed.explore.generate import Case, Fault, base_topology
from testbed.explore.shrink import candidates, case_key, shrink
from testbed.topology.units import parse_time

ROOT = Path(__file__).resolve().parents[3]


def _case() -> Case:
    base = base_topology(load_base(ROOT / "topologies" / "smoke.yaml")[0])
    faults = (Fault("pause", 1.0, 2.0, ("b5",)),
              Fault("crash", 2.0, 3.0, ("b3",)),
              Fault("cut", 2.5, 1.5, ("b1", "b2"), close=True),
              Fault("set_link", 4.0, 2.0, ("b1", "b5"), delay=0.3, jitter=0.02, restore=(0.04, 0.005)))
    return Case(index=4, seed=99, topo=base, faults=faults)


def _needs_b3_restarted(c: Case) -> bool:
    """The 'bug': b3 crashes and comes back while at least 2 subscribers of sub-cheap exist."""
    crash = [f for f in c.faults if f.kind == "crash" and f.target == ("b3",) and f.for_ is not None]
    return bool(crash) and int(c.topo["clients"]["sub-cheap"]["count"]) >= 2


def _oracle(pred, log):
    def fails(cases):
        log.extend(case_key(c) for c in cases)
        return [pred(c) for c in cases]
    return fails


def test_shrinks_to_the_one_fault_the_failure_needs():
    log: list[str] = []
    res = shrink(_case(), _oracle(_needs_b3_restarted, log), max_runs=200)
    m = res.case
    assert [f.kind for f in m.faults] == ["crash"] and m.n_entries == 2
    f = m.faults[0]
    assert (f.at, f.for_) == (0.5, 0.5)  # moved as early and shortened as far as the passes go
    assert m.topo["clients"]["sub-cheap"]["count"] == 2  # lowered, but not below what fails
    assert all(c["count"] == 1 for g, c in m.topo["clients"].items() if g != "sub-cheap")
    links = m.topo["links"]
    assert parse_time(links["default"]["delay"]) < 0.0002 and parse_time(links["default"]["jitter"]) == 0
    assert not res.exhausted and res.runs == len(log) and len(set(log)) == len(log)  # nothing run twice
    assert res.steps[0].startswith("drop pause b5")


def test_is_deterministic_and_batches_pick_the_first_failing_candidate():
    a = shrink(_case(), _oracle(_needs_b3_restarted, []), max_runs=200)
    b = shrink(_case(), _oracle(_needs_b3_restarted, []), max_runs=200, jobs=3)
    assert a.steps == b.steps and case_key(a.case) == case_key(b.case)


def test_stops_at_its_budget_with_what_it_has():
    res = shrink(_case(), _oracle(_needs_b3_restarted, []), max_runs=3)
    assert res.exhausted and res.runs == 3
    assert res.case.n_entries < _case().n_entries


def test_no_verdict_is_not_a_failure():
    res = shrink(_case(), lambda cs: [None] * len(cs), max_runs=100)
    assert res.case == _case() and res.steps == []


def test_candidates_never_repeat_the_case_itself():
    c = _case()
    keys = [case_key(x) for _, x in candidates(c)]
    assert case_key(c) not in keys
