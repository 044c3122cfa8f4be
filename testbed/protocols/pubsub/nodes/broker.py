"""The PADRES broker: a :class:`RoutingTable` behind the node runtime.

Wire messages (msgpack maps, key ``k``); ``c`` is the logical client id and is
present exactly on messages between a client process and its broker:

    adv    {k, id, f, [c]}         advertisement (f = filter text)
    unadv  {k, id, [c]}
    sub    {k, id, f, [c]}
    unsub  {k, id, [c]}
    pub    {k, id, c, s, a, p, t, h}   publication: id "<client>:<seq>", c publisher,
                                    s seq, a attrs, p payload (bytes), t publisher's
                                    send wall ns, h broker hops so far
    pub to a client process: the same plus ``to`` = [client ids] (one frame per process)

Messages from a process that is not an overlay neighbour are from client
processes; their routing hop is ``"<process>/<client>"``. Re-sync: on
``on_peer_up(neighbour)`` (and ``on_link_up``, a silent cut healed) the broker sends what the neighbour needs
(:meth:`RoutingTable.resync`); ids make it idempotent, so a restarted broker
re-learns its state from its neighbours and clients without duplicate entries.

Re-sync markers (measured recovery):

    rsb    {k, rw, [full]}  a re-sync wave begins on this link (rw: the wave id "<sender>><receiver>@<wall ns>";
                     full: a full re-sync, see below)
    rse    {k, rw}    everything of wave rw on this link was sent before this frame

The sender of a re-sync (a broker on ``on_peer_up``, a client process re-issuing its
clients' state) frames it with ``rsb`` ... ``rse``. Links are FIFO and a broker handles one
frame at a time, so when the receiver handles ``rse`` it has *applied* every frame of the
re-sync: it logs ``broker_resync_applied`` (peer = the sender, wave = rw). The routing
messages the re-sync made it send on (a subscription re-learnt here that a further broker
still lacks) carry the wave on: the first one to a broker is preceded by ``rsb``, and ``rse``
follows there once the wave's ``rse`` came in, so every broker whose tables the re-sync
changed logs its own ``broker_resync_applied``; the wave ends when no broker forwards it
further (ids are idempotent: a broker that already knew everything sends nothing on).
``analysis.routes`` ends a restart's or heal's recovery window at the last of those rows.

Full re-syncs (``rsb`` with ``full``): a re-sync re-sends what the sender holds, never what it
withdrew, so a withdrawal lost while the link was down (an unsubscription a restarted broker never
received, one dropped by a cut) would leave the neighbour routing to it for the rest of the run.
A broker is *complete* once it has applied the re-sync of every overlay neighbour since it
started; its re-syncs from then on are full, and a restarted broker (its ``state_dir`` counts
its starts) sends one full re-sync to every neighbour when it becomes complete. The receiver of
a full re-sync withdraws what it had learnt from the sender and the sender did not re-send
(:meth:`RoutingTable.sweep`, logged as ``broker_resync_swept``) before it logs the wave
applied; the withdrawals travel on with the wave. ``RESYNC_SWEEP`` = False (the mobility and
transactional brokers, whose moves and transactions change routes silently) neither sweeps nor
sends full re-syncs.
"""

from __future__ import annotations

from typing import Any

import os

from testbed.protocols.pubsub.nodes.clients import next_incarnation
from testbed.protocols.pubsub.nodes.filters import FilterError, parse_cached
from testbed.protocols.pubsub.nodes.routing import Out, RoutingTable
from testbed.protocols.pubsub.nodes import events as _events  # noqa: F401  (registers the pubsub events)
from testbed.nodes.runtime.api import Node

TABLES_INTERVAL_S = 1.0
_COUNTERS = ("adv_in", "unadv_in", "sub_in", "unsub_in", "pub_in", "pub_out", "pub_unmatched",
             "deliver_out", "adv_out", "unadv_out", "sub_out", "unsub_out", "resync", "bad")


class Broker(Node):
    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        params = self.config.get("params") or {}
        self.table = RoutingTable(self.config.get("neighbors") or [], params.get("covering", "off"))
        self._nset = frozenset(self.table.neighbors)
        self._hops: dict[tuple[str, str], str] = {}
        self._client_of: dict[str, tuple[str, str]] = {}
        self.counters = dict.fromkeys(_COUNTERS, 0)
        self._pub_in = 0  # hot-path counters kept as plain attributes
        self._pub_out = 0
        self._deliver_out = 0
        self._unmatched = 0
        self._tables_interval = float(params.get("tables_interval", TABLES_INTERVAL_S))
        self._handlers = self._bind_handlers()
        self._waves_in: dict[str, dict[str, None]] = {}  # src -> re-sync waves open on its link
        self._waves_out: dict[tuple[str, str], dict[str, None]] = {}  # (src, wave) -> where it went on
        self._synced: set[str] = set()  # neighbours whose own re-sync was applied here since this start
        self.complete = False  # every neighbour's re-sync applied: this broker's re-syncs are full
        self._full: dict[str, tuple[str, set[str], set[str]]] = {}  # src -> (wave, adv ids, sub ids) re-sent
        sd = self.config.get("state_dir")
        self._restarted = bool(sd) and self.RESYNC_SWEEP and next_incarnation(os.path.join(sd, "pubsub-broker")) > 0

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        self.rt.call_later(self._tables_interval, self._tables_tick)

    async def stop(self) -> None:
        self._log_tables()

    def _tables_tick(self) -> None:
        self._log_tables()
        self.rt.call_later(self._tables_interval, self._tables_tick)

    def _log_tables(self) -> None:
        s = self.table.sizes()
        self.rt.log("broker_tables", srt=s["srt"], prt=s["prt"], covered=s["covered"])
        self.rt.log("broker_counters", **self._counter_snapshot(), sent_subs=s["sent"],
                    retired=s["retired"])

    def _counter_snapshot(self) -> dict[str, int]:
        c = dict(self.counters)
        c["pub_in"], c["pub_out"] = self._pub_in, self._pub_out
        c["deliver_out"], c["pub_unmatched"] = self._deliver_out, self._unmatched
        return c

    def status(self) -> dict[str, Any]:
        return {**self.table.sizes(), **self._counter_snapshot(), "covering": self.table.covering}

    def on_link_up(self, peer: str) -> None:
        """A silent cut or partition to a neighbour healed: what was sent meanwhile was dropped
        (a routing message too), so re-send what the neighbour needs, as after a reconnect."""
        self.on_peer_up(peer)

    #: Full re-syncs and sweeps (see the module docstring); a subclass whose protocol changes
    #: routes silently (moves, transactions) turns them off.
    RESYNC_SWEEP = True

    def on_peer_up(self, peer: str) -> None:
        if peer in self._nset:
            self._resync(peer, self.complete and self.RESYNC_SWEEP)

    def _resync(self, peer: str, full: bool) -> None:
        outs = self.table.resync(peer)
        self.counters["resync"] += 1
        nadv = sum(1 for o in outs if o.kind == "adv")
        self.rt.log("broker_resync", peer=peer, advs=nadv, subs=len(outs) - nadv)
        wave = f"{self.name}>{peer}@{self.rt.wall_ns()}"
        self.rt.send(peer, {"k": "rsb", "rw": wave, "full": True} if full else {"k": "rsb", "rw": wave})
        self.emit(outs)
        self.rt.send(peer, {"k": "rse", "rw": wave})

    # -- re-sync markers ------------------------------------------------------------
    def on_resync_begin(self, src: str, msg: dict[str, Any]) -> None:
        """``rsb``: the frames from ``src`` up to the matching ``rse`` belong to wave ``rw``."""
        w = msg.get("rw")
        if not isinstance(w, str):
            self._bad(src, msg, "rsb without a wave id")
            return
        self._waves_in.setdefault(src, {})[w] = None
        if msg.get("full") and self.RESYNC_SWEEP and src in self._nset and w.startswith(f"{src}>{self.name}@"):
            self._full[src] = (w, set(), set())

    def on_resync_end(self, src: str, msg: dict[str, Any]) -> None:
        """``rse``: wave ``rw`` from ``src`` is applied here; end it where it went on."""
        w = msg.get("rw")
        if not isinstance(w, str):
            self._bad(src, msg, "rse without a wave id")
            return
        full = self._full.get(src)
        was_full = full is not None and full[0] == w
        if was_full:
            del self._full[src]
            gone_a, gone_s, outs = self.table.sweep(src, full[1], full[2])  # type: ignore[index]
            if gone_a or gone_s:
                self.rt.log("broker_resync_swept", peer=src, wave=w, unadvs=len(gone_a), unsubs=len(gone_s))
            if outs:
                self._carry_waves(src, outs)  # the withdrawals travel on with the wave
                self.emit(outs)
        open_ = self._waves_in.get(src)
        if open_ is not None:
            open_.pop(w, None)
            if not open_:
                del self._waves_in[src]
        on = self._waves_out.pop((src, w), {})
        self.rt.log("broker_resync_applied", peer=src, wave=w, fwd=len(on), full=was_full)
        for dst in on:
            self.rt.send(dst, {"k": "rse", "rw": w})
        if src in self._nset and w.startswith(f"{src}>{self.name}@") and not self.complete:
            self._synced.add(src)
            if self._synced >= self._nset:
                self.complete = True
                if self._restarted:  # tell each neighbour what this broker holds now: it sweeps the rest
                    for n in self.table.neighbors:
                        self.on_peer_up(n)  # the re-sync hook (a subclass that never re-syncs keeps to it)

    def _carry_waves(self, src: str, outs: list[Out]) -> None:
        """Routing messages caused by a frame of an open wave carry it on: ``rsb`` before the
        first one to each broker."""
        for w in self._waves_in[src]:
            on = self._waves_out.setdefault((src, w), {})
            for o in outs:
                if o.dst not in on:
                    on[o.dst] = None
                    self.rt.send(o.dst, {"k": "rsb", "rw": w})

    # -- messages -----------------------------------------------------------------
    #: Dispatch table: message kind -> name of a method ``handler(src, msg)``. Tables are
    #: merged along the MRO, so a subclass adds kinds (or replaces a handler) by declaring
    #: its own ``HANDLERS = {"kind": "method", ...}``; the rest stay its bases'.
    HANDLERS: dict[str, str] = {"pub": "on_pub", "adv": "on_adv", "unadv": "on_unadv",
                                "sub": "on_sub", "unsub": "on_unsub",
                                "rsb": "on_resync_begin", "rse": "on_resync_end"}

    @classmethod
    def handler_table(cls) -> dict[str, str]:
        """The merged ``HANDLERS`` of this class and its bases (a subclass's entries win)."""
        merged: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            merged.update(klass.__dict__.get("HANDLERS", {}))
        return merged

    def _bind_handlers(self) -> dict[str, Any]:
        out = {}
        for kind, name in self.handler_table().items():
            fn = getattr(self, name, None)
            if not callable(fn):
                raise TypeError(f"{type(self).__name__}.HANDLERS[{kind!r}] names no method {name!r}")
            out[kind] = fn
        return out

    def hop_of(self, src: str, client: str) -> str:
        """The routing hop of logical client ``client`` of process ``src``: ``"<src>/<client>"``."""
        key = (src, client)
        h = self._hops.get(key)
        if h is None:
            h = f"{src}/{client}"
            self._hops[key] = h
            self._client_of[h] = key
        return h


    def origin(self, src: str, msg: dict[str, Any]) -> str | None:
        """The hop a routing message came from: the neighbour, or the client's hop for a
        client process (None, logged as a bad message, when a client process names no client)."""
        if src in self._nset:
            return src
        c = msg.get("c")
        if not isinstance(c, str):
            self._bad(src, msg, "message from a non-neighbour without a client id")
            return None
        return self.hop_of(src, c)

    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        """Dispatch on ``msg["k"]`` through the handler table (unknown kinds: a bad message).

        A subclass may also override this and call ``super().on_message(src, msg)`` for the
        kinds it does not handle itself."""
        fn = self._handlers.get(msg.get("k"))
        if fn is None:
            if self.origin(src, msg) is not None:
                self._bad(src, msg, f"unknown message kind {msg.get('k')!r}")
            return
        fn(src, msg)

    def _routing(self, src: str, msg: dict[str, Any], op: Any, with_filter: bool) -> None:
        frm = self.origin(src, msg)
        if frm is None:
            return
        full = self._full.get(src) if self._full else None
        if full is not None and isinstance(msg.get("id"), str):  # a frame of a full re-sync: keep its id
            if msg.get("k") == "adv":
                full[1].add(msg["id"])
            elif msg.get("k") == "sub":
                full[2].add(msg["id"])
        try:
            if with_filter:
                outs = op(msg["id"], parse_cached(msg["f"]), frm)
            else:
                outs = op(msg["id"], frm)
        except (KeyError, TypeError, FilterError) as e:
            self._bad(src, msg, f"malformed {msg.get('k')}: {e}")
            return
        if outs and src in self._waves_in:
            self._carry_waves(src, outs)
        self.emit(outs)

    def on_adv(self, src: str, msg: dict[str, Any]) -> None:
        self.counters["adv_in"] += 1
        self._routing(src, msg, self.table.advertise, True)

    def on_unadv(self, src: str, msg: dict[str, Any]) -> None:
        self.counters["unadv_in"] += 1
        self._routing(src, msg, self.table.unadvertise, False)

    def on_sub(self, src: str, msg: dict[str, Any]) -> None:
        self.counters["sub_in"] += 1
        self._routing(src, msg, self.table.subscribe, True)

    def on_unsub(self, src: str, msg: dict[str, Any]) -> None:
        self.counters["unsub_in"] += 1
        self._routing(src, msg, self.table.unsubscribe, False)

    def _bad(self, src: str, msg: dict[str, Any], why: str) -> None:
        self.counters["bad"] += 1
        self.rt.log("broker_bad_message", peer=src, kind=str(msg.get("k")), reason=why[:200])

    def emit(self, outs: list[Out]) -> None:
        """Send the routing messages a :class:`RoutingTable` operation returned."""
        send = self.rt.send
        c = self.counters
        for o in outs:
            if o.kind == "adv" or o.kind == "sub":
                send(o.dst, {"k": o.kind, "id": o.id, "f": o.filter.text})  # type: ignore[union-attr]
            else:
                send(o.dst, {"k": o.kind, "id": o.id})
            c[o.kind + "_out"] += 1


    def on_pub(self, src: str, msg: dict[str, Any]) -> None:
        """The hot path: match, forward to each next hop once, group local clients per process."""
        hops = self.pub_next_hops(src, msg)
        if hops:
            rest = self.forward_pub(hops, msg)
            if rest:
                raise KeyError(f"publication {msg.get('id')!r} routed to unknown hops {sorted(rest)}")

    def pub_next_hops(self, src: str, msg: dict[str, Any]) -> set[str] | None:
        """Where a publication goes next: the last hops of matching PRT entries minus where it
        came from (``msg["h"]``, its hop count, is incremented); None when nowhere (counted)."""
        self._pub_in += 1
        if src in self._nset:
            frm = src
        else:
            key = (src, msg.get("c"))
            frm = self._hops.get(key)  # type: ignore[arg-type]
            if frm is None:
                if not isinstance(key[1], str):
                    self._bad(src, msg, "publication from a non-neighbour without a client id")
                    return None
                frm = self.hop_of(src, key[1])
        try:
            hops = self.table.index.hops(msg["a"])
        except (KeyError, AttributeError, TypeError) as e:
            self._bad(src, msg, f"malformed pub: {e}")
            return None
        hops.discard(frm)
        if not hops:
            self._unmatched += 1
            return None
        msg["h"] = msg.get("h", 0) + 1
        return hops

    def forward_pub(self, hops: set[str], msg: dict[str, Any]) -> list[str] | tuple[()]:
        """Send a publication to the neighbours and the local client processes among ``hops``
        (one frame per process, naming its clients); returns the hops that are neither (a
        subclass's own kinds of hop), in no particular order: a list, or ``()`` when there
        are none (the common case allocates nothing)."""
        nset = self._nset
        send = self.rt.send
        local: dict[str, list[str]] | None = None
        rest: list[str] | None = None
        client_of = self._client_of
        for h in hops:
            if h in nset:
                send(h, msg)  # the runtime encodes at send time: one dict for every neighbour
                self._pub_out += 1
                continue
            pc = client_of.get(h)
            if pc is None:
                if rest is None:
                    rest = [h]
                else:
                    rest.append(h)
                continue
            proc, cid = pc
            if local is None:
                local = {proc: [cid]}
            elif proc in local:
                local[proc].append(cid)
            else:
                local[proc] = [cid]
        if local is not None:
            # neighbours are served: reuse the same dict for the client processes
            for proc, cids in local.items():
                msg["to"] = cids
                send(proc, msg)
                self._deliver_out += len(cids)
        return () if rest is None else rest

