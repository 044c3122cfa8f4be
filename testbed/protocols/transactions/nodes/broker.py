"""Transactional brokers on the pub/sub core: D-TX (Algs 1-3), D-TXNI (§5), S-TX (Alg 4).

Every variant is the pub/sub :class:`Broker` (non-transactional adv/sub/pub work as
there) plus transaction messages. Messages between a client process and its broker
carry ``c`` (client to broker) or ``to`` (broker to client), as in the pub/sub core.

    txinit  {k, tx, o:[txc, seq], ssid}    phase 1 (D-TX, D-TXNI), flooded; ack txinitack
    txop    {k, tx, op:{id, n, kind, a|f, sid, ...}, [d]}
                                           one operation; kind pub | tcm | sub | usub |
                                           adv | uadv (sid = the adv id). An operation a
                                           broker triggers (Alg 2: a sub an adv releases,
                                           a usub a uadv withdraws) carries trig (its
                                           parent) and orig (the tx's own sub it continues)
                                           D-TX/D-TXNI: acknowledged by txack {k, tx, op}
                                           once every destination and every triggered
                                           operation acknowledged (Alg 2);
                                           S-TX: d = dependencies [[op_id, sender, filter, kind]]
    txprep  {k, tx}                        phase 3, flooded; ack txprepack {k, tx, ok}
    txcmt   {k, tx, [d]} / txabt {k, tx}   flooded to brokers and to participating clients;
                                           acks txcmtack / txabtack combined toward the TXC
    join    {k, c}                         S-TX overlayJoinMsg: builds CRT[client] = next hop
    txq     {k, tx, c}                     a client asks for an outcome it may have missed
    txcmt/txabt with rs: true              an outcome re-sent after a reconnection: applied
                                           where the transaction is open, passed on, not acked
    txssid  {k, ssid}                      D-TX/D-TXNI, on a connection coming up: the sender's
                                           snapshot counter; a broker that has not taken part
                                           since it (re)started adopts the highest
    txopok  {k, tx, op}                    S-TX: a neighbour broker processed (or knows) an
                                           operation; the sender stops keeping it for re-sending
    txknown {k, ops: [[tx, op], ...]}      S-TX, on a connection coming up (from a neighbour
                                           broker or a local client): operations the receiver
                                           is known to have processed (it sent them on, or
                                           acknowledged them); a restarted broker re-learns
                                           them before its held messages are processed; from a
                                           neighbour, it also says its re-sync is complete
    txsynced {k, c}                        S-TX: a client process re-sent everything to its
                                           restarted broker (after its subscriptions, txknown,
                                           operations and outcomes)

Recovery after a broker restart (docs/transactions.md): the restarted broker holds
transaction messages for ``params.settle`` while the pub/sub re-sync rebuilds its tables;
neighbours re-send recent outcomes (and, S-TX, their CRT and the operations of open
transactions) when the connection comes back. D-TX: a commit sends its routing changes, as plain
routing messages, to the neighbours whose connection came back while the transaction was open
here (they were re-synced from a stable table without its writes, and lost its context).

Flood-and-collect (init, prep, cmt, abt): a broker forwards to every neighbour but the
one it came from (cmt/abt also to the local clients that took part), then acknowledges
upstream once its own step is done and every target acknowledged; ``ok`` is ANDed.

D-TX: routing-state versions keyed by SSID (the count of commits applied here);
a transaction routes on ``TXRS`` = a copy of version ``ssid`` plus its own writes;
prepare waits for every transaction ordered before it, key ``(ssid, txc, int seq)``,
to terminate here, then flags a conflict iff some buffered publication routes
differently on version ``ssid`` and on the current version; commit = copy(current) +
replay of the transaction's writes. D-TXNI: operations act on the shared table, an
undo log is applied on abort, prepare is always TRUE. S-TX: operations act on the
shared table (undo log for an explicit abort), no acknowledgements; an operation or a
commit waits while one of its sub/usub dependencies is satisfiable here and not yet
processed (§6.2; satisfiable = a matching advertisement whose last hop is not the
dependency sender's CRT hop); waiters are released in arrival order. An operation of a
transaction already committed here (re-sent after a restart, behind the re-sent outcome) is
processed after its dependencies like any other, and the outcome follows it to the clients it
reaches; a commit re-sent by its TXC carries its dependencies and waits for them.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from testbed.protocols.pubsub.nodes.broker import Broker
from testbed.protocols.pubsub.nodes.filters import FilterError, intersects, parse_cached
from testbed.protocols.pubsub.nodes.routing import RoutingTable
from testbed.protocols.transactions.nodes import events as _events  # noqa: F401  (registers the events)
from testbed.protocols.transactions.nodes.snapshot import table_ids

FLOODS = ("txinit", "txprep", "txcmt", "txabt")
TX_KINDS = frozenset(FLOODS + tuple(k + "ack" for k in FLOODS)
                     + ("txop", "txack", "join", "txq", "txssid", "txopok", "txknown", "txsynced"))
UNHELD = ("join", "txssid", "txknown", "txsynced")  # taken at once by a broker that is re-learning its state
RECENT_OUTCOMES = 512  # outcomes re-sent to a neighbour whose connection comes back


class TxBroker(Broker):
    """Base of the transactional brokers; ``TxBroker(rt)`` builds the one ``params.variant`` names."""

    RESYNC_SWEEP = False  # no full re-syncs or sweeps: transactions re-learn a restarted broker their own way (pubsub broker.py)

    variant = "blwait"

    def __new__(cls, rt: Any = None):
        if cls is TxBroker and rt is not None:
            v = ((rt.config.get("params") or {}).get("variant")) or "blwait"
            sub = VARIANTS.get(v)
            if sub is None:
                raise ValueError(f"unknown transactions variant {v!r}; one of {sorted(VARIANTS)}")
            return super().__new__(sub)
        return super().__new__(cls)

    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        self.k = 0  # tx_proc counter
        self.crt: dict[str, str] = {}  # S-TX client routing table: client -> hop
        self._coll: dict[tuple[str, str], dict[str, Any]] = {}  # (flood kind, tx) -> collector
        self._parts: dict[str, set[str]] = {}  # tx -> local client hops that took part
        self.terminated: dict[str, str] = {}  # tx -> committed | aborted
        self.recent: OrderedDict[str, str] = OrderedDict()  # the last RECENT_OUTCOMES of them
        # a (re)started broker first re-learns its routing state: transaction messages that come
        # within `settle` of its start wait until then (at the first start none come that early)
        hold = float((self.config.get("params") or {}).get("settle", 1.0))
        self._started_ns = rt.mono_ns()
        self._hold_until = self._started_ns + int(hold * 1e9)
        self._held: list[tuple[str, dict[str, Any]]] | None = []
        self._trig_k = 0  # operations this broker triggered (adv/uadv releasing subscriptions)
        self._sub_ops: dict[str, dict[str, str]] = {}  # tx -> sub id -> the op that last touched it

    # -- lifecycle ----------------------------------------------------------------
    async def stop(self) -> None:
        await super().stop()
        srt, prt = table_ids(self.table)
        self.rt.log("tx_tables", srt=srt, prt=prt, ssid=getattr(self, "ssid", 0))

    def on_peer_up(self, peer: str) -> None:
        """Routing re-sync (the pub/sub core), then the outcomes a restarted neighbour may have
        missed: re-sent as fire-and-forget floods (``rs``), applied where still open."""
        super().on_peer_up(peer)
        if peer in self._nset:
            self._peer_up_tx(peer)

    def _peer_up_tx(self, peer: str) -> None:
        for tx, outcome in self.recent.items():
            self.rt.send(peer, {"k": "txcmt" if outcome == "committed" else "txabt", "tx": tx, "rs": True})

    # -- dispatch -----------------------------------------------------------------
    def _flush_held(self) -> None:
        held, self._held = self._held or [], None
        if held:
            self.rt.log("tx_held", count=len(held))
        for src, msg in held:
            self.on_message(src, msg)

    def _holding(self) -> bool:
        """Transaction messages wait: ``settle`` after the start (S-TX, after a restart: also
        until every peer re-synchronised it)."""
        return self.rt.mono_ns() < self._hold_until

    def _try_flush(self) -> None:
        if self._held is not None and not self._holding():
            self._flush_held()

    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        k = msg.get("k")
        if k not in TX_KINDS:
            super().on_message(src, msg)
            return
        if self._held is not None and k not in UNHELD:
            if self._holding():
                if not self._held:
                    for t in self._hold_checks():
                        self.rt.call_later(max(0.0, (t - self.rt.mono_ns()) / 1e9), self._try_flush)
                self._held.append((src, msg))
                return
            self._flush_held()
        if src in self._nset:
            frm = src
        else:
            c = msg.get("c")
            if not isinstance(c, str):
                self._bad(src, msg, "transaction message from a non-neighbour without a client id")
                return
            frm = self.hop_of(src, c)
        try:
            self._on_tx(k, frm, msg)
        except (KeyError, TypeError, ValueError, FilterError) as e:
            self._bad(src, msg, f"malformed {k}: {e!r}")

    def _on_tx(self, k: str, frm: str, msg: dict[str, Any]) -> None:
        if k in FLOODS:
            self._on_flood(k, frm, msg)
        elif k.endswith("ack") and k[:-3] in FLOODS:
            self._on_flood_ack(k[:-3], frm, msg)
        elif k == "txop":
            self._on_op(frm, msg)
        elif k == "txack":
            self._on_op_ack(frm, msg)
        elif k == "join":
            self._on_join(frm, msg)
        elif k == "txssid":
            self._on_ssid(frm, msg)
        elif k == "txopok":
            self._on_op_ok(frm, msg)
        elif k == "txknown":
            self._on_known(frm, msg)
        elif k == "txq":  # a client asks for an outcome it may have missed (its broker restarted)
            tx = msg["tx"]
            if tx in self.terminated:
                self.send_hop(frm, {"k": "txcmt" if self.terminated[tx] == "committed" else "txabt",
                                    "tx": tx, "rs": True})
            else:
                self._part(tx, frm)

    # -- helpers ------------------------------------------------------------------
    def send_hop(self, hop: str, msg: dict[str, Any]) -> None:
        """Send to a neighbour broker, or to a local client (adding ``to``)."""
        if hop in self._nset:
            self.rt.send(hop, msg)
        else:
            proc, cid = self._client_of[hop]
            m = dict(msg)
            m.pop("c", None)
            m["to"] = cid
            self.rt.send(proc, m)

    def _part(self, tx: str, hop: str) -> None:
        if hop not in self._nset:
            self._parts.setdefault(tx, set()).add(hop)

    def _log_proc(self, tx: str, op: dict[str, Any], dests: list[str]) -> None:
        self.k += 1
        self.rt.log("tx_proc", tx=tx, op_id=op["id"], kind=op["kind"], dests=sorted(dests), k=self.k)

    # -- flood and collect ----------------------------------------------------------
    def _on_flood(self, kind: str, frm: str, msg: dict[str, Any]) -> None:
        tx = msg["tx"]
        if (kind, tx) in self._coll:
            return  # a duplicate (a tree never sends one; a re-sent request would)
        if kind in ("txcmt", "txabt") and tx in self.terminated:
            if not msg.get("rs"):
                self.send_hop(frm, {"k": kind + "ack", "tx": tx, "ok": True})
            return  # known here already
        self._part(tx, frm)
        if msg.get("rs"):
            self._resync_outcome(kind, frm, msg)
            return
        fwd = self._flood_step(kind, frm, msg)
        if fwd is None:
            return  # buffered (S-TX commit waiting for dependencies); _release calls _do_flood
        self._do_flood(kind, frm, fwd)

    def _resync_outcome(self, kind: str, frm: str, msg: dict[str, Any]) -> None:
        """An outcome re-sent after a restart: apply it and pass it on, without acknowledgements."""
        if self._flood_step(kind, frm, {"k": kind, "tx": msg["tx"], "rs": True}) is None:
            return  # S-TX: waits behind the transaction's buffered operations; _release passes it on
        self._rs_forward(kind, frm, msg["tx"])

    def _rs_forward(self, kind: str, frm: str, tx: str) -> None:
        fwd = {"k": kind, "tx": tx, "rs": True}
        for h in [n for n in self.table.neighbors if n != frm] + sorted(self._parts.pop(tx, ())):
            if h != frm:
                self.send_hop(h, fwd)
        for k in ("txinit", "txprep"):
            self._coll.pop((k, tx), None)

    def _do_flood(self, kind: str, frm: str, fwd: dict[str, Any]) -> None:
        tx = fwd["tx"]
        targets = [n for n in self.table.neighbors if n != frm]
        if kind in ("txcmt", "txabt"):
            targets += sorted(h for h in self._parts.get(tx, ()) if h != frm)
            for k in ("txinit", "txprep"):  # collectors a lost neighbour left waiting
                self._coll.pop((k, tx), None)
        coll = {"from": frm, "wait": set(targets), "ok": True, "ready": kind != "txprep"}
        self._coll[(kind, tx)] = coll
        for h in targets:
            self.send_hop(h, fwd)
        if kind == "txprep":
            self._try_prepare(tx)
        self._maybe_ack(kind, tx)
        if kind in ("txcmt", "txabt"):
            self._parts.pop(tx, None)

    def _on_flood_ack(self, kind: str, frm: str, msg: dict[str, Any]) -> None:
        coll = self._coll.get((kind, msg["tx"]))
        if coll is None:
            return
        coll["wait"].discard(frm)
        if msg.get("ok") is False:
            coll["ok"] = False
        self._maybe_ack(kind, msg["tx"])

    def _maybe_ack(self, kind: str, tx: str) -> None:
        coll = self._coll.get((kind, tx))
        if coll is None or not coll["ready"] or coll["wait"]:
            return
        del self._coll[(kind, tx)]
        self.send_hop(coll["from"], {"k": kind + "ack", "tx": tx, "ok": coll["ok"]})

    def _prepared(self, tx: str, ok: bool) -> None:
        coll = self._coll.get(("txprep", tx))
        if coll is not None:
            coll["ready"] = True
            coll["ok"] = coll["ok"] and ok
            self._maybe_ack("txprep", tx)

    # -- per-variant hooks ------------------------------------------------------------
    def _flood_step(self, kind: str, frm: str, msg: dict[str, Any]) -> dict[str, Any] | None:
        """This broker's step for a flood message; returns the message to forward (None: wait)."""
        tx = msg["tx"]
        if kind in ("txcmt", "txabt"):
            self._terminate(tx, "committed" if kind == "txcmt" else "aborted")
        return {"k": kind, "tx": tx, **{x: msg[x] for x in ("o", "ssid") if x in msg}}

    def _terminate(self, tx: str, outcome: str) -> None:
        self._sub_ops.pop(tx, None)
        self.terminated[tx] = outcome
        self.recent[tx] = outcome
        if len(self.recent) > RECENT_OUTCOMES:
            self.recent.popitem(last=False)
        self.rt.log("tx_phase", tx=tx, phase="commit" if outcome == "committed" else "abort",
                    ssid=getattr(self, "ssid", 0), conflict=False)

    def _try_prepare(self, tx: str) -> None:
        self._prepared(tx, True)

    def _on_op(self, frm: str, msg: dict[str, Any]) -> None:
        self._bad(frm, msg, f"variant {self.variant} takes no transaction operations")

    def _on_op_ack(self, frm: str, msg: dict[str, Any]) -> None:
        pass

    def _on_join(self, frm: str, msg: dict[str, Any]) -> None:
        pass

    def _on_ssid(self, frm: str, msg: dict[str, Any]) -> None:
        pass

    def _on_op_ok(self, frm: str, msg: dict[str, Any]) -> None:
        pass

    def _on_known(self, frm: str, msg: dict[str, Any]) -> None:
        pass

    def _hold_checks(self) -> list[int]:
        """When (mono ns) to see whether the hold can end (it also ends when the last peer
        re-synchronised, S-TX)."""
        return [self._hold_until]

    # -- shared by the variants: apply one op to a table ------------------------------------
    def _apply(self, table: RoutingTable, op: dict[str, Any], frm: str,
               undo: list[tuple] | None) -> list[str]:
        """Apply op to ``table``; return its destinations. Records the inverse in ``undo``."""
        return self._apply_full(table, op, frm, undo)[0]

    def _apply_full(self, table: RoutingTable, op: dict[str, Any], frm: str,
                    undo: list[tuple] | None,
                    raw: list[Any] | None = None) -> tuple[list[str], list[tuple[str, str, str, str]]]:
        """Apply op to ``table``: (its destinations, the operations it triggers). A triggered
        operation (Alg 2) is ``(hop, kind, sub id, filter text)``: an ``adv`` releases the
        subscriptions that were held here for want of a matching advertisement (a ``sub`` toward
        the advertisement's last hop), a ``uadv`` withdraws those forwarded only because of it
        (a ``usub``). Records the inverse of each change in ``undo``; ``raw`` (a list) gets the
        table's routing messages (:class:`Out`) as they are."""
        kind = op["kind"]
        if raw is None:
            raw = []
        if kind == "sub":
            sid = op["sid"]
            outs = table.subscribe(sid, parse_cached(op["f"]), frm)
            raw += outs
            if undo is not None:
                undo.append(("usub", sid, frm))
            return [o.dst for o in outs if o.kind == "sub"], []
        if kind == "usub":
            sid = op["sid"]
            e = table.prt.get(sid)
            outs = table.unsubscribe(sid, frm)
            raw += outs
            if undo is not None and e is not None and e.hop == frm:
                undo.append(("sub", sid, e.filter, frm))
            return [o.dst for o in outs if o.kind == "unsub"], []
        if kind in ("pub", "tcm"):
            return list(table.route(op["a"], frm)), []
        if kind == "adv":
            aid = op["sid"]
            known = aid in table.srt
            outs = table.advertise(aid, parse_cached(op["f"]), frm)
            raw += outs
            if undo is not None and not known:
                undo.append(("unadv", aid, frm))
            return ([o.dst for o in outs if o.kind == "adv"],
                    [(o.dst, "sub", o.id, o.filter.text) for o in outs if o.kind == "sub"])  # type: ignore[union-attr]
        if kind == "uadv":
            aid = op["sid"]
            e = table.srt.get(aid)
            outs = table.unadvertise(aid, frm)
            raw += outs
            if undo is not None and e is not None and e.hop == frm:
                undo.append(("adv", aid, e.filter, frm))
            return ([o.dst for o in outs if o.kind == "unadv"],
                    [(o.dst, "usub", o.id, "") for o in outs if o.kind == "unsub"])
        raise ValueError(f"unknown operation kind {kind!r}")

    def _triggered(self, tx: str, parent: dict[str, Any], hop: str, kind: str, sid: str, f: str) -> dict[str, Any]:
        """Send one operation this broker triggers (Alg 2) to ``hop`` and log it as issued here
        (``tx_op`` with ``client`` = this broker and ``trigger`` = the parent: <SO's Trigger).
        ``orig`` names the transaction's own sub/usub operation it continues, if any (S-TX counts
        that dependency processed where the triggered one is)."""
        self._trig_k += 1
        op = {"id": f"{parent['id']}.r{self._trig_k}@{self.name}", "n": 0, "kind": kind, "c": self.name,
              "sid": sid, "trig": parent["id"]}
        if f:
            op["f"] = f
        orig = self._sub_ops.get(tx, {}).get(sid)
        if orig:
            op["orig"] = orig
        self.rt.log("tx_op", tx=tx, op_id=op["id"], n=0, kind=kind, client=self.name, deps=[parent["id"]],
                    trigger=parent["id"], filter=f, sub_id=sid)
        msg: dict[str, Any] = {"k": "txop", "tx": tx, "op": op}
        if self.variant == "stx":
            msg["d"] = []
        self._forward_op(tx, "", msg, [hop])
        return op

    def _note_op(self, tx: str, op: dict[str, Any]) -> None:
        """Remember which operation of ``tx`` last touched a subscription id (for ``orig``)."""
        if op["kind"] in ("sub", "usub"):
            self._sub_ops.setdefault(tx, {})[op["sid"]] = op.get("orig") or op["id"]

    def _undo(self, table: RoutingTable, undo: list[tuple]) -> None:
        """Apply the inverse operations, newest first, and send what they change to the
        neighbours too: a neighbour that learned an entry from a routing re-sync (not as the
        transaction's operation) has no undo entry for it. Each neighbour also undoes its own
        part; a second removal or addition of the same id is a no-op."""
        outs = []
        for step in reversed(undo):
            if step[0] == "usub":
                outs += table.unsubscribe(step[1], step[2])
            elif step[0] == "sub":
                outs += table.subscribe(step[1], step[2], step[3])
            elif step[0] == "unadv":
                outs += table.unadvertise(step[1], step[2])
            else:
                outs += table.advertise(step[1], step[2], step[3])
        if table is self.table:
            self.emit(outs)

    def _forward_op(self, tx: str, frm: str, msg: dict[str, Any], dests: list[str]) -> None:
        fwd = {"k": "txop", "tx": tx, "op": msg["op"]}
        if "d" in msg:
            fwd["d"] = msg["d"]
        for h in dests:
            self._part(tx, h)
            self.send_hop(h, fwd)


# ---------------------------------------------------------------------------------- D-TX
@dataclass
class TXContext:
    tx: str
    key: tuple
    ssid: int
    txrs: RoutingTable
    base: RoutingTable | None = None  # version ``ssid`` (None: missing here; the prepare votes abort)
    writes: list[tuple] = field(default_factory=list)  # (op dict, from hop) in processing order
    pubs: list[dict[str, Any]] = field(default_factory=list)  # buffered publications' attrs
    undo: list[tuple] = field(default_factory=list)  # D-TXNI
    # neighbours whose connection came back (re-synced from the stable table, which lacks this
    # transaction's writes) while it was open here: told the commit's routing changes (D-TX)
    resynced: set[str] = field(default_factory=set)


class DtxBroker(TxBroker):
    variant = "dtx"
    isolation = True

    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        self.ssid = 0
        self.versions: dict[int, RoutingTable] = {0: self.table}
        # a superseded version stays this long (an init that took it at a broker the commit had
        # not reached yet may still come); one an open transaction uses is held by its context
        self._keep_ns = int(float((self.config.get("params") or {}).get("snapshot_keep", 30.0)) * 1e9)
        self._superseded: dict[int, int] = {}  # ssid -> mono ns it stopped being current
        self._fresh = True  # not yet taken part: adopts the neighbours' snapshot counter
        self.ctx: dict[str, TXContext] = {}
        self._pending: dict[tuple[str, str], dict[str, Any]] = {}  # (tx, op id) -> {from, wait {(hop, op id)}}
        self._ack_for: dict[tuple[str, str, str], tuple[str, str]] = {}  # (tx, op id, hop) -> pending key
        self._deferred: list[str] = []  # prepares waiting for earlier transactions

    def _flood_step(self, kind: str, frm: str, msg: dict[str, Any]) -> dict[str, Any] | None:
        tx = msg["tx"]
        if kind == "txinit":
            ssid = int(msg["ssid"]) if "ssid" in msg else self.ssid  # the TXC's edge broker sets it
            o = msg["o"]
            key = (ssid, str(o[0]), int(o[1]))
            self._fresh = False
            base = self.versions.get(ssid)
            if base is None and self.isolation:  # never a silent fall back to the current table
                self.rt.log("tx_snapshot_missing", tx=tx, ssid=ssid, current=self.ssid,
                            kept=sorted(self.versions))
            txrs = (base or self.table).clone() if self.isolation else self.table
            self.ctx[tx] = TXContext(tx, key, ssid, txrs, base)
            self.rt.log("tx_phase", tx=tx, phase="init", ssid=ssid, conflict=False)
            return {"k": kind, "tx": tx, "o": o, "ssid": ssid}
        if kind == "txcmt":
            self._commit(tx, resent=bool(msg.get("rs")))
        elif kind == "txabt":
            self._abort(tx)
        return {"k": kind, "tx": tx}

    # Alg 2: operations
    def _on_op(self, frm: str, msg: dict[str, Any]) -> None:
        tx, op = msg["tx"], msg["op"]
        ctx = self.ctx.get(tx)
        if ctx is None:
            self.rt.log("broker_bad_message", peer=frm, kind="txop",
                        reason=f"operation {op.get('id')} of an unknown or ended transaction {tx}")
            return
        self._part(tx, frm)
        dests, trig = self._apply_full(ctx.txrs, op, frm, None if self.isolation else ctx.undo)
        self._note_op(tx, op)
        if op["kind"] in ("pub", "tcm"):
            ctx.pubs.append(op["a"])
        else:
            ctx.writes.append((op, frm))
        self._log_proc(tx, op, dests)
        self._forward_op(tx, frm, msg, dests)
        wait = {(h, op["id"]) for h in dests}
        for h, kind, sid, f in trig:  # Alg 2: released subscriptions, each with its own pending ack
            wait.add((h, self._triggered(tx, op, h, kind, sid, f)["id"]))
        if wait:
            self._pending[(tx, op["id"])] = {"from": frm, "wait": wait}
            for h, oid in wait:
                self._ack_for[(tx, oid, h)] = (tx, op["id"])
        else:
            self.send_hop(frm, {"k": "txack", "tx": tx, "op": op["id"]})

    def _on_op_ack(self, frm: str, msg: dict[str, Any]) -> None:
        tx, oid = msg["tx"], msg["op"]
        key = self._ack_for.pop((tx, oid, frm), None)
        p = self._pending.get(key) if key is not None else None
        if p is None:
            return
        p["wait"].discard((frm, oid))
        if not p["wait"]:
            del self._pending[key]
            self.send_hop(p["from"], {"k": "txack", "tx": tx, "op": key[1]})

    # Alg 3: termination
    def _try_prepare(self, tx: str) -> None:
        ctx = self.ctx.get(tx)
        if ctx is None:
            self._prepared(tx, False)
            return
        if self.isolation:
            if any(c.key < ctx.key for t, c in self.ctx.items() if t != tx):
                if tx not in self._deferred:
                    self._deferred.append(tx)
                return
            base = ctx.base
            conflict = base is None or any(base.route(a) != self.table.route(a) for a in ctx.pubs)
        else:
            conflict = False
        self.rt.log("tx_phase", tx=tx, phase="prepare", ssid=ctx.ssid, conflict=conflict)
        self._prepared(tx, not conflict)

    def _retry_deferred(self) -> None:
        waiting, self._deferred = self._deferred, []
        for tx in waiting:
            if ("txprep", tx) in self._coll:
                self._try_prepare(tx)

    def _commit(self, tx: str, resent: bool = False) -> None:
        ctx = self.ctx.pop(tx, None)
        self._fresh = False
        if ctx is not None and self.isolation:
            new = self.table.clone()
            outs: list[Any] = []
            for op, frm in ctx.writes:
                self._apply_full(new, op, frm, None, outs)
            self.table = new
            # a neighbour re-synchronised while the transaction was open here (it restarted) got
            # the stable table without the transaction's writes, and, restarted, lost its own
            # context (its re-sent commit changes nothing there): the commit's routing changes go
            # to it as plain routing messages (sim seeds 511, 553: a subscription a committed op4
            # removed came back to the restarted broker from a neighbour not yet committed)
            late = [o for o in outs if o.dst in ctx.resynced]
            if late:
                self.rt.log("tx_commit_resync", tx=tx, peers=sorted({o.dst for o in late}), msgs=len(late))
                self.emit(late)
            self._advance()
            self.versions[self.ssid] = new
        elif ctx is not None or not resent:
            # a commit of a transaction whose init this broker missed (it restarted since) counts
            # too, so the counters stay aligned; a re-sent one was in the counter it adopted
            self._advance()
            if self.isolation:
                self.versions[self.ssid] = self.table
        self._terminate(tx, "committed")
        self._retry_deferred()

    def _abort(self, tx: str) -> None:
        ctx = self.ctx.pop(tx, None)
        if ctx is not None and not self.isolation:
            self._undo(self.table, ctx.undo)
        for key in [k for k in self._pending if k[0] == tx]:
            del self._pending[key]
        for key in [k for k in self._ack_for if k[0] == tx]:
            del self._ack_for[key]
        self._terminate(tx, "aborted")
        self._retry_deferred()

    def _advance(self) -> None:
        self._superseded[self.ssid] = self.rt.mono_ns()
        self.ssid += 1
        self._gc_versions()

    def _gc_versions(self) -> None:
        """Drop the versions superseded more than ``snapshot_keep`` ago (an open transaction's
        own base is referenced by its context and outlives this)."""
        old = self.rt.mono_ns() - self._keep_ns
        for s in [s for s, t in self._superseded.items() if t < old]:
            del self._superseded[s]
            self.versions.pop(s, None)

    def _peer_up_tx(self, peer: str) -> None:
        self.rt.send(peer, {"k": "txssid", "ssid": self.ssid})
        for ctx in self.ctx.values():
            ctx.resynced.add(peer)
        super()._peer_up_tx(peer)

    def _on_ssid(self, frm: str, msg: dict[str, Any]) -> None:
        """A neighbour's snapshot counter, sent when the connection comes up: a broker that has
        not taken part in a transaction since it (re)started adopts the highest, so snapshot ids
        mean the same commits here as there (a restart would otherwise count again from 0)."""
        s = int(msg["ssid"])
        if self._fresh and s > self.ssid:
            self.rt.log("tx_ssid_resync", peer=frm, old=self.ssid, ssid=s)
            self.versions = {s: self.table}
            self._superseded.clear()
            self.ssid = s


class DtxniBroker(DtxBroker):
    """D-TXNI: the same phases and messages, operations on the shared table, undo on abort."""

    variant = "dtxni"
    isolation = False


# ---------------------------------------------------------------------------------- S-TX
class StxBroker(TxBroker):
    variant = "stx"

    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        self.processed: set[tuple[str, str]] = set()
        self.buffer: list[tuple[str, str, dict[str, Any]]] = []  # (kind, from, msg) in arrival order
        self.undo: dict[str, list[tuple]] = {}
        # tx -> (hop, txop) sent to a neighbour broker, kept while tx is open here or among the
        # recent outcomes (also once acknowledged: a neighbour killed after acknowledging an
        # operation may have lost what it sent on), re-sent when the connection comes back
        self.sent_ops: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        # tx -> neighbour broker -> ids of the operations of tx it is known to have processed and
        # sent on (it sent them here), while tx is open or among the recent outcomes: told to it
        # (txknown) when its connection comes back, a restart having emptied its `processed`
        self.known_at: dict[str, dict[str, set[str]]] = {}
        p = self.config.get("params") or {}
        self._hold_s = float(p.get("hold_timeout", 10.0))
        # A restarted broker holds transaction messages until every neighbour and every client
        # process it had before the crash has re-synchronised it (a neighbour's txknown, a client
        # process's txsynced), at most params.resync_wait after the end of settle (a peer that is
        # down too): a fixed settle ended the hold before a peer whose reconnection backed off had
        # re-subscribed. Its client processes are kept in its stable state_dir (the first life
        # writes them; a file there means a restart).
        sd = self.config.get("state_dir") or ""
        self._peers_file = os.path.join(sd, "stx_peers.json") if sd else ""
        self._procs: set[str] = set()
        self._expect: set[str] = set()
        self._resync_cap = self._hold_until + int(float(p.get("resync_wait", 5.0)) * 1e9)
        if self._peers_file and os.path.exists(self._peers_file):
            try:
                with open(self._peers_file) as f:
                    self._procs = set(json.load(f))
            except (OSError, ValueError):
                self._procs = set()
            self._expect = set(self.table.neighbors) | self._procs
        self._held_since: dict[tuple[str, str], int] = {}  # (kind, tx) of a buffered outcome -> mono ns

    def _peer_up_tx(self, peer: str) -> None:
        """After the routing re-sync: the CRT, the operations this neighbour has not acknowledged
        (a restarted one lost them, one that was down never got them; one that kept them skips
        them as processed), then the recent outcomes (after the operations they end)."""
        for c, hop in self.crt.items():  # a restarted neighbour lost its CRT
            if hop != peer:
                self.rt.send(peer, {"k": "join", "c": c})
        # what it had processed (a restarted one forgot): not processed twice, deps met; also the
        # mark that this neighbour's re-sync (routing, CRT) is complete
        ops = [[tx, oid] for tx, by in self.known_at.items() for oid in sorted(by.get(peer, ()))]
        self.rt.send(peer, {"k": "txknown", "ops": ops})
        for tx, sent in self.sent_ops.items():
            for hop, msg in sent:
                if hop == peer:
                    self.rt.send(peer, msg)
        super()._peer_up_tx(peer)

    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        if src not in self._nset and src not in self._procs and msg.get("c") is not None:
            self._procs.add(src)  # a client process attached here: expected back after a restart
            self._save_procs()
        k = msg.get("k")
        if src in self._expect and ((k == "txknown" and src in self._nset) or k == "txsynced"):
            self._expect.discard(src)
            if not self._expect:
                self._resync_done()
        if k == "txsynced":
            return
        super().on_message(src, msg)

    def _flush_held(self) -> None:
        """The held messages in arrival order, except the subscriptions (sub operations) its local
        clients re-sent after its restart, taken first: a publication re-sent by a neighbour that
        depends on one must find it applied (sim seed 442). Only additions go first: a usub moved
        ahead of a publication sent before it would take a route from it (sim seed 405)."""
        held = self._held or []
        first = [i for i, (src, m) in enumerate(held) if src not in self._nset and m.get("k") == "txop"
                 and (m.get("op") or {}).get("kind") == "sub"]
        if first:
            pick = set(first)
            self._held = [held[i] for i in first] + [h for i, h in enumerate(held) if i not in pick]
        super()._flush_held()

    def _save_procs(self) -> None:
        if not self._peers_file:
            return
        try:
            os.makedirs(os.path.dirname(self._peers_file), exist_ok=True)
            tmp = self._peers_file + ".tmp"
            with open(tmp, "w") as f:
                json.dump(sorted(self._procs), f)
            os.replace(tmp, self._peers_file)
        except OSError as e:
            self.rt.log("broker_bad_message", peer="", kind="state", reason=f"cannot keep the client processes: {e}")

    def _holding(self) -> bool:
        now = self.rt.mono_ns()
        return now < self._hold_until or (bool(self._expect) and now < self._resync_cap)

    def _hold_checks(self) -> list[int]:
        return [self._hold_until] + ([self._resync_cap] if self._expect else [])

    def _resync_done(self) -> None:
        self.rt.log("tx_resync_done", waited_ms=round((self.rt.mono_ns() - self._started_ns) / 1e6, 3),
                    missing=sorted(self._expect))
        self._try_flush()

    def _try_flush(self) -> None:
        if self._expect and self.rt.mono_ns() >= self._resync_cap:
            self._resync_done_late()
        super()._try_flush()

    def _resync_done_late(self) -> None:
        """The cap passed with peers still missing (down too): go on without them, logged."""
        missing, self._expect = sorted(self._expect), set()
        self.rt.log("tx_resync_done", waited_ms=round((self.rt.mono_ns() - self._started_ns) / 1e6, 3),
                    missing=missing)

    def _known(self, hop: str, tx: str, oid: str) -> None:
        if hop in self._nset and (tx not in self.terminated or tx in self.recent):
            self.known_at.setdefault(tx, {}).setdefault(hop, set()).add(oid)

    def _on_known(self, frm: str, msg: dict[str, Any]) -> None:
        """Operations this broker processed before it (re)started, as a neighbour or a local
        client knows them: marked processed (a re-sent copy is not applied twice on the re-learnt
        table, and what depends on them is not held for them)."""
        new = [(str(tx), str(oid)) for tx, oid in msg["ops"] if (tx, oid) not in self.processed]
        self.processed.update(new)
        if new:
            self.rt.log("tx_known_resync", peer=frm, ops=len(new))
            self._release()

    def _on_op_ok(self, frm: str, msg: dict[str, Any]) -> None:
        """A neighbour processed an operation. Not enough to forget it: a neighbour killed right
        after may not have got out what it sent on (seed 405), so sent_ops keeps it for a
        restart, and it is not counted in txknown (only what arrived from the neighbour is)."""

    def _op_ok(self, frm: str, tx: str, oid: str) -> None:
        if frm in self._nset:
            self.rt.send(frm, {"k": "txopok", "tx": tx, "op": oid})

    def _forward_op(self, tx: str, frm: str, msg: dict[str, Any], dests: list[str]) -> None:
        super()._forward_op(tx, frm, msg, dests)
        fwd = {"k": "txop", "tx": tx, "op": msg["op"], "d": msg.get("d") or []}
        log = self.sent_ops.setdefault(tx, [])
        for h in dests:
            if h in self._nset:
                log.append((h, fwd))

    def _terminate(self, tx: str, outcome: str) -> None:
        if outcome == "aborted":
            self.sent_ops.pop(tx, None)  # nothing of it is to arrive anywhere
        super()._terminate(tx, outcome)
        for d in (self.known_at, self.sent_ops):
            for old in [t for t in d if t in self.terminated and t not in self.recent]:
                del d[old]  # out of the recent outcomes: no longer re-sent either

    def _on_join(self, frm: str, msg: dict[str, Any]) -> None:
        c = msg["c"]
        if self.crt.get(c) == frm:
            return
        self.crt[c] = frm
        for n in self.table.neighbors:
            if n != frm:
                self.rt.send(n, {"k": "join", "c": c})

    def _satisfiable(self, dep: list[Any]) -> bool:
        hop = self.crt.get(dep[1])
        if hop is None:
            return False  # the sender never joined here: nothing of it can arrive
        if hop not in self._nset:
            return True  # the sender is a local client: its sub/usub is always processed here first
        f = parse_cached(dep[2])
        return any(e.hop != hop and intersects(e.filter, f) for e in self.table.srt.values())

    def _blocked(self, tx: str, deps: list[list[Any]]) -> bool:
        for d in deps:
            if d[3] in ("sub", "usub") and (tx, d[0]) not in self.processed and self._satisfiable(d):
                return True
        return False

    def _on_op(self, frm: str, msg: dict[str, Any]) -> None:
        tx, oid = msg["tx"], msg["op"]["id"]
        self._known(frm, tx, oid)  # the sender processed it (a broker forwards what it processed)
        if (tx, oid) in self.processed or self.terminated.get(tx) == "aborted":
            op = msg["op"]
            if (op["kind"] == "sub" and frm not in self._nset and op.get("sid") not in self.table.prt
                    and self.terminated.get(tx) != "aborted"):
                # a sub known processed here (txknown: a neighbour got it from this broker before
                # its restart) that its own subscriber re-sends (its transaction has no outcome
                # there), but whose entry the restart lost: applied again and sent on where it is
                # wanted, before what depends on it (the restarted broker takes such re-sent
                # subscriptions first, _flush_held). Sim seed 442 with a crash: op5, re-sent by the
                # neighbour, reached nobody at A's restarted broker
                undo = None if tx in self.terminated else self.undo.setdefault(tx, [])
                dests, _ = self._apply_full(self.table, op, frm, undo)
                self._forward_op(tx, frm, msg, dests)
                self._op_ok(frm, tx, oid)
                return
            e = self.table.prt.get(op.get("sid")) if op["kind"] == "usub" else None
            if e is not None and e.hop == frm and self.terminated.get(tx) != "aborted":
                # a usub processed here before, re-sent after a restart, whose subscription is back
                # from the hop it comes from: the client re-issued its standing subscription to its
                # restarted broker (it re-sends op4 after it), and the re-sync spread it. Applied
                # again (not logged as processed twice), and on along the subscription's path
                dests, _ = self._apply_full(self.table, op, frm, None)
                self._forward_op(tx, frm, msg, dests)
            self._op_ok(frm, tx, oid)  # re-sent after a reconnection and known here, or aborted
            return
        if any(b[2]["tx"] == tx and b[0] == "txop" and b[2]["op"]["id"] == oid for b in self.buffer):
            return  # re-sent, waiting here: acknowledged once processed
        # an operation of a transaction committed here already (it meets its commit coming the
        # other way: a sub/usub a broker triggered, Alg 2, travelling back toward the advertiser,
        # or an operation re-sent after a restart, behind the re-sent outcome) still applies, as
        # it would have a moment earlier: after its dependencies, like any other (_process then
        # hands the outcome to the clients it reaches)
        self._part(tx, frm)
        if self.buffer or self._blocked(tx, msg.get("d") or []):
            self.buffer.append(("txop", frm, msg))
            self._release()
            return
        self._process(frm, msg)
        self._release()

    def _process(self, frm: str, msg: dict[str, Any]) -> None:
        tx, op = msg["tx"], msg["op"]
        late = self.terminated.get(tx) == "committed"
        known = op["kind"] == "sub" and op["sid"] in self.table.prt
        unknown = op["kind"] == "usub" and op["sid"] not in self.table.prt
        dests, trig = self._apply_full(self.table, op, frm, None if late else self.undo.setdefault(tx, []))
        if known:  # learned by a routing re-sync after a restart: the operation still goes on
            dests = [n for n in self.table.neighbors if n != frm and op["sid"] in self.table.sent[n]]
        elif unknown:
            # a usub of a subscription this broker does not hold: it lost it in a restart (the
            # usub came along the subscription's path), and with it where it had sent it on; a
            # neighbour it had sent it to still holds it and waits for this usub (S-TX holds
            # their commits for it): it goes on to every neighbour (a no-op where it is unknown)
            dests = [n for n in self.table.neighbors if n != frm]
        self.processed.add((tx, op["id"]))
        self._op_ok(frm, tx, op["id"])
        if op.get("orig"):  # a triggered sub/usub continues the transaction's own operation
            self.processed.add((tx, op["orig"]))
        self._note_op(tx, op)
        self._log_proc(tx, op, dests)
        self._forward_op(tx, frm, msg, dests)
        for h, kind, sid, f in trig:  # Alg 2 in S-TX: sent on at once, no acknowledgements
            self._triggered(tx, op, h, kind, sid, f)
        if late:
            # the commit passed here before this operation: a client it reached takes part only
            # now and would never learn the outcome (its publications never delivered): the
            # outcome follows the operation to it. A neighbour broker that ended the
            # transaction too does the same for its clients; one that did not gets the commit
            # by the flood (or the re-sent outcomes) as usual
            for h in sorted(self._parts.pop(tx, ())):
                if h != frm:
                    self.send_hop(h, {"k": "txcmt", "tx": tx, "rs": True})
            self._sub_ops.pop(tx, None)

    def _flood_step(self, kind: str, frm: str, msg: dict[str, Any]) -> dict[str, Any] | None:
        tx = msg["tx"]
        if kind in ("txcmt", "txabt"):
            # both carry every operation as a dependency (abtMsg(txID, D), App. A.3). A re-sent
            # outcome (rs, no d) of an abort drops what of the transaction still waits here; of a
            # commit, it waits behind the transaction's buffered operations (their dependencies)
            if msg.get("rs") or "d" not in msg:
                mine = [b for b in self.buffer if b[2]["tx"] == tx]
                if kind == "txabt":
                    self.buffer = [b for b in self.buffer if b[2]["tx"] != tx]
                    return self._stx_end(kind, tx, msg)
                if any(b[0] != "txop" for b in mine):
                    return None  # its outcome waits here already
                # a commit re-sent by its TXC carries its dependencies (those of the operations
                # it re-sent just before): it waits for them as the first one would have
                deps: list[list[Any]] = list(msg.get("d") or [])
                for b in mine:
                    deps += [d for d in b[2].get("d") or [] if d not in deps]
                if not mine and not self._blocked(tx, deps):
                    return self._stx_end(kind, tx, msg)
                self._hold(kind, frm, {"k": kind, "tx": tx, "rs": True, "d": deps})
                return None
            if self.buffer or self._blocked(tx, msg.get("d") or []):
                self._hold(kind, frm, msg)
                return None
            return self._stx_end(kind, tx, msg)
        self._bad(frm, msg, f"S-TX takes no {kind}")
        return None

    def _stx_end(self, kind: str, tx: str, msg: dict[str, Any]) -> dict[str, Any]:
        undo = self.undo.pop(tx, [])
        if kind == "txabt":
            self._undo(self.table, undo)
        self._terminate(tx, "committed" if kind == "txcmt" else "aborted")
        return {"k": kind, "tx": tx, "d": msg.get("d") or []}

    def _hold(self, kind: str, frm: str, msg: dict[str, Any]) -> None:
        """Buffer an outcome (behind dependencies or earlier messages) for at most hold_timeout."""
        self.buffer.append((kind, frm, msg))
        self._held_since[(kind, msg["tx"])] = self.rt.mono_ns()
        self.rt.call_later(self._hold_s, self._hold_expired, kind, msg["tx"])
        self._release()

    def _hold_expired(self, kind: str, tx: str) -> None:
        """A held outcome whose dependencies did not come within hold_timeout (an operation lost
        for good): the transaction's buffered operations and then the outcome are applied
        without them, logged; the rest of the buffer goes on."""
        since = self._held_since.get((kind, tx))
        i = next((i for i, b in enumerate(self.buffer) if b[0] == kind and b[2]["tx"] == tx), None)
        if since is None or i is None:
            return
        mine = [b for b in self.buffer[:i + 1] if b[2]["tx"] == tx]
        missing = sorted({d[0] for b in mine for d in b[2].get("d") or []
                          if d[3] in ("sub", "usub") and (tx, d[0]) not in self.processed and self._satisfiable(d)})
        self.rt.log("tx_hold_timeout", tx=tx, outcome="committed" if kind == "txcmt" else "aborted",
                    waited_ms=(self.rt.mono_ns() - since) / 1e6, missing=missing)
        self.buffer = [b for b in self.buffer if b not in mine]
        for b in mine:
            self._release_one(*b)
        self._release()

    def _release_one(self, kind: str, frm: str, msg: dict[str, Any]) -> None:
        if kind == "txop":
            self._process(frm, msg)
            return
        tx = msg["tx"]
        self._held_since.pop((kind, tx), None)
        if tx in self.terminated:
            return  # ended meanwhile (another re-sent copy of the outcome)
        fwd = self._stx_end(kind, tx, msg)
        if msg.get("rs"):
            self._rs_forward(kind, frm, tx)
        else:
            self._do_flood(kind, frm, fwd)

    def _release(self) -> None:
        """Process buffered operations and commits whose dependencies are met, in arrival order
        (the first ready one first, then rescan). A commit depends on every sub/usub its
        transaction's publications depend on, so it never overtakes op5 on a link."""
        progress = True
        while progress and self.buffer:
            progress = False
            for i, (kind, frm, msg) in enumerate(self.buffer):
                if self._blocked(msg["tx"], msg.get("d") or []):
                    continue
                del self.buffer[i]
                self._release_one(kind, frm, msg)
                progress = True
                break


VARIANTS: dict[str, type[TxBroker]] = {
    "blwait": TxBroker, "dtx": DtxBroker, "dtxni": DtxniBroker, "stx": StxBroker,
}
