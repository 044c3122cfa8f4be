"""Shrink a failing case to a minimal one: fewer faults, shorter and earlier windows, fewer
clients, smaller link delays, while the same property still fails.

Pure: the caller passes ``fails(cases) -> list[bool | None]`` that runs candidate cases (in
order; ``None`` = could not tell, e.g. the run errored) and says which still violate the
property. The passes, in this order, repeated until a whole round changes nothing or the
budget of runs is spent:

1. drop one fault (a crash with its restart, a set_link with its restore);
2. drop a crash's restart / a set_link's restore (the change then lasts to the end);
3. shorten a window to half (not below 0.5 s) -- a crash's down time, a set_link's duration;
4. move a fault earlier: its start to half (not before 0.5 s);
5. lower a client group's count: to 1, else to half, else by one;
6. lower the link delays: every delay and jitter of ``links`` to half, then jitter to 0.

Within a pass candidates are tried in a fixed order and the first that still fails is taken
(``jobs`` candidates are run at a time; the lowest-numbered failing one wins), so the result
is deterministic given the seed and the runs' outcomes. A candidate already run (the same
topology) is not run again.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from testbed.explore.generate import MIN_WINDOW_S, START_S, Case, Fault, fmt_time
from testbed.topology.units import parse_time

Fails = Callable[[list[Case]], list["bool | None"]]


def case_key(case: Case) -> str:
    """A case's identity: the sha256 of its whole topology (faults and seed included)."""
    return hashlib.sha256(json.dumps(case.topology(), sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class ShrinkResult:
    case: Case
    runs: int = 0
    steps: list[str] = field(default_factory=list)
    exhausted: bool = False  # the budget ran out before a fixpoint


def _r1(x: float) -> float:
    return round(x, 1)


def _without(case: Case, i: int) -> Case:
    return case.with_faults(case.faults[:i] + case.faults[i + 1:])


def _swap(case: Case, i: int, f: Fault) -> Case:
    return case.with_faults(case.faults[:i] + (f,) + case.faults[i + 1:])


def candidates(case: Case) -> Iterator[tuple[str, Case]]:
    """Every simplification of ``case`` in the order the passes try them (see the module docstring)."""
    fs = case.faults
    for i, f in enumerate(fs):
        yield f"drop {f.describe()}", _without(case, i)
    for i, f in enumerate(fs):
        if f.kind in ("crash", "set_link") and f.for_ is not None:
            what = "restart" if f.kind == "crash" else "restore"
            yield f"drop the {what} of {f.describe()}", _swap(case, i, replace(f, for_=None))
    for i, f in enumerate(fs):
        if f.for_ is not None and f.for_ > MIN_WINDOW_S:
            new = max(MIN_WINDOW_S, _r1(f.for_ / 2))
            if new < f.for_:
                yield f"shorten {f.describe()} to {new:g}s", _swap(case, i, replace(f, for_=new))
    for i, f in enumerate(fs):
        if f.at > START_S:
            new = max(START_S, _r1(f.at / 2))
            if new < f.at:
                yield f"move {f.describe()} to {new:g}s", _swap(case, i, replace(f, at=new))
    for g, c in (case.topo.get("clients") or {}).items():
        n = int(c.get("count", 1))
        for new in sorted({1, n // 2, n - 1}):
            if 1 <= new < n:
                t = copy.deepcopy(case.topo)
                t["clients"][g]["count"] = new
                yield f"clients {g}: count {n} -> {new}", case.with_topo(t)
    halved = _links_scaled(case.topo, 0.5)
    if halved is not None:
        yield "halve every link delay and jitter", case.with_topo(halved)
    nojit = _links_no_jitter(case.topo)
    if nojit is not None:
        yield "set every link jitter to 0", case.with_topo(nojit)


def _blocks(t: dict[str, Any]) -> list[dict[str, Any]]:
    links = t.get("links") or {}
    return [b for b in [links.get("default"), *(links.get("rules") or []), links.get("clients")] if isinstance(b, dict)]


def _links_scaled(topo: dict[str, Any], k: float) -> dict[str, Any] | None:
    t = copy.deepcopy(topo)
    changed = False
    for b in _blocks(t):
        for key in ("delay", "jitter"):
            if b.get(key) is not None:
                v = parse_time(b[key])
                if v >= 0.0002:  # 0.2 ms: below that, halving changes nothing worth a run
                    b[key] = fmt_time(round(v * k, 4))
                    changed = True
    return t if changed else None


def _links_no_jitter(topo: dict[str, Any]) -> dict[str, Any] | None:
    t = copy.deepcopy(topo)
    changed = False
    for b in _blocks(t):
        if b.get("jitter") is not None and parse_time(b["jitter"]) > 0:
            b["jitter"] = "0ms"
            changed = True
    return t if changed else None


def shrink(case: Case, fails: Fails, *, max_runs: int = 40, jobs: int = 1,
           on_step: Callable[[str, Case], None] | None = None,
           stop: Callable[[], bool] | None = None) -> ShrinkResult:
    """The smallest case reachable from ``case`` by the passes above that still fails.

    ``stop()`` true (e.g. a time budget spent) ends the shrink like ``max_runs`` does."""
    res = ShrinkResult(case)
    seen: set[str] = {case_key(case)}
    while True:
        progressed = False
        pending = [(why, c) for why, c in candidates(res.case) if case_key(c) not in seen]
        while pending:
            if res.runs >= max_runs or (stop is not None and stop()):
                res.exhausted = True
                return res
            batch = pending[:max(1, min(jobs, max_runs - res.runs))]
            pending = pending[len(batch):]
            for _, c in batch:
                seen.add(case_key(c))
            verdicts = fails([c for _, c in batch])
            res.runs += len(batch)
            hit = next((k for k, v in enumerate(verdicts) if v), None)
            if hit is not None:
                why, res.case = batch[hit]
                res.steps.append(why)
                if on_step is not None:
                    on_step(why, res.case)
                progressed = True
                break  # candidates are recomputed from the smaller case
        if not progressed:
            return res
