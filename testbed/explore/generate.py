"""Cases for ``testbed explore``: fault schedules and topology variants drawn from a base topology.

Pure: values in, values out (no I/O, no runs). A *case* is the base topology (its rendered
YAML as a dict), optionally varied (``--vary``), with a generated fault schedule in place of
the file's own ``faults``. Everything is drawn from ``random.Random(f"{seed}:{index}")``, so
case ``i`` of an exploration is the same case whenever it is drawn (resume, re-runs).

Distributions (docs/explore.md repeats them):

* number of faults: uniform integer in 1..``max_faults``; each fault's kind uniform over the
  kinds asked for (``--faults``) that the topology has targets for;
* start ``at``: uniform in [0.5 s, active_end - 0.5 s], where ``active_end = duration - tail``
  and the quiet tail is ``max(6 s, 30 % of the duration)``: no fault is active in the tail, so
  liveness and completeness can be judged there (the checks attribute misses up to 2 s after
  a fault window and expect nothing of the last 2 s);
* windows (stall, pause, cut, partition, the time a crashed node stays down before its
  restart, the time a ``set_link`` change lasts before the original delay and jitter are
  restored): uniform in [0.5 s, min(5 s, active_end - at)];
* targets: crash/stall/pause a node (client processes are not targets); cut an overlay link
  (``neighbors``) or a client group's link to one of its attach nodes (``close: true`` with
  probability 1/2); partition the sites into 2 groups (or, with one site, the nodes); set_link
  on an overlay link: delay uniform in [50 ms, 500 ms], jitter uniform in [0, delay/5];
  throttle a node (only with ``--faults ...,throttle``: not among the default kinds) to a share
  uniform in [0.02, 0.2] cores on a 0.01 grid, at most its host's ``cpu``;
* one node is in at most one stall/pause/crash window at a time (and one throttle window), a
  link in one cut window,
  at most one partition at a time (0.2 s apart), so every schedule is one the format accepts.

Variants (``--vary``), each drawn independently:

* ``links``: every delay of ``links.default``/``rules``/``clients`` scaled by a factor uniform
  in [0.25, 2]; its jitter uniform in [0, new delay / 4];
* ``placement``: a placement entry with ``strategy: range|hash`` gets one of the two;
* ``attach``: each client group (probability 1/2) gets as many distinct attach nodes as it
  had, drawn from the nodes of the roles clients attach to in the base topology;
* ``counts``: each client group's ``count`` uniform in [max(1, count/2), 2 count].

A kind with nothing to vary is skipped with a message (:func:`variant_kinds`).
"""

from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass, field, replace
from typing import Any

from testbed.errors import UsageError
from testbed.topology.units import parse_time

FAULT_KINDS = ("crash", "stall", "pause", "cut", "partition", "set_link")  # drawn by default
ALL_FAULT_KINDS = FAULT_KINDS + ("throttle",)  # throttle only when asked for (--faults throttle)
THROTTLE_CPU = (0.02, 0.2)  # cores a throttled node keeps (uniform, on a 0.01 grid)
VARY_KINDS = ("links", "placement", "attach", "counts")

START_S = 0.5  # no fault before this (the workload has just started)
MIN_WINDOW_S = 0.5
MAX_WINDOW_S = 5.0
GAP_S = 0.2  # between two windows of the same node / link / partition
MIN_TAIL_S = 6.0
TAIL_FRACTION = 0.3
SET_LINK_DELAY_S = (0.050, 0.500)
LINK_SCALE = (0.25, 2.0)


def tail_s(duration_s: float) -> float:
    """The quiet tail at the end of a run: no fault is active in it."""
    return max(MIN_TAIL_S, TAIL_FRACTION * duration_s)


def fmt_time(seconds: float) -> str:
    """Seconds -> the format's time text on a 0.1 ms grid (``2.5`` -> ``2.5s``, ``0.04`` -> ``40ms``)."""
    if seconds < 1.0:
        return f"{round(seconds * 1000, 1):g}ms"
    return f"{round(seconds, 4):g}s"


# -- faults ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fault:
    """One generated fault. ``for_``: the window; for a crash the time until its restart, for a
    set_link the time until the original delay/jitter are restored (None: never)."""

    kind: str
    at: float
    for_: float | None = None
    target: tuple[str, ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()
    close: bool = False
    delay: float | None = None
    jitter: float | None = None
    restore: tuple[float, float] | None = None  # set_link: the pair's original (delay, jitter)
    cpu: float | None = None  # throttle: the node's share during the window (cores)

    @property
    def end(self) -> float:
        return self.at + (self.for_ or 0.0)

    def entries(self) -> list[dict[str, Any]]:
        """The fault as entries of the topology format (a crash with a restart is two)."""
        at = fmt_time(self.at)
        if self.kind == "crash":
            out: list[dict[str, Any]] = [{"at": at, "crash": self.target[0]}]
            if self.for_ is not None:
                out.append({"at": fmt_time(self.end), "restart": self.target[0]})
            return out
        if self.kind in ("stall", "pause"):
            return [{"at": at, self.kind: self.target[0], "for": fmt_time(self.for_ or 0.0)}]
        if self.kind == "throttle":
            return [{"at": at, "throttle": self.target[0], "cpu": self.cpu, "for": fmt_time(self.for_ or 0.0)}]
        if self.kind == "cut":
            e: dict[str, Any] = {"at": at, "cut": list(self.target)}
            if self.close:
                e["close"] = True
            e["for"] = fmt_time(self.for_ or 0.0)
            return [e]
        if self.kind == "partition":
            return [{"at": at, "partition": [list(g) for g in self.groups], "for": fmt_time(self.for_ or 0.0)}]
        if self.kind == "set_link":
            out = [{"at": at, "set_link": {"nodes": list(self.target), "delay": fmt_time(self.delay or 0.0),
                                           "jitter": fmt_time(self.jitter or 0.0)}}]
            if self.for_ is not None and self.restore is not None:
                d, j = self.restore
                out.append({"at": fmt_time(self.end), "set_link": {"nodes": list(self.target), "delay": fmt_time(d),
                                                                  "jitter": fmt_time(j)}})
            return out
        raise AssertionError(self.kind)

    def describe(self) -> str:
        who = " | ".join(",".join(g) for g in self.groups) if self.groups else "-".join(self.target)
        win = f" for {self.for_:g}s" if self.for_ is not None else (" (no restart)" if self.kind == "crash" else "")
        extra = (f" delay {fmt_time(self.delay or 0)}" if self.kind == "set_link"
                 else f" to {self.cpu:g} cores" if self.kind == "throttle" else "")
        return f"{self.kind} {who} at {self.at:g}s{win}{extra}"


def schedule_entries(faults: tuple[Fault, ...] | list[Fault]) -> list[dict[str, Any]]:
    """Every fault's entries, sorted by time (stable: the generation order at equal times)."""
    es = [e for f in faults for e in f.entries()]
    return sorted(es, key=lambda e: parse_time(e["at"]))


# -- what a topology offers ---------------------------------------------------------------
@dataclass
class Shape:
    """The parts of a (rendered) topology the generator draws from."""

    duration: float
    sites: list[str]
    nodes: dict[str, dict[str, Any]]
    clients: dict[str, dict[str, Any]]
    site_of: dict[str, str]
    overlay: list[tuple[str, str]]
    client_links: list[tuple[str, str]]

    @classmethod
    def of(cls, topo: dict[str, Any]) -> "Shape":
        nodes = dict(topo.get("nodes") or {})
        clients = dict(topo.get("clients") or {})
        site_of = {n: str(v.get("site")) for n, v in nodes.items()}
        for g, c in clients.items():
            site_of[g] = str(c.get("site") or site_of.get(_attach_list(c)[0], ""))
        edges: set[tuple[str, str]] = set()
        for n, v in nodes.items():
            for m in v.get("neighbors") or []:
                if m in nodes and m != n:
                    edges.add(tuple(sorted((n, m))))  # type: ignore[arg-type]
        cl = sorted({(g, a) for g, c in clients.items() for a in _attach_list(c) if a in nodes})
        return cls(parse_time(topo["duration"]), list(topo.get("sites") or {}), nodes, clients, site_of,
                   sorted(edges), cl)

    def cut_pairs(self) -> list[tuple[str, str]]:
        pairs = self.overlay + self.client_links
        if not pairs:  # no overlay declared (e.g. a protocol connecting its roles itself): any two nodes
            ns = sorted(self.nodes)
            pairs = [(a, b) for i, a in enumerate(ns) for b in ns[i + 1:]]
        return pairs

    def link_pairs(self) -> list[tuple[str, str]]:
        if self.overlay:
            return self.overlay
        ns = sorted(self.nodes)
        return [(a, b) for i, a in enumerate(ns) for b in ns[i + 1:]]

    def can(self, kind: str) -> bool:
        if kind in ("crash", "stall", "pause", "throttle"):
            return bool(self.nodes)
        if kind == "cut":
            return bool(self.cut_pairs())
        if kind == "partition":
            return len(self.sites) >= 2 or len(self.nodes) >= 2
        if kind == "set_link":
            return bool(self.link_pairs())
        raise AssertionError(kind)


def _attach_list(c: dict[str, Any]) -> list[str]:
    a = c.get("attach")
    return [str(x) for x in a] if isinstance(a, list) else [str(a)]


def resolved_link(topo: dict[str, Any], shape: Shape, a: str, b: str) -> tuple[float, float]:
    """(delay, jitter) in seconds of the pair a->b as the format resolves it (default, then rules)."""
    links = topo.get("links") or {}
    cur = {"delay": 0.0, "jitter": 0.0}

    def apply(block: dict[str, Any]) -> None:
        for k in cur:
            if block.get(k) is not None:
                cur[k] = parse_time(block[k])

    apply(links.get("default") or {})
    sa, sb = shape.site_of.get(a), shape.site_of.get(b)
    for rule in links.get("rules") or []:
        if rule.get("sites") is not None:
            s = list(rule["sites"])
            cover = ({sa, sb} == set(s)) if len(s) == 2 and s[0] != s[1] else (sa == sb == s[0])
        else:
            cover = set(rule.get("nodes") or []) == {a, b}
        if cover:
            apply(rule)
    return cur["delay"], cur["jitter"]


class _Busy:
    """Intervals already taken, per key (a node, a link, "partition")."""

    def __init__(self) -> None:
        self.taken: dict[Any, list[tuple[float, float]]] = {}

    def free(self, key: Any, lo: float, hi: float) -> bool:
        return all(hi + GAP_S <= a or lo >= b + GAP_S for a, b in self.taken.get(key, []))

    def take(self, key: Any, lo: float, hi: float) -> None:
        self.taken.setdefault(key, []).append((lo, hi))


def draw_schedule(topo: dict[str, Any], rng: random.Random, kinds: tuple[str, ...] = FAULT_KINDS,
                  max_faults: int = 4) -> tuple[Fault, ...]:
    """A fault schedule for ``topo`` (see the module docstring for the distributions)."""
    shape = Shape.of(topo)
    usable = [k for k in kinds if shape.can(k)]
    if not usable:
        return ()
    active_end = shape.duration - tail_s(shape.duration)
    if active_end < START_S + MIN_WINDOW_S + 0.5:
        raise UsageError(f"duration {shape.duration:g}s is too short to explore: faults need "
                         f"{START_S + MIN_WINDOW_S + 0.5:g}s before the quiet tail of {tail_s(shape.duration):g}s "
                         f"(use a duration of at least {START_S + MIN_WINDOW_S + 0.5 + MIN_TAIL_S:g}s)")
    busy = _Busy()
    out: list[Fault] = []
    for _ in range(rng.randint(1, max(1, max_faults))):
        for _attempt in range(25):
            f = _draw_one(rng, rng.choice(usable), shape, topo, active_end)
            key = _busy_key(f)
            if busy.free(key, f.at, f.end):
                busy.take(key, f.at, f.end)
                out.append(f)
                break
    return tuple(sorted(out, key=lambda f: f.at))


def _busy_key(f: Fault) -> Any:
    if f.kind in ("crash", "stall", "pause"):
        return ("node", f.target[0])
    if f.kind == "throttle":  # a throttle may overlap the node's other faults (its share outlives a crash)
        return ("throttle", f.target[0])
    if f.kind == "partition":
        return ("partition",)
    return (f.kind, f.target)


def _host_cpu(topo: dict[str, Any], shape: Shape, node: str) -> float | None:
    """The ``cpu`` of the host a node runs on (as the format resolves it), None when it has none."""
    hosts = topo.get("hosts") or {}
    v = shape.nodes.get(node) or {}
    host = v.get("host") or next((h for h, hv in hosts.items() if (hv or {}).get("site") == v.get("site")),
                                 next(iter(hosts), None))
    cpu = (hosts.get(host) or {}).get("cpu") if host else None
    return float(cpu) if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) else None


def _floor1(x: float) -> float:
    """Down to the 0.1 s grid (so a drawn time never passes the bound it was drawn under)."""
    return math.floor(round(x * 10, 6)) / 10


def _draw_one(rng: random.Random, kind: str, shape: Shape, topo: dict[str, Any], active_end: float) -> Fault:
    at = max(START_S, _floor1(rng.uniform(START_S, active_end - MIN_WINDOW_S)))
    room = _floor1(active_end - at)  # >= MIN_WINDOW_S
    win = min(room, max(MIN_WINDOW_S, _floor1(rng.uniform(MIN_WINDOW_S, min(MAX_WINDOW_S, room)))))
    if kind in ("crash", "stall", "pause"):
        return Fault(kind, at, win, (rng.choice(sorted(shape.nodes)),))
    if kind == "throttle":
        node = rng.choice(sorted(shape.nodes))
        cap = _host_cpu(topo, shape, node)
        cpu = round(rng.uniform(*THROTTLE_CPU), 2)
        return Fault(kind, at, win, (node,), cpu=max(0.01, min(cpu, cap)) if cap is not None else cpu)
    if kind == "cut":
        return Fault(kind, at, win, tuple(rng.choice(shape.cut_pairs())), close=rng.random() < 0.5)
    if kind == "partition":
        names = list(shape.sites) if len(shape.sites) >= 2 else sorted(shape.nodes)
        rng.shuffle(names)
        k = rng.randint(1, len(names) - 1)
        groups = (tuple(sorted(names[:k])), tuple(sorted(names[k:])))
        return Fault(kind, at, win, groups=tuple(sorted(groups)))
    if kind == "set_link":
        a, b = rng.choice(shape.link_pairs())
        d = round(rng.uniform(*SET_LINK_DELAY_S), 3)
        j = round(rng.uniform(0.0, d / 5), 3)
        return Fault(kind, at, win, (a, b), delay=d, jitter=j, restore=resolved_link(topo, shape, a, b))
    raise AssertionError(kind)


# -- variants ------------------------------------------------------------------------------
def _link_blocks(topo: dict[str, Any]) -> list[dict[str, Any]]:
    links = topo.get("links") or {}
    blocks = [links.get("default"), *(links.get("rules") or []), links.get("clients")]
    return [b for b in blocks if isinstance(b, dict) and b.get("delay") is not None]


def _strategy_entries(topo: dict[str, Any]) -> list[dict[str, Any]]:
    """Placement entries written with ``strategy: range`` or ``strategy: hash``."""
    pl = topo.get("placement") or {}
    return [v for v in pl.values() if isinstance(v, dict) and v.get("strategy") in ("range", "hash")]


def _attach_candidates(topo: dict[str, Any]) -> list[str]:
    nodes = topo.get("nodes") or {}
    roles = {nodes[a].get("role") for c in (topo.get("clients") or {}).values() for a in _attach_list(c) if a in nodes}
    return sorted(n for n, v in nodes.items() if v.get("role") in roles)


def nothing_to_vary(topo: dict[str, Any], kind: str) -> str | None:
    """Why ``kind`` cannot vary this topology (None: it can)."""
    if kind == "links":
        return None if _link_blocks(topo) else "the topology sets no link delay (links.default/rules/clients)"
    if kind == "placement":
        return None if _strategy_entries(topo) else "the topology has no placement with a range|hash strategy"
    if kind == "attach":
        if not topo.get("clients"):
            return "the topology has no client groups"
        if len(_attach_candidates(topo)) < 2:
            return "only one node can be an attach point"
        return None
    if kind == "counts":
        return None if topo.get("clients") else "the topology has no client groups"
    raise UsageError(f"--vary {kind!r}: one of {', '.join(VARY_KINDS)}")


def apply_variant(topo: dict[str, Any], kinds: tuple[str, ...], rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """-> (a varied deep copy of ``topo``, what was varied: kind -> {where: new value})."""
    t = copy.deepcopy(topo)
    changed: dict[str, Any] = {}
    if "links" in kinds:
        ch = {}
        for i, b in enumerate(_link_blocks(t)):
            d = parse_time(b["delay"]) * rng.uniform(*LINK_SCALE)
            b["delay"] = fmt_time(max(0.0001, round(d, 4)))
            b["jitter"] = fmt_time(round(rng.uniform(0.0, parse_time(b["delay"]) / 4), 4))
            ch[str(i)] = {"delay": b["delay"], "jitter": b["jitter"]}
        changed["links"] = ch
    if "placement" in kinds:
        ch = {}
        for name, v in (t.get("placement") or {}).items():
            if isinstance(v, dict) and v.get("strategy") in ("range", "hash"):
                v["strategy"] = rng.choice(["range", "hash"])
                ch[name] = v["strategy"]
        changed["placement"] = ch
    if "attach" in kinds:
        cands = _attach_candidates(t)
        ch = {}
        for g, c in (t.get("clients") or {}).items():
            if rng.random() < 0.5:
                k = min(len(_attach_list(c)), len(cands))
                pick = sorted(rng.sample(cands, k))
                c["attach"] = pick[0] if k == 1 and not isinstance(c.get("attach"), list) else pick
                ch[g] = c["attach"]
        changed["attach"] = ch
    if "counts" in kinds:
        ch = {}
        for g, c in (t.get("clients") or {}).items():
            n = int(c.get("count", 1))
            c["count"] = rng.randint(max(1, n // 2), 2 * n)
            ch[g] = c["count"]
        changed["counts"] = ch
    return t, changed


# -- a case ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One case: a (varied) topology without faults + a generated schedule + the seed it runs with."""

    index: int
    seed: int
    topo: dict[str, Any] = field(compare=False, hash=False)
    faults: tuple[Fault, ...] = ()
    varied: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def topology(self) -> dict[str, Any]:
        """The whole topology (format field names), faults included."""
        t = copy.deepcopy(self.topo)
        t["seed"] = self.seed
        t["faults"] = schedule_entries(self.faults)
        if not t["faults"]:
            del t["faults"]
        return t

    def with_faults(self, faults: tuple[Fault, ...] | list[Fault]) -> "Case":
        return replace(self, faults=tuple(sorted(faults, key=lambda f: f.at)))

    def with_topo(self, topo: dict[str, Any]) -> "Case":
        return replace(self, topo=topo)

    @property
    def n_entries(self) -> int:
        return len(schedule_entries(self.faults))


def base_topology(rendered: dict[str, Any]) -> dict[str, Any]:
    """The rendered topology as explore's base: its own faults, sweep and repeat removed."""
    t = copy.deepcopy(rendered)
    for k in ("faults", "sweep", "repeat"):
        t.pop(k, None)
    return t


def draw_case(base: dict[str, Any], seed: int, index: int, *, kinds: tuple[str, ...] = FAULT_KINDS,
              vary: tuple[str, ...] = (), max_faults: int = 4) -> Case:
    """Case ``index`` of the exploration with seed ``seed`` (the same every time it is drawn)."""
    rng = random.Random(f"{seed}:{index}")
    topo, varied = apply_variant(base, vary, rng) if vary else (copy.deepcopy(base), {})
    faults = draw_schedule(topo, rng, kinds, max_faults)
    return Case(index=index, seed=rng.randrange(1, 2**31), topo=topo, faults=faults, varied=varied)
