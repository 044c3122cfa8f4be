"""Pure PADRES routing tables: SRT, PRT, covering, publication matching.

Values in, values out: no I/O, no clocks. A broker (or any node class that wants
content-based or topic-based routing, e.g. the ordering protocol's ENS with
``[topic,eq,N]`` filters) owns one :class:`RoutingTable` and turns the
:class:`Out` messages it returns into frames.

Hops are opaque strings. ``neighbors`` (given at construction) are the overlay
brokers; every other hop is a local endpoint (a client), which receives
publications but never advertisements or subscriptions. The overlay must be
acyclic (a tree), as in PADRES; advertisement and subscription ids are unique in
a run, and a second copy of a known id is ignored (this makes re-sync after a
restart idempotent and stops floods on a cyclic overlay, though publications on a
cyclic overlay could still be duplicated).

Advertisements (SRT: ``adv_id -> (filter, last hop)``) are flooded to every
neighbour except the last hop. A subscription (PRT: ``sub_id -> (filter, last
hop)``) is *wanted* at neighbour H if H is not its last hop and it intersects an
advertisement whose last hop is H; it is forwarded to the neighbours where it is
wanted. A subscription wanted nowhere stays in the PRT and is forwarded when an
intersecting advertisement arrives. A publication goes to the last hop of every
matching PRT entry, each hop at most once, never back to the hop it came from.
Unsubscriptions and unadvertisements remove state along the same paths; an
unadvertisement also withdraws (unsubscribes) the subscriptions that were
forwarded to that hop only because of it.

Subscription covering (``covering`` mode), per next hop H. ``sent[H]`` is what
this table has forwarded to H and not yet withdrawn:

* ``off``: every wanted subscription is forwarded; ``sent[H] == wanted(H)``.
* ``active``: a new wanted subscription covered by one in ``sent[H]`` is not
  forwarded (it is *quenched* at H). When a subscription in ``sent[H]`` is
  withdrawn (unsubscribed, or no longer wanted), the quenched subscriptions it
  leaves uncovered are forwarded first (in arrival order, a newly forwarded one
  quenching later ones), then the unsubscription is sent. FIFO links mean the
  downstream never lacks a route in between, so no delivery is lost.
  Subscriptions already forwarded are never retracted because a newer one
  covers them.
* ``lazy``: like ``active`` on subscribe. On unsubscribe (or loss of
  wantedness) of a forwarded subscription S that is still the only cover of
  some subscription quenched at H, S is *retired* instead of withdrawn: it stays
  in ``sent[H]`` (no unsubscription sent, nothing forwarded), it is gone from
  the PRT here (so publications matching only S are dropped here), and it keeps
  quenching new subscriptions it covers. A retired S is withdrawn from H (one
  unsubscription) as soon as no wanted subscription relies on it. So lazy
  forwards an uncovered subscription only when its cover is withdrawn for good
  and nothing retired covers it. Trade-off: fewer control messages, more
  publication traffic on H until the retired cover goes. Deliveries are never
  lost: H always holds a subscription covering every wanted one.

Re-sync (:meth:`RoutingTable.resync`): what a neighbour needs after its
connection comes back (it may have restarted empty): every advertisement not
learned from it, then every subscription in ``sent[peer]``. A peer that did not
restart ignores them as duplicates.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from testbed.nodes.pubsub.filters import Filter, Pred, covers, intersects, value_type

COVERING_MODES = ("off", "lazy", "active")


@dataclass(frozen=True)
class Out:
    """One routing message to send: ``kind`` in adv | unadv | sub | unsub."""

    dst: str
    kind: str
    id: str
    filter: Filter | None = None  # for adv and sub


@dataclass
class Entry:
    id: str
    filter: Filter
    hop: str


# ---------------------------------------------------------------------------- matching
class _Compiled:
    """A subscription compiled for fast matching: type-checked comparisons, no allocation."""

    __slots__ = ("key", "hop", "checks")

    def __init__(self, key: str, f: Filter, hop: str, skip: Pred | None):
        self.key = key
        self.hop = hop
        self.checks = tuple(
            (p.attr, p.op, p.value, str if isinstance(p.value, str) else (int, float))
            for p in f.preds if p is not skip
        )

    def match(self, attrs: Mapping[str, Any]) -> bool:
        for attr, op, v, ty in self.checks:
            x = attrs.get(attr, _MISSING)
            tx = type(x)
            if ty is str:
                if tx is not str:
                    return False
            elif tx is not int and tx is not float:
                return False
            if op == "eq":
                if x != v:
                    return False
            elif op == ">":
                if not x > v:
                    return False
            elif op == "<":
                if not x < v:
                    return False
            elif op == ">=":
                if not x >= v:
                    return False
            elif op == "<=":
                if not x <= v:
                    return False
            elif op == "neq":
                if x == v:
                    return False
            elif op == "str-prefix":
                if not x.startswith(v):
                    return False
            # isPresent: the type check was the test
        return True


_MISSING = object()


class MatchIndex:
    """Keyed filters -> hops. Filters with an ``eq`` predicate are indexed by
    (attribute, value) (topic mode is one dict lookup); the rest are scanned."""

    def __init__(self) -> None:
        self._eq: dict[str, dict[Any, dict[str, _Compiled]]] = {}
        self._scan: dict[str, _Compiled] = {}
        self._where: dict[str, tuple[str, Any] | None] = {}

    def __len__(self) -> int:
        return len(self._where)

    def add(self, key: str, f: Filter, hop: str) -> None:
        self.remove(key)
        if not f.satisfiable:
            self._where[key] = None
            return  # matches nothing; remembered so remove() works
        eqp = next((p for p in f.preds if p.op == "eq"), None)
        c = _Compiled(key, f, hop, eqp)
        if eqp is None:
            self._scan[key] = c
            self._where[key] = ("", None)
        else:
            v = eqp.value
            if value_type(v) == "num" and float(v).is_integer():
                v = int(v)  # 1.0 and 1 share a slot (they hash alike anyway)
            self._eq.setdefault(eqp.attr, {}).setdefault(v, {})[key] = c
            self._where[key] = (eqp.attr, v)

    def remove(self, key: str) -> None:
        w = self._where.pop(key, _MISSING)
        if w is _MISSING or w is None:
            return
        attr, v = w  # type: ignore[misc]
        if attr == "":
            del self._scan[key]
            return
        byval = self._eq[attr]
        slot = byval[v]
        del slot[key]
        if not slot:
            del byval[v]
            if not byval:
                del self._eq[attr]

    def hops(self, attrs: Mapping[str, Any]) -> set[str]:
        """Every hop with a filter matching ``attrs``."""
        out: set[str] = set()
        for attr, byval in self._eq.items():
            x = attrs.get(attr, _MISSING)
            tx = type(x)
            if tx is not str and tx is not int and tx is not float:
                continue
            slot = byval.get(x)
            if slot:
                for c in slot.values():
                    if c.hop not in out and c.match(attrs):
                        out.add(c.hop)
        for c in self._scan.values():
            if c.hop not in out and c.match(attrs):
                out.add(c.hop)
        return out


# ---------------------------------------------------------------------------- tables
class RoutingTable:
    def __init__(self, neighbors: Iterable[str], covering: str = "off") -> None:
        if covering not in COVERING_MODES:
            raise ValueError(f"covering must be one of {COVERING_MODES}, not {covering!r}")
        self.neighbors: tuple[str, ...] = tuple(neighbors)
        self._nset = frozenset(self.neighbors)
        self.covering = covering
        self.srt: dict[str, Entry] = {}
        self.advs_by_hop: dict[str, dict[str, Filter]] = {}
        self.prt: dict[str, Entry] = {}  # insertion order = arrival order
        self.wanted: dict[str, dict[str, None]] = {h: {} for h in self.neighbors}
        self.sent: dict[str, dict[str, Filter]] = {h: {} for h in self.neighbors}
        self.index = MatchIndex()

    def clone(self) -> "RoutingTable":
        """A deep, independent copy: changing either table afterwards never changes the other.

        Filters are immutable and shared; every table, set and index is new (the match index
        is rebuilt from the PRT). Attributes a subclass adds are copied shallowly: override
        ``clone`` (calling ``super().clone()``) to copy them deeply.
        """
        t = copy.copy(self)
        t.srt = {k: Entry(e.id, e.filter, e.hop) for k, e in self.srt.items()}
        t.advs_by_hop = {h: dict(d) for h, d in self.advs_by_hop.items()}
        t.prt = {k: Entry(e.id, e.filter, e.hop) for k, e in self.prt.items()}
        t.wanted = {h: dict(d) for h, d in self.wanted.items()}
        t.sent = {h: dict(d) for h, d in self.sent.items()}
        t.index = MatchIndex()
        for e in t.prt.values():
            t.index.add(e.id, e.filter, e.hop)
        return t

    # -- queries ----------------------------------------------------------------
    def is_neighbor(self, hop: str) -> bool:
        return hop in self._nset

    def route(self, attrs: Mapping[str, Any], from_hop: str | None = None) -> set[str]:
        """Next hops of a publication: last hops of matching PRT entries, minus ``from_hop``."""
        hops = self.index.hops(attrs)
        if from_hop is not None:
            hops.discard(from_hop)
        return hops

    def quenched(self) -> int:
        """(hop, sub) pairs wanted but not forwarded because of covering."""
        return sum(1 for h in self.neighbors for s in self.wanted[h] if s not in self.sent[h])

    def retired(self) -> int:
        return sum(1 for h in self.neighbors for s in self.sent[h] if s not in self.prt)

    def sizes(self) -> dict[str, int]:
        return {"srt": len(self.srt), "prt": len(self.prt), "covered": self.quenched(),
                "sent": sum(len(v) for v in self.sent.values()), "retired": self.retired()}

    # -- advertisements -----------------------------------------------------------
    def advertise(self, adv_id: str, f: Filter, hop: str) -> list[Out]:
        if adv_id in self.srt:
            return []
        self.srt[adv_id] = Entry(adv_id, f, hop)
        self.advs_by_hop.setdefault(hop, {})[adv_id] = f
        out = [Out(n, "adv", adv_id, f) for n in self.neighbors if n != hop]
        if hop in self._nset:
            wanted, sent = self.wanted[hop], self.sent[hop]
            for e in self.prt.values():
                if e.hop != hop and e.id not in wanted and intersects(e.filter, f):
                    wanted[e.id] = None
                    self._offer(hop, e, out)
        return out

    def unadvertise(self, adv_id: str, hop: str) -> list[Out]:
        e = self.srt.get(adv_id)
        if e is None or e.hop != hop:
            return []
        del self.srt[adv_id]
        advs = self.advs_by_hop[hop]
        del advs[adv_id]
        if not advs:
            del self.advs_by_hop[hop]
        out = [Out(n, "unadv", adv_id) for n in self.neighbors if n != hop]
        if hop in self._nset:
            wanted = self.wanted[hop]
            for sid in list(wanted):
                if not self._wanted_at(self.prt[sid], hop):
                    del wanted[sid]
            self._reconcile(hop, out)
        return out

    # -- subscriptions ------------------------------------------------------------
    def subscribe(self, sub_id: str, f: Filter, hop: str) -> list[Out]:
        if sub_id in self.prt:
            return []
        e = Entry(sub_id, f, hop)
        self.prt[sub_id] = e
        self.index.add(sub_id, f, hop)
        out: list[Out] = []
        for n in self.neighbors:
            if n != hop and self._wanted_at(e, n):
                self.wanted[n][sub_id] = None
                self._offer(n, e, out)
        return out

    def unsubscribe(self, sub_id: str, hop: str) -> list[Out]:
        e = self.prt.get(sub_id)
        if e is None or e.hop != hop:
            return []
        del self.prt[sub_id]
        self.index.remove(sub_id)
        out: list[Out] = []
        for n in self.neighbors:
            was_wanted = self.wanted[n].pop(sub_id, _MISSING) is not _MISSING
            if self.covering == "off":
                if self.sent[n].pop(sub_id, None) is not None:
                    out.append(Out(n, "unsub", sub_id))
            elif sub_id in self.sent[n] or (was_wanted and self.covering == "lazy"):
                self._reconcile(n, out)
        return out

    # -- re-sync ------------------------------------------------------------------
    def resync(self, peer: str) -> list[Out]:
        """What ``peer`` needs after its connection came back (maybe restarted empty)."""
        if peer not in self._nset:
            return []
        out = [Out(peer, "adv", e.id, e.filter) for e in self.srt.values() if e.hop != peer]
        out += [Out(peer, "sub", sid, f) for sid, f in self.sent[peer].items()]
        return out

    # -- internals ----------------------------------------------------------------
    def _wanted_at(self, e: Entry, n: str) -> bool:
        if e.hop == n:
            return False
        for af in self.advs_by_hop.get(n, {}).values():
            if intersects(e.filter, af):
                return True
        return False

    def _offer(self, n: str, e: Entry, out: list[Out]) -> None:
        """A subscription became wanted at n: forward it unless covering quenches it."""
        sent = self.sent[n]
        if e.id in sent:
            return
        if self.covering != "off":
            for f in sent.values():
                if covers(f, e.filter):
                    return
        sent[e.id] = e.filter
        out.append(Out(n, "sub", e.id, e.filter))

    def _reconcile(self, n: str, out: list[Out]) -> None:
        """Recompute sent[n] after something left wanted(n); subs first, then unsubs."""
        wanted, sent = self.wanted[n], self.sent[n]
        if self.covering == "off":
            for sid in [s for s in sent if s not in wanted]:
                del sent[sid]
                out.append(Out(n, "unsub", sid))
            return
        live = {sid: f for sid, f in sent.items() if sid in wanted}
        retired = {sid: f for sid, f in sent.items() if sid not in wanted}
        keep_retired: set[str] = set()
        new: list[str] = []
        for sid in wanted:
            if sid in live:
                continue
            f = self.prt[sid].filter
            if any(covers(g, f) for g in live.values()):
                continue
            if self.covering == "lazy":
                r = next((rid for rid in retired if covers(retired[rid], f)), None)
                if r is not None:
                    keep_retired.add(r)
                    continue
            live[sid] = f
            new.append(sid)
        for sid in new:
            sent[sid] = live[sid]
            out.append(Out(n, "sub", sid, live[sid]))
        for sid in retired:
            if sid not in keep_retired:
                del sent[sid]
                out.append(Out(n, "unsub", sid))
