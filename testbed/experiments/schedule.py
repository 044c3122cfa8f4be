"""The scheduler of a reproduction: every chosen paper's pending work in one pool.

A work :class:`Item` is one run, one computed grid entry, one batch of per-run analyses or one
paper's analysis. :func:`pick` is the policy (pure: which pending items start now, given what
runs); :func:`execute` drives it with worker threads. The rules, in the order they apply:

1. **Alone.** An item marked ``alone`` (a run that measures CPU or throughput: ``Paper.alone`` /
   ``Grid.alone``) runs with nothing else: it starts only when nothing runs, and nothing starts
   while it runs. When the first ready item in order is alone and something runs, nothing starts
   (the machine empties for it), so alone items are never starved by a stream of small ones.
2. **CPU budget.** The cores the running items keep busy (``Item.cpu``: measured per run where
   available, else the paper's declared cost) plus the new item's stay within ``budget``; an item
   larger than the budget starts when nothing else runs. When the first ready item in order does
   not fit, nothing after it starts either (no item is starved by smaller ones behind it).
3. **Runs at a time.** ``Item.slots`` (the runs an item makes at once) count against ``jobs`` (all
   items together, ``--jobs``) and against its group's cap (``caps[group]``: the paper's
   ``parallel``); an item over a cap is passed over, the items after it may still start (an item
   with more slots than a cap starts when nothing of that scope runs).
4. **Exclusive.** Items with the same ``exclusive`` key never run together, and one waiting for
   its key is passed over: the analyses (``"analysis"``: one Spark session and pyplot between
   them) and each paper's computed entries (they share the paper's memo, e.g. a wait search made
   once for its samples, and ran one after the other before).
5. **Last.** A ``last`` item (a paper's analysis) is ready only when no other item of its group is
   pending or running (items added while the pool runs, a batch of per-run analyses, included).

Order: items are considered by ``rank`` (lower first), then ``order`` (lower first), then in the
order they were added. A paper gives its k-th of n items the order k/n, so the papers of one rank
advance together (each at the same fraction of its work) instead of one after the other, and
they end at about the same time.
A group (a paper) whose item raised loses its pending items; the other groups go on.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

EPS = 1e-9


@dataclass(eq=False)
class Item:
    """One piece of work of a group (a paper)."""

    name: str
    group: str
    cpu: float = 1.0  # cores it keeps busy while it runs
    alone: bool = False  # nothing else may run beside it
    slots: int = 1  # runs it makes at once (0: makes none, e.g. a pure computed entry or an analysis)
    kind: str = "run"  # "run" | "compute" | "analysis"
    exclusive: str = ""  # items with the same key never run at the same time (analyses; a paper's computed entries)
    last: bool = False  # ready only when every other item of its group is finished
    rank: int = 2  # lower first
    order: float = 0.0  # then lower first (a paper's items: their fraction of its work, so papers interleave)
    do: Callable[[], Any] | None = None  # the work (a worker thread)
    done: Callable[[Any], Iterable[Item] | None] | None = None  # its result (the scheduling thread)
    start: Callable[[], None] | None = None  # just before it starts (the scheduling thread)
    seq: int = field(default=0, compare=False)


def ready(item: Item, pending: list[Item], running: list[Item]) -> bool:
    if not item.last:
        return True
    return not any(o is not item and o.group == item.group for o in itertools.chain(pending, running))


def pick(pending: list[Item], running: list[Item], *, budget: float, jobs: int | None = None,
         caps: dict[str, int] | None = None) -> list[Item]:
    """The pending items to start now, in order (the rules of the module doc). Pure."""
    caps = caps or {}
    if any(r.alone for r in running):
        return []
    now = list(running)
    out: list[Item] = []
    for item in sorted(pending, key=lambda i: (i.rank, i.order, i.seq)):
        if not ready(item, pending, running):
            continue
        if item.alone:
            if not now:
                out.append(item)
            break  # started alone, or the machine empties for it
        if item.exclusive and any(r.exclusive == item.exclusive for r in now):
            continue
        used = sum(r.slots for r in now)
        if jobs is not None and item.slots and used and used + item.slots > jobs:
            continue
        cap, mine = caps.get(item.group), sum(r.slots for r in now if r.group == item.group)
        if cap is not None and item.slots and mine and mine + item.slots > cap:
            continue
        if now and sum(r.cpu for r in now) + item.cpu > budget + EPS:
            break  # head of line: it waits for cores, and nothing behind it overtakes it
        out.append(item)
        now.append(item)
    return out


class Pool:
    """The pending and running items, and the groups that failed. ``execute`` drives it."""

    def __init__(self, items: Iterable[Item] = ()) -> None:
        self.pending: list[Item] = []
        self.running: list[Item] = []
        self.failed: dict[str, BaseException] = {}
        self._seq = itertools.count()
        self.add(items)

    def add(self, items: Iterable[Item] | None) -> None:
        for i in items or ():
            if i.group in self.failed:
                continue
            i.seq = next(self._seq)
            self.pending.append(i)

    def fail(self, group: str, e: BaseException) -> list[Item]:
        """Record the group's failure; its pending items are dropped (returned)."""
        self.failed.setdefault(group, e)
        dropped = [i for i in self.pending if i.group == group]
        self.pending = [i for i in self.pending if i.group != group]
        return dropped


def execute(pool: Pool, *, budget: float, jobs: int | None = None, caps: dict[str, int] | None = None,
            on_fail: Callable[[Item, BaseException], None] = lambda i, e: None,
            on_interrupt: Callable[[list[Item]], None] = lambda running: None,
            workers: int = 16) -> dict[str, BaseException]:
    """Run every item of ``pool`` by the policy of :func:`pick`, each in a worker thread; ``start`` and
    ``done`` in this thread (``done`` may add items). An item that raises fails its group (``on_fail``;
    its pending items are dropped, its running ones finish). An interrupt (Ctrl-C, SIGTERM raised as
    KeyboardInterrupt here) starts nothing more, calls ``on_interrupt(running items)`` (stop the
    runs being made) and waits for the worker threads before it goes on. Returns the failed groups."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="work")
    futures: dict[Any, Item] = {}

    def fail(item: Item, e: BaseException) -> None:
        pool.fail(item.group, e)
        on_fail(item, e)

    try:
        while pool.pending or futures:
            for item in pick(pool.pending, pool.running, budget=budget, jobs=jobs, caps=caps):
                pool.pending.remove(item)
                try:
                    if item.start is not None:
                        item.start()
                except Exception as e:  # noqa: BLE001 - any error of an item fails its group, not the others
                    fail(item, e)
                    continue
                pool.running.append(item)
                futures[ex.submit(item.do or (lambda: None))] = item
            if not futures:
                if pool.pending:  # nothing runs and nothing could start: a policy error, not a hang
                    raise RuntimeError("scheduler: nothing can start: " + ", ".join(i.name for i in pool.pending[:5]))
                break
            finished, _ = wait(list(futures), return_when=FIRST_COMPLETED)
            for fut in sorted(finished, key=lambda f: futures[f].seq):
                item = futures.pop(fut)
                pool.running.remove(item)
                e = fut.exception()
                if e is not None and not isinstance(e, Exception):
                    raise e  # an interrupt raised in the item (KeyboardInterrupt, SystemExit) stops everything
                if e is not None:
                    fail(item, e)
                    continue
                try:  # a failed group's finished runs are still recorded (the run index keeps them)
                    if item.done is not None:
                        pool.add(item.done(fut.result()))
                except Exception as e2:  # noqa: BLE001 - as above
                    fail(item, e2)
    except BaseException:
        if futures:
            try:
                on_interrupt(list(futures.values()))
            except Exception:  # noqa: BLE001, S110 - the items' own teardown still runs in their threads
                pass
        raise
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
    return pool.failed


def simulate(items: Iterable[Item], durations: dict[str, float], *, budget: float, jobs: int | None = None,
             caps: dict[str, int] | None = None, policy: Callable[..., list[Item]] | None = None,
             ) -> dict[str, tuple[float, float, Item]]:
    """The schedule ``policy`` (default :func:`pick`) makes of ``items`` on a virtual clock, each item
    taking ``durations[name]`` seconds (default 1); an item's ``done(None)`` may add items. Returns
    {name: (start, end, item)}. Pure: for tests of the policy and for estimating a reproduction's
    wall time from the times its runs took before (benchmarks/estimate_schedule.py)."""
    policy = policy or pick
    pool = Pool(items)
    t, ends, spans = 0.0, [], {}
    while pool.pending or ends:
        for it in policy(pool.pending, pool.running, budget=budget, jobs=jobs, caps=caps):
            pool.pending.remove(it)
            pool.running.append(it)
            ends.append((t + durations.get(it.name, 1.0), it.seq, it))
            spans[it.name] = [t, t, it]
        if not ends:
            raise RuntimeError("scheduler: nothing can start: " + ", ".join(i.name for i in pool.pending[:5]))
        ends.sort(key=lambda e: (e[0], e[1]))
        t, _, it = ends.pop(0)
        pool.running.remove(it)
        spans[it.name][1] = t
        pool.add(it.done(None) if it.done else None)
    return {k: (s, e, i) for k, (s, e, i) in spans.items()}
