"""The scheduling policy of `reproduce` (testbed/experiments/schedule.py) on fake work items: a
virtual clock drives ``pick`` (each item takes its given time), and the schedule it makes is checked
for the rules: an alone item overlaps nothing, the CPU budget and the runs-at-a-time caps hold, a
paper's analysis comes after all its other items, order; ``execute`` with threads: one group's
failure costs only that group's pending items, an interrupt stops everything."""

import threading

import pytest

import testbed.experiments.schedule as S
from testbed.experiments.schedule import Item, Pool, execute, pick


def simulate(items, budget, jobs=None, caps=None, dur=None, policy=None):
    return S.simulate(items, dur or {}, budget=budget, jobs=jobs, caps=caps, policy=policy)


def violations(spans, budget, jobs=None, caps=None):
    """Every rule the schedule breaks, as text (empty: none)."""
    out = []
    points = sorted({s for s, _, _ in spans.values()})
    for t in points:
        on = [it for s, e, it in spans.values() if s <= t < e]
        alone = [it for it in on if it.alone]
        if alone and len(on) > 1:
            out.append(f"t={t}: {alone[0].name} alone beside {[i.name for i in on if i is not alone[0]]}")
        if len(on) > 1 and sum(i.cpu for i in on) > budget + 1e-9:
            out.append(f"t={t}: {sum(i.cpu for i in on)} cores > {budget}")
        if jobs is not None and len(on) > 1 and sum(i.slots for i in on) > jobs:
            out.append(f"t={t}: more than {jobs} runs")
        for g, cap in (caps or {}).items():
            mine = [i for i in on if i.group == g]
            if len(mine) > 1 and sum(i.slots for i in mine) > cap:
                out.append(f"t={t}: {g} over its cap {cap}")
        keys = [i.exclusive for i in on if i.exclusive]
        if len(keys) != len(set(keys)):
            out.append(f"t={t}: two items of one exclusive key")
    for name, (s, _, it) in spans.items():
        if it.last:
            later = [n for n, (_, e, o) in spans.items() if o.group == it.group and o is not it and e > s]
            if later:
                out.append(f"{name} started before {later} ended")
    return out


def runs(group, n, cpu=0.3, alone=False, rank=None):
    return [Item(f"{group}{k}", group, cpu=cpu, alone=alone, rank=rank if rank is not None else (1 if alone else 3))
            for k in range(n)]


def analysis(group):
    return Item(f"{group}-analysis", group, cpu=1.0, slots=0, kind="analysis", exclusive="analysis", last=True, rank=2)


def four_papers():
    return [*runs("g", 4, alone=True), analysis("g"), *runs("o", 3, alone=True), analysis("o"),
            *runs("m", 8), analysis("m"), *runs("t", 8, cpu=0.4), analysis("t")]


def test_a_whole_reproduction_keeps_every_rule():
    caps = {"m": 2, "t": 2}
    spans = simulate(four_papers(), budget=2.0, caps=caps)
    assert violations(spans, 2.0, caps=caps) == []
    # the shared papers ran side by side: a run of m and one of t at the same time
    assert any(sm < et and st < em for sm, em, a in spans.values() if a.group == "m" and a.kind == "run"
               for st, et, b in spans.values() if b.group == "t" and b.kind == "run")
    # the alone runs went one after the other, first (rank 1), before any shared run
    alone_end = max(e for _, e, i in spans.values() if i.alone)
    assert alone_end == 7.0 and min(s for s, _, i in spans.values() if i.kind == "run" and not i.alone) >= alone_end


def test_the_checker_sees_a_schedule_that_breaks_the_rules():
    """The same reproduction under a policy that ignores 'alone', the budget and 'last': the checker fails it."""
    def greedy(pending, running, **kw):
        return list(pending)

    bad = violations(simulate(four_papers(), 2.0, policy=greedy), 2.0, caps={"m": 2})
    assert any("alone beside" in v for v in bad) and any("cores >" in v for v in bad)
    assert any("over its cap" in v for v in bad) and any("started before" in v for v in bad)
    assert any("exclusive key" in v for v in bad)


def test_an_alone_item_waits_for_an_empty_machine_and_blocks_what_comes_after_it():
    busy = Item("m0", "m", cpu=0.3)
    later = runs("m", 2, rank=3)
    alone = Item("g0", "g", alone=True, rank=1)
    assert pick([alone, *later], [busy], budget=2.0) == []  # the machine empties for it
    assert pick([alone, *later], [], budget=2.0) == [alone]  # then it runs with nothing else
    assert pick(later, [alone], budget=2.0) == []


def test_the_budget_holds_and_the_head_of_the_line_is_not_overtaken():
    items = runs("m", 10, cpu=0.5)
    assert len(pick(items, [], budget=2.0)) == 4
    big = Item("a", "x", cpu=1.5, slots=0, kind="analysis", rank=2)
    small = runs("m", 3, cpu=0.2)
    running = [Item("r", "m", cpu=1.0)]
    assert pick([big, *small], running, budget=2.0) == []  # 1.0 + 1.5 > 2: it waits, nothing passes it
    assert pick([big], [], budget=1.0) == [big]  # larger than the budget: alone on an empty machine


def test_caps_and_jobs_pass_an_item_over_without_blocking_the_others():
    m, t = runs("m", 3, cpu=0.1), runs("t", 3, cpu=0.1)
    got = pick([*m, *t], [], budget=2.0, caps={"m": 1, "t": 2})
    assert [i.name for i in got] == ["m0", "t0", "t1"]
    got = pick([*m, *t], [], budget=2.0, jobs=2, caps={"m": 5, "t": 5})
    assert [i.name for i in got] == ["m0", "m1"]
    search = Item("s", "t", cpu=0.6, slots=2, kind="compute")
    assert pick([search], [], budget=2.0, caps={"t": 1}) == [search]  # more slots than the cap: alone in its scope


def test_analysis_after_the_groups_items_even_those_added_later():
    made = []

    def done(_):  # a made run adds a batch of per-run analyses once two are made
        made.append(1)
        return [Item(f"batch{len(made)}", "g", cpu=1.0, slots=0, kind="analysis", exclusive="analysis", rank=0)] if len(made) == 2 else []

    items = [Item(f"g{k}", "g", cpu=0.3, done=done) for k in range(2)] + [analysis("g")]
    spans = simulate(items, budget=2.0, dur={"g0": 1.0, "g1": 3.0})
    assert spans["batch2"][0] == 3.0 and spans["g-analysis"][0] == 4.0
    assert violations(spans, 2.0) == []


def test_exclusive_items_never_run_together_and_do_not_block_the_others():
    s1, s2 = (Item(f"s{k}", "t", cpu=0.2, kind="compute", exclusive="compute:t") for k in (1, 2))
    r = Item("r", "t", cpu=0.2)
    assert pick([s1, s2, r], [], budget=2.0) == [s1, r]
    spans = simulate([s1, s2, r], budget=2.0)
    assert spans["s2"][0] == spans["s1"][1] and violations(spans, 2.0) == []


def test_papers_of_one_rank_interleave_by_their_fraction_of_work():
    a = [Item(f"a{k}", "a", cpu=0.1, order=k / 4) for k in range(4)]
    b = [Item(f"b{k}", "b", cpu=0.1, order=k / 2) for k in range(2)]
    got = pick([*a, *b], [], budget=2.0, jobs=3)
    assert [i.name for i in got] == ["a0", "b0", "a1"]


def test_order_is_rank_then_the_order_added():
    items = [*runs("m", 2, rank=3), Item("b", "g", rank=0, slots=0, kind="analysis"), *runs("g", 2, alone=True)]
    spans = simulate(items, budget=2.0)
    order = [n for n, _ in sorted(spans.items(), key=lambda kv: (kv[1][0], kv[1][2].seq))]
    assert order == ["b", "g0", "g1", "m0", "m1"]


def _threaded(items, **kw):
    log, lock = [], threading.Lock()

    def body(name, fail=None):
        def do():
            with lock:
                log.append(name)
            if fail:
                raise fail
            return name
        return do

    for it in items:
        it.do = body(it.name, getattr(it, "_fail", None))
    return log, execute(Pool(items), **kw)


def test_one_groups_failure_drops_only_its_pending_items():
    a = runs("a", 3, cpu=1.0)
    a[0]._fail = ValueError("a0 broke")
    b = runs("b", 3, cpu=1.0)
    items = [*a, analysis("a"), *b, analysis("b")]
    failed_seen = []
    log, failed = _threaded(items, budget=1.0, on_fail=lambda i, e: failed_seen.append(i.name))
    assert set(failed) == {"a"} and str(failed["a"]) == "a0 broke" and failed_seen == ["a0"]
    assert "a-analysis" not in log and "a1" not in log  # a's pending items dropped
    assert {"b0", "b1", "b2", "b-analysis"} <= set(log)  # b whole


def test_an_interrupt_in_an_item_stops_everything_and_stops_what_runs():
    release = threading.Event()
    a0 = Item("a0", "a", cpu=0.5)
    a0.do = lambda: (_ for _ in ()).throw(KeyboardInterrupt())
    a1 = Item("a1", "a", cpu=0.5, do=lambda: release.wait(30))  # runs until it is stopped
    a2 = Item("a2", "a", cpu=0.5, do=lambda: pytest.fail("started after the interrupt"))
    stopped = []

    def stop(running):
        stopped.append(sorted(i.name for i in running))
        release.set()

    with pytest.raises(KeyboardInterrupt):
        execute(Pool([a0, a1, a2]), budget=1.0, on_interrupt=stop)
    assert stopped == [["a1"]]
