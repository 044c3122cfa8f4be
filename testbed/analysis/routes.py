"""Fault attribution by route: which faults may explain a miss between a publisher and a subscriber.

A miss (an expected delivery that never came) is excused only by a fault that touched the *route*
of that delivery while the publication travelled it. The route of a (publisher client, subscriber
client) pair comes from the plan: each logical client ``<group>-<i>`` runs in its group's process
and attaches to ``attach[i % len(attach)]`` (``ClientGroupPlan``); between the two brokers the
publication follows the overlay (the nodes' ``neighbors``; the pub/sub core's brokers form a tree
or forest, so the path is unique; in an overlay with cycles every shortest path counts). A route is
its nodes (the two client processes and the brokers of the path) and its hops (the consecutive
pairs of those). A fault touches it when:

* crash / restart / pause / resume / stall / unstall: its node is on the route;
* cut / heal: its two nodes are one hop of the route;
* partition / heal_partition: a hop of the route joins two of its groups;
* any other kind (a link re-specification, a protocol's own fault): every route (conservative).

When the plan names no client groups (a hand-made history without a topology) every fault
touches every route: attribution is by time only, as it was before routes.

Each fault's window starts ``fault_margin_s`` before the fault (publications in flight when it
hit). It ends, for a fault whose end brings connections back (a restart, a heal, a healed
partition), when the affected nodes have *applied* their re-syncs, as measured in the logs: every
overlay neighbour of the restarted node and every client process attached to it (or each end of
a healed hop, each pair of neighbours across a healed partition) re-sends its state after the
fault, framed by markers, and the receiver logs the re-sync *applied* (``applied`` rows: the node
that applied it, the peer that sent it, when, the wave id, how many brokers it carried the wave
on to, whether it was a full re-sync) once it has handled every frame of it. What a re-sync changes at the receiver travels on
with the same wave (a subscription re-learnt there that a further broker lacks), and every broker
whose tables it changed logs its own applied row; the window ends at the last applied row of the
first wave after the fault in each direction where the sender logs re-syncs and the receiver
logs applied rows -- and, from a restarted broker, of its first *full* re-sync after the fault
when it sent one (once it has re-learnt its state: its neighbours then withdraw what they kept
from before the restart, pub/sub ``broker.py``) -- with **no margin after it**: a publication sent later finds every broker on
its route already holding what the re-sync re-learnt (links are FIFO: the re-sync is ahead of it
on every hop it shares, and the route's brokers already had the rest). A wave that does not
reach every broker it was carried to (fewer applied rows than its ``fwd`` promise), or a
direction with no applied row, keeps the window open to the end of the run (``recovered`` =
``never``).

Logs without applied rows (runs made before the markers) fall back to the sender-side rule: the
window ends at the last *sent* re-sync row of the affected pairs (``resync`` rows) plus
``fault_margin_s`` (what the re-sync sent still had to be applied and forwarded: a fixed excuse),
``recovered`` = ``resync-sent``. Faults without a re-sync (pause, stall, a link re-specification,
a crash never restarted, a client process's restart) end at their last action plus
``fault_margin_s``, as before. A crash whose restart is written as another fault ends at that
restart (``restart``): the restart's own window, from its re-syncs, covers the recovery.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable

from testbed.analysis.timeline import FaultWindow

NODE_OPS = {"crash", "restart", "pause", "resume", "stall", "unstall"}
HOP_OPS = {"cut", "heal"}
PARTITION_OPS = {"partition", "heal_partition"}
RESYNC_OPS = {"restart", "heal", "heal_partition"}  # the fault's end brings connections back


@dataclass(frozen=True)
class RouteWindow:
    """One fault's attribution window and the routes it touches (``codes`` None: every route)."""

    fault: int
    lo: float
    hi: float
    source: str
    codes: frozenset[int] | None
    recovered: str  # "resync" (ends when the re-syncs were applied, measured) | "resync-sent" (old logs:
    #                 the last sent re-sync + margin) | "never" | "margin" (no re-sync applies)
    #                 | "restart" (a crash whose restart is another fault: ends at the restart)

    def to_dict(self) -> dict[str, Any]:
        return {"fault": self.fault, "lo": self.lo, "hi": self.hi, "recovered": self.recovered,
                "routes": None if self.codes is None else len(self.codes)}


def overlay(plan: dict[str, Any]) -> dict[str, set[str]]:
    """node -> its overlay neighbours (``neighbors`` of plan.json's nodes, made symmetric)."""
    g: dict[str, set[str]] = {}
    for name, n in (plan.get("nodes") or {}).items():
        g.setdefault(name, set())
        for m in n.get("neighbors") or ():
            g[name].add(m)
            g.setdefault(m, set()).add(name)
    return g


def _dist(g: dict[str, set[str]], a: str) -> dict[str, int]:
    d, q = {a: 0}, deque([a])
    while q:
        u = q.popleft()
        for v in g.get(u, ()):
            if v not in d:
                d[v] = d[u] + 1
                q.append(v)
    return d


def path(g: dict[str, set[str]], a: str, b: str) -> tuple[frozenset[str], frozenset[frozenset[str]]]:
    """(nodes, hops) of every shortest overlay path from ``a`` to ``b`` (one path in a tree); just
    ``a`` and ``b`` (one hop) when they are not connected."""
    if a == b:
        return frozenset({a}), frozenset()
    da, db = _dist(g, a), _dist(g, b)
    if b not in da:
        return frozenset({a, b}), frozenset({frozenset({a, b})})
    n = da[b]
    nodes = frozenset(v for v in da if v in db and da[v] + db[v] == n)
    hops = frozenset(frozenset({u, v}) for u in nodes for v in g.get(u, ()) if v in nodes
                     and da[u] + 1 + db[v] == n)
    return nodes, hops


class Routes:
    """The plan's client endpoints and the route of each (publisher, subscriber) pair.

    An endpoint is (client process, broker); every logical client maps to one. The route of a pair
    is coded ``publisher endpoint * len(endpoints) + subscriber endpoint`` (a number: Spark
    aggregates it in a hash map), :meth:`code_column` builds it from the client names."""

    def __init__(self, plan: dict[str, Any], hosted: bool = False):
        """``hosted``: also an endpoint (b, b) per overlay node b, for clients a node hosts itself
        (a mobile client's copy lives on its broker: its route ends there)."""
        self.graph = overlay(plan)
        eps: set[tuple[str, str]] = {(b, b) for b in self.graph} if hosted else set()
        self.clients: dict[str, tuple[str, str]] = {}
        for name, n in sorted((plan.get("nodes") or {}).items()):
            c = n.get("clients")
            if n.get("kind") != "clients" or not c:
                continue
            attach = list(c.get("attach") or ())
            for i in range(int(c.get("count") or 0)):
                ep = (name, attach[i % len(attach)] if attach else name)
                self.clients[f"{c.get('name') or name}-{i}"] = ep
                eps.add(ep)
        self.endpoints = sorted(eps)
        self.index = {ep: i for i, ep in enumerate(self.endpoints)}
        self._routes: dict[int, tuple[frozenset[str], frozenset[frozenset[str]]]] = {}
        self._paths: dict[tuple[str, str], tuple[frozenset[str], frozenset[frozenset[str]]]] = {}
        self._dists: dict[str, dict[str, int]] = {}

    @property
    def known(self) -> bool:
        return bool(self.clients)

    def pair_codes(self, pub_eps: Iterable[tuple[str, str]], sub_eps: Iterable[tuple[str, str]]) -> list[int]:
        """The pair codes from any of ``pub_eps`` to any of ``sub_eps`` (endpoints; unknown ones skipped)."""
        k = len(self.endpoints)
        ps = [self.index[e] for e in pub_eps if e in self.index]
        ss = [self.index[e] for e in sub_eps if e in self.index]
        return sorted({p * k + s for p in ps for s in ss})

    def client_codes(self) -> dict[str, int]:
        return {c: self.index[ep] for c, ep in self.clients.items()}

    def route(self, code: int) -> tuple[frozenset[str], frozenset[frozenset[str]]]:
        """(nodes, hops) of a pair code."""
        if code not in self._routes:
            k = len(self.endpoints)
            (pn, pb), (sn, sb) = self.endpoints[code // k], self.endpoints[code % k]
            if (pb, sb) not in self._paths:  # one overlay path per broker pair, shared by its endpoints
                self._paths[(pb, sb)] = path(self.graph, pb, sb)
            nodes, hops = self._paths[(pb, sb)]
            self._routes[code] = (nodes | {pn, sn}, hops | {frozenset({pn, pb}), frozenset({sb, sn})})
        return self._routes[code]

    def dist(self, a: str) -> dict[str, int]:
        """Overlay hop counts from ``a`` (one BFS per node, cached)."""
        if a not in self._dists:
            self._dists[a] = _dist(self.graph, a)
        return self._dists[a]

    def _node_on(self, t: str, a: str, b: str) -> bool:
        """Whether ``t`` is on a shortest overlay path from broker ``a`` to broker ``b`` (both ends when
        they are not connected)."""
        da = self.dist(a)
        if b not in da:
            return t in (a, b)
        dt = self.dist(t)
        return a in dt and b in dt and dt[a] + dt[b] == da[b]

    def _hop_on(self, x: str, y: str, a: str, b: str) -> bool:
        """Whether the hop x-y is on a shortest overlay path from ``a`` to ``b``."""
        if y not in self.graph.get(x, ()):
            return frozenset({x, y}) == frozenset({a, b}) and b not in self.dist(a)
        da, db = self.dist(a), self.dist(b)
        if b not in da:
            return False
        return any(u in da and v in db and da[u] + 1 + db[v] == da[b] for u, v in ((x, y), (y, x)))

    def touched(self, w: FaultWindow) -> frozenset[int] | None:
        """The pair codes whose route ``w`` touches (None: every route)."""
        if not self.known:
            return None
        ops = set(w.ops)
        targets = set(w.targets)
        if ops <= NODE_OPS:
            def hit(pe, se):
                (pn, pb), (sn, sb) = pe, se
                return any(t in (pn, sn) or self._node_on(t, pb, sb) for t in targets)
        elif ops <= HOP_OPS and len(targets) == 2:
            x, y = sorted(targets)
            pair = frozenset(targets)

            def hit(pe, se):
                (pn, pb), (sn, sb) = pe, se
                return pair in (frozenset({pn, pb}), frozenset({sb, sn})) or self._hop_on(x, y, pb, sb)
        elif ops <= PARTITION_OPS and w.groups:
            group = {n: i for i, g in enumerate(w.groups) for n in g}

            def hit(pe, se):
                _, hops = self.route(self.index[pe] * len(self.endpoints) + self.index[se])
                return any(len(h) == 2 and all(x in group for x in h) and len({group[x] for x in h}) == 2
                           for h in hops)
        else:
            return None
        k = len(self.endpoints)
        return frozenset(i * k + j for i, pe in enumerate(self.endpoints) for j, se in enumerate(self.endpoints)
                         if hit(pe, se))


def resync_pairs(w: FaultWindow, graph: dict[str, set[str]],
                 attached: dict[str, set[str]] | None = None) -> list[tuple[str, str]]:
    """The (node, peer) pairs whose re-sync ends ``w``'s recovery: a restarted node with each overlay
    neighbour and each client process attached to it (``attached``: broker -> client processes), a
    healed hop's two ends, a healed partition's neighbours across its groups."""
    ops = set(w.ops)
    if "restart" in ops:
        return sorted({(n, m) for n in w.targets for m in graph.get(n, ())}
                      | {(n, c) for n in w.targets for c in (attached or {}).get(n, ())})
    if "heal" in ops and len(w.targets) == 2:
        a, b = sorted(w.targets)
        return [(a, b)]
    if "heal_partition" in ops and w.groups:
        group = {n: i for i, g in enumerate(w.groups) for n in g}
        return sorted((a, b) for a in group for b in graph.get(a, ()) if b in group and group[a] != group[b]
                      and a < b)
    return []


def split_rows(resync: Iterable[tuple]) -> tuple[list[tuple[str, str, float]], list[tuple[str, str, float, str, int, bool]]]:
    """(sent, applied) of mixed re-sync rows: a sent row is (node that sent, peer, t_rel_s), an
    applied row (node that applied, peer that sent, t_rel_s, wave, fwd[, full])."""
    sent, applied = [], []
    for r in resync:
        if len(r) >= 5 and r[3]:
            applied.append((r[0], r[1], float(r[2]), r[3], int(r[4] or 0), bool(r[5]) if len(r) > 5 else False))
        else:
            sent.append((r[0], r[1], float(r[2])))
    return sent, applied


def wave_ends(applied: Iterable[tuple]) -> dict[str, float | None]:
    """wave -> the time of its last applied row, or None when it did not reach every broker it was
    carried to (its rows' ``fwd`` sum to more than its rows after the first)."""
    rows: dict[str, list[tuple[float, int]]] = {}
    for _, _, t, w, fwd, *_ in applied:
        rows.setdefault(w, []).append((t, fwd))
    return {w: (max(t for t, _ in rs) if sum(f for _, f in rs) <= len(rs) - 1 else None)
            for w, rs in rows.items()}


def recovery_end(w: FaultWindow, graph: dict[str, set[str]], resync: Iterable[tuple],
                 end_s: float, attached: dict[str, set[str]] | None = None) -> tuple[float | None, str]:
    """(end, how) of ``w``'s recovery from the re-sync rows (:func:`split_rows`): with applied rows,
    the time by which every pair of :func:`resync_pairs` has *applied* the first re-sync after the
    fault's last action, and every broker its wave was carried to has too, in each direction whose
    sender logs re-syncs and whose receiver logs applied rows ("resync"); without any (old logs),
    the last sent re-sync row ("resync-sent", the caller adds the margin); (None, "margin") when no
    re-sync applies; (``end_s``, "never") when a pair never re-synchronises."""
    pairs = resync_pairs(w, graph, attached)
    if not pairs or w.actual is None and w.status != "planned":
        return None, "margin"
    after = w.actual[1] if w.actual is not None else w.planned[1]
    sent, applied = split_rows(resync)
    senders = {n for n, _, _ in sent}  # the nodes that log re-syncs at all
    end = after
    if applied:
        appliers = {n for n, *_ in applied}
        ends = wave_ends(applied)
        first: dict[tuple[str, str], tuple[float, str]] = {}
        first_full: dict[tuple[str, str], tuple[float, str]] = {}
        for n, p, t, wave, _, full in applied:  # the wave's own first hop: p re-synced n
            if t >= after and wave.startswith(f"{p}>{n}@"):
                for d in (first, first_full) if full else (first,):
                    if (p, n) not in d or t < d[(p, n)][0]:
                        d[(p, n)] = (t, wave)
        restarted = set(w.targets) if "restart" in set(w.ops) else set()
        for a, b in pairs:
            for x, y in ((a, b), (b, a)):
                if x not in senders or y not in appliers:
                    continue  # x never re-syncs, or y never logs what it applied (another kind of node)
                hit = first.get((x, y))
                if hit is None or ends[hit[1]] is None:
                    return end_s, "never"
                end = max(end, ends[hit[1]])  # type: ignore[type-var]
                # a restarted broker's full re-sync, once it has re-learnt its state, makes y sweep
                # what it kept from before the restart (and what y carries that sweep on to)
                full = first_full.get((x, y)) if x in restarted else None
                if full is not None:
                    if ends[full[1]] is None:
                        return end_s, "never"
                    end = max(end, ends[full[1]])  # type: ignore[type-var]
        return end, "resync"
    pairs = resync_pairs(w, graph)  # the sender-side rule of old logs: overlay neighbours only
    firsts: dict[tuple[str, str], float] = {}
    for n, p, t in sent:
        if t >= after and ((n, p) not in firsts or t < firsts[(n, p)]):
            firsts[(n, p)] = t
    for a, b in pairs:
        for x, y in ((a, b), (b, a)):
            if x not in senders:
                continue  # this end never logs a re-sync (e.g. a node of another kind)
            t = firsts.get((x, y))
            if t is None:
                return end_s, "never"
            end = max(end, t)
    return end, "resync-sent"


def route_windows(windows: Iterable[FaultWindow], routes: Routes, resync: Iterable[tuple],
                  *, margin_s: float, end_s: float) -> list[RouteWindow]:
    """Every attributable fault's :class:`RouteWindow` (``resync``: sent and applied rows, :func:`split_rows`)."""
    rows = list(resync)
    attached: dict[str, set[str]] = {}
    for proc, broker in routes.endpoints:
        if proc != broker:
            attached.setdefault(broker, set()).add(proc)
    windows = list(windows)
    # a crash written apart from its restart (two faults): the crash's window ends at the restart,
    # whose own window (from its re-syncs) covers the recovery; no margin after it
    restarts: dict[str, list[float]] = {}
    for w in windows:
        if w.attributable and set(w.ops) == {"restart"}:
            for t in w.targets:
                restarts.setdefault(t, []).append(w.actual[0] if w.actual is not None else w.planned[0])
    out = []
    for w in windows:
        if not w.attributable:
            continue
        lo, hi = w.attribution_window(margin_s)
        end, how = recovery_end(w, routes.graph, rows, end_s, attached)
        start = w.actual[0] if w.actual is not None else w.planned[0]
        later = [t for n in w.targets for t in restarts.get(n, ()) if t >= start]
        if set(w.ops) == {"crash"} and later:
            end, how = min(later), "restart"
        if end is not None:
            # measured ("resync": applied everywhere it changed something): no margin after it; old
            # logs ("resync-sent") only show when the re-sync was sent: the fault margin after it
            hi = end + (margin_s if how == "resync-sent" else 0.0)
        out.append(RouteWindow(w.fault, float(lo), float(hi), w.source or "/".join(w.ops), routes.touched(w), how))
    return out
