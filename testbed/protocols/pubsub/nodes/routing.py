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

* ``retract`` (transactional mobility, Hu et al. section 5): like ``active``, and in
  addition forwarding S to H unsubscribes (*retracts*) every subscription already in
  ``sent[H]`` that S covers (they stay wanted, now quenched by S). Withdrawing S then
  forwards them again first (as ``active``). So a covering root that moves induces
  unsubscriptions of the non-roots when it arrives and subscriptions when it leaves:
  the paper's pathological case. No delivery is lost (FIFO: the cover travels before
  the retraction; the uncovered travel before the unsubscription).

Tentative entries (the mobility reconfiguration protocol; covering ``off`` only):
:meth:`RoutingTable.prepare_sub` adds a second, tentative hop for a subscription
(publications then go to both the old and the new hop), :meth:`commit_sub` makes the
new hop the entry's hop and updates ``wanted``/``sent`` *silently* (the neighbours on
the move's path commit too, so no message is needed), :meth:`abort_sub` drops the
tentative hop. ``prepare_adv``/``commit_adv``/``abort_adv`` do the same for an
advertisement's SRT entry (the subscriptions its new direction attracts are
returned as ``sub`` messages at commit). None of these send anything on their own
but what they return. Every change made by these methods, and every forward or
retraction while :attr:`RoutingTable.cause` is set, is appended to
:attr:`RoutingTable.changes` as a :class:`Change` tagged with the cause (a move id)
when ``changes`` is a list (``None``, the default, records nothing).

Re-sync (:meth:`RoutingTable.resync`): what a neighbour needs after its
connection comes back (it may have restarted empty): every advertisement not
learned from it, then every subscription in ``sent[peer]``. A peer that did not
restart ignores them as duplicates. :meth:`RoutingTable.sweep` is the other half of a
*full* re-sync (the broker's): the receiver withdraws what it had learnt from the sender
and the sender no longer holds (a withdrawal lost while the link was down).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from testbed.protocols.pubsub.nodes.filters import Filter, Pred, covers, intersects, value_type

COVERING_MODES = ("off", "lazy", "active", "retract")


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


@dataclass(frozen=True)
class Change:
    """One routing change with its cause: ``op`` in prepare | commit | abort | fwd | retract;
    ``table`` prt | srt | sent; ``hop`` the hop concerned (the new hop, or the neighbour)."""

    cause: str | None
    op: str
    table: str
    id: str
    hop: str


@dataclass
class Tentative:
    """A tentative hop of entry ``id`` for move ``mid`` (``old`` = the hop before, if any)."""

    mid: str
    id: str
    filter: Filter
    hop: str
    old: str | None


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

    def clone(self) -> "MatchIndex":
        """An independent copy (compiled entries are immutable once built, so they are shared)."""
        n = MatchIndex.__new__(MatchIndex)
        n._eq = {a: {v: dict(slot) for v, slot in byval.items()} for a, byval in self._eq.items()}
        n._scan = dict(self._scan)
        n._where = dict(self._where)
        return n

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
        self.tentative: dict[tuple[str, str], Tentative] = {}  # (mid, sub id) -> tentative PRT hop
        self.tentative_adv: dict[tuple[str, str], Tentative] = {}  # (mid, adv id) -> tentative SRT hop
        self.cause: str | None = None  # tag of the changes being made (a move id)
        self.changes: list[Change] | None = None  # when a list: every tagged change is appended

    def clone(self) -> "RoutingTable":
        """A deep, independent copy: changing either table afterwards never changes the other.

        Filters and compiled matchers are immutable and shared; every table, entry, set and
        index is new. Attributes a subclass adds are copied shallowly: override
        ``clone`` (calling ``super().clone()``) to copy them deeply.
        """
        t = copy.copy(self)
        t.srt = {k: Entry(e.id, e.filter, e.hop) for k, e in self.srt.items()}
        t.advs_by_hop = {h: dict(d) for h, d in self.advs_by_hop.items()}
        t.prt = {k: Entry(e.id, e.filter, e.hop) for k, e in self.prt.items()}
        t.wanted = {h: dict(d) for h, d in self.wanted.items()}
        t.sent = {h: dict(d) for h, d in self.sent.items()}
        t.index = self.index.clone()
        t.tentative = {k: copy.copy(v) for k, v in self.tentative.items()}
        t.tentative_adv = {k: copy.copy(v) for k, v in self.tentative_adv.items()}
        t.changes = list(self.changes) if self.changes is not None else None  # Change is frozen
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

    def sweep(self, peer: str, advs: Iterable[str], subs: Iterable[str]) -> tuple[list[str], list[str], list[Out]]:
        """Withdraw what was learnt from ``peer`` and is not in its full re-sync (``advs``, ``subs``:
        the ids it re-sent): unsubscribe each such subscription, then unadvertise each such
        advertisement, as if ``peer`` had sent the withdrawals that were lost (its restart, a cut).
        Returns (advertisement ids withdrawn, subscription ids withdrawn, the messages to send)."""
        if peer not in self._nset:
            return [], [], []
        keep_a, keep_s = set(advs), set(subs)
        gone_s = [sid for sid, e in self.prt.items() if e.hop == peer and sid not in keep_s]
        gone_a = [aid for aid, e in self.srt.items() if e.hop == peer and aid not in keep_a]
        out: list[Out] = []
        for sid in gone_s:
            out += self.unsubscribe(sid, peer)
        for aid in gone_a:
            out += self.unadvertise(aid, peer)
        return gone_a, gone_s, out

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
        if self.changes is not None and self.cause is not None:
            self.changes.append(Change(self.cause, "fwd", "sent", e.id, n))
        if self.covering == "retract":
            self._retract_covered(n, out)

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
            if self.changes is not None and self.cause is not None:
                self.changes.append(Change(self.cause, "fwd", "sent", sid, n))
        for sid in retired:
            if sid not in keep_retired:
                del sent[sid]
                out.append(Out(n, "unsub", sid))
                if self.changes is not None and self.cause is not None:
                    self.changes.append(Change(self.cause, "retract", "sent", sid, n))
        if self.covering == "retract" and new:
            self._retract_covered(n, out)

    # -- retract covering ---------------------------------------------------------
    def _retract_covered(self, n: str, out: list[Out]) -> None:
        """``retract`` mode: unsubscribe at n every forwarded subscription another forwarded one
        covers (of two equal filters the earlier-arrived stays). Runs after the forwards."""
        sent = self.sent[n]
        if len(sent) < 2:
            return
        order = {sid: i for i, sid in enumerate(self.prt)}
        items = list(sent.items())
        drop = []
        for sid, f in items:
            for oid, g in items:
                if oid == sid or oid in drop or not covers(g, f):
                    continue
                if covers(f, g) and order.get(oid, -1) > order.get(sid, -1):
                    continue  # equal filters: the earlier one stays
                drop.append(sid)
                break
        for sid in drop:
            del sent[sid]
            out.append(Out(n, "unsub", sid))
            if self.changes is not None and self.cause is not None:
                self.changes.append(Change(self.cause, "retract", "sent", sid, n))

    # -- tentative entries (mobility reconfiguration) ------------------------------
    def _record(self, mid: str, op: str, table: str, id: str, hop: str) -> None:
        if self.changes is not None:
            self.changes.append(Change(mid, op, table, id, hop))

    @staticmethod
    def _tkey(id: str, mid: str) -> str:
        return f"{id}\x00{mid}"

    def _need_off(self) -> None:
        if self.covering != "off":
            raise ValueError("tentative entries need covering 'off' (the reconfiguration protocol)")

    def prepare_sub(self, mid: str, sub_id: str, f: Filter, new_hop: str) -> list[Out]:
        """PREPARE: publications matching ``f`` also go to ``new_hop`` until commit or abort."""
        self._need_off()
        key = (mid, sub_id)
        if key in self.tentative:
            return []
        old = self.prt.get(sub_id)
        self.tentative[key] = Tentative(mid, sub_id, f, new_hop, old.hop if old else None)
        if old is None or old.hop != new_hop:
            self.index.add(self._tkey(sub_id, mid), f, new_hop)
        self._record(mid, "prepare", "prt", sub_id, new_hop)
        return []

    def commit_sub(self, mid: str, sub_id: str, pre: str | None) -> list[Out]:
        """COMMIT: the entry's hop becomes the tentative hop; ``pre`` (the path neighbour toward the
        source, None at the source) now holds the entry toward us, so it joins ``sent[pre]`` silently;
        the new hop leaves wanted/sent silently. No messages. Unknown (mid, id): nothing."""
        self._need_off()
        t = self.tentative.pop((mid, sub_id), None)
        if t is None:
            return []
        self.index.remove(self._tkey(sub_id, mid))
        e = self.prt.get(sub_id)
        if e is None:
            e = Entry(sub_id, t.filter, t.hop)
            self.prt[sub_id] = e
        else:
            e.hop, e.filter = t.hop, t.filter
        self.index.add(sub_id, e.filter, e.hop)
        for n in self.neighbors:
            w, s = self.wanted[n], self.sent[n]
            if n == e.hop:
                w.pop(sub_id, None)
                s.pop(sub_id, None)
            else:
                if self._wanted_at(e, n):
                    w[sub_id] = None
                else:
                    w.pop(sub_id, None)
                if n == pre:
                    s[sub_id] = e.filter
        self._record(mid, "commit", "prt", sub_id, e.hop)
        return []

    def abort_sub(self, mid: str, sub_id: str) -> list[Out]:
        """ABORT: drop the tentative hop (the entry keeps its old hop). Unknown (mid, id): nothing."""
        t = self.tentative.pop((mid, sub_id), None)
        if t is None:
            return []
        self.index.remove(self._tkey(sub_id, mid))
        self._record(mid, "abort", "prt", sub_id, t.hop)
        return []

    def remove_local_sub(self, sub_id: str, hop: str) -> None:
        """Forget a subscription whose hop is a local endpoint without telling anyone (a moved copy's
        leftover after its path committed elsewhere, or a crash cleanup)."""
        e = self.prt.get(sub_id)
        if e is None or e.hop != hop:
            return
        del self.prt[sub_id]
        self.index.remove(sub_id)
        for n in self.neighbors:
            self.wanted[n].pop(sub_id, None)
            self.sent[n].pop(sub_id, None)

    def prepare_adv(self, mid: str, adv_id: str, f: Filter, new_hop: str) -> list[Out]:
        """PREPARE of a moving publisher's advertisement: remember the new direction (no messages)."""
        self._need_off()
        key = (mid, adv_id)
        if key in self.tentative_adv:
            return []
        old = self.srt.get(adv_id)
        self.tentative_adv[key] = Tentative(mid, adv_id, f, new_hop, old.hop if old else None)
        self._record(mid, "prepare", "srt", adv_id, new_hop)
        return []

    def commit_adv(self, mid: str, adv_id: str, pre: str | None) -> list[Out]:
        """COMMIT (section 4.4): SRT (adv, pre) becomes (adv, suc). Subscriptions intersecting adv
        whose last hop is not suc are forwarded to suc if not already sent there (cases 1 and 3);
        those from suc stay only if another advertisement still wants them toward its hop
        (case 2: wanted/sent toward the old hop are reconciled). Returns the sub/unsub messages."""
        self._need_off()
        t = self.tentative_adv.pop((mid, adv_id), None)
        if t is None:
            return []
        out: list[Out] = []
        old = self.srt.get(adv_id)
        if old is not None:
            advs = self.advs_by_hop.get(old.hop, {})
            advs.pop(adv_id, None)
            if not advs:
                self.advs_by_hop.pop(old.hop, None)
        self.srt[adv_id] = Entry(adv_id, t.filter, t.hop)
        self.advs_by_hop.setdefault(t.hop, {})[adv_id] = t.filter
        if old is not None and old.hop in self._nset and old.hop == pre:
            # pre now holds the adv toward us: it need not be re-flooded, but subs wanted there
            # only because of adv are no longer wanted (they would flow back toward the old place)
            wanted = self.wanted[pre]
            for sid in list(wanted):
                if not self._wanted_at(self.prt[sid], pre):
                    del wanted[sid]
            self._reconcile(pre, out)
        if t.hop in self._nset:
            wanted = self.wanted[t.hop]
            for e in self.prt.values():
                if e.hop != t.hop and e.id not in wanted and intersects(e.filter, t.filter):
                    wanted[e.id] = None
                    self._offer(t.hop, e, out)
        self._record(mid, "commit", "srt", adv_id, t.hop)
        return out

    def abort_adv(self, mid: str, adv_id: str) -> list[Out]:
        t = self.tentative_adv.pop((mid, adv_id), None)
        if t is None:
            return []
        self._record(mid, "abort", "srt", adv_id, t.hop)
        return []

    def dump(self) -> dict[str, Any]:
        """The tables as plain data (for the end-of-run ``rt_dump``): PRT/SRT entries, tentatives."""
        return {
            "prt": [[e.id, e.hop, e.filter.text] for e in self.prt.values()],
            "srt": [[e.id, e.hop, e.filter.text] for e in self.srt.values()],
            "tentative": [[t.mid, t.id, t.hop] for t in self.tentative.values()]
            + [[t.mid, t.id, t.hop] for t in self.tentative_adv.values()],
        }
