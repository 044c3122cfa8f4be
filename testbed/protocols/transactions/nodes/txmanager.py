"""The client TXManager (Table 2, §4.1, §6): one per logical client, usable by any node code.

Event-driven like the runtime's :class:`Node` (no threads): calls return at once, results come
back through continuations (``then`` callbacks). A node owns one :class:`TXManager` per logical
client it hosts and hands it every message addressed to that client::

    m = TXManager(rt, client="c2", broker="b1", variant="dtx", notify=on_pub, on_tcm=on_tcm)
    # in the node's on_message: if msg.get("to") == "c2" and m.on_message(msg): return

    tx = m.beginTX()                                   # D-TX/D-TXNI: txinit, flooded
    m.txAdv(tx, "[p,eq,'q'],[x,eq,1]")                 # each operation waits for the previous
    m.txPub(tx, {"p": "q", "x": 1})                    #   one's acknowledgement (D-TX/D-TXNI)
    m.commitTX(tx, then=lambda outcome: ...)           # prepare, then cmtMsg or abtMsg

API (Table 2): ``beginTX``, ``commitTX``, ``abortTX``, ``txTCM``, ``txPub``, ``txAdv``, ``txUadv``,
``txSub``, ``txUsub``; ``notify(client, tx, op)`` is called for every transaction publication
delivered (on commit); ``on_tcm(client, tx, op)`` for a received ``tcm``: operations the callback
issues (synchronously) in that transaction are *triggered* by it.

D-TX / D-TXNI (§4.1): per transaction the list of ``(seqNo, opID, op, status)`` with status
``buffered`` (issued, not sent yet), ``active`` (sent, not acknowledged) or ``acknowledged``; an
operation is sent only when the one before it is acknowledged (and, at the TXC, after
``initAckMsg``); a received ``tcm`` is acknowledged only when every operation it triggered is;
``commitTX`` waits for every operation's acknowledgement, sends ``prepMsg`` and, on its answer,
``cmtMsg`` (TRUE) or ``abtMsg``. S-TX (§6): operations are sent at once with their dependency
lists ``[op id, sender, filter, kind]`` (by default every operation this client issued before in
the transaction and, for a triggered one, the trigger and its own dependencies; the TXC that
knows the others' operations in advance passes ``deps``); ``commitTX`` sends ``cmtMsg`` at once
with every operation as dependency. Every variant buffers received transaction publications
(and ``tcm``) and delivers them on ``cmtMsg``, drops them on ``abtMsg``.

Misuse raises :class:`TXError` (an operation outside an open transaction, on another client's
transaction that did not reach this client, after ``commitTX``/``abortTX``, commit or abort
twice, an unknown variant, an operation kind the variant has no use for).

Logged events (events.py): ``tx_op`` per operation issued, ``tx_recv`` per operation received,
``tx_deliver`` / ``tx_discard`` per buffered publication, ``tx_outcome`` per outcome learned (at
the TXC: its decision).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from testbed.protocols.transactions.nodes import events as _events  # noqa: F401

VARIANTS = ("dtx", "dtxni", "stx")
KINDS = ("pub", "tcm", "sub", "usub", "adv", "uadv")


class TXError(RuntimeError):
    """A TXManager used against Table 2's rules."""


@dataclass
class OpEntry:
    """One row of the TXManager's list (§4.1)."""

    seq: int
    op_id: str
    op: dict[str, Any]
    status: str = "buffered"  # buffered | active | acknowledged
    then: Callable[[], Any] | None = None
    deps: list[list[Any]] | None = None  # S-TX dependency descriptors
    trigger: str = ""  # the received tcm that made the client issue it
    desc: list[Any] = field(default_factory=list)  # its S-TX dependency descriptor


@dataclass
class TxState:
    """This client's view of one transaction."""

    tx: str
    coordinator: bool
    ops: list[OpEntry] = field(default_factory=list)
    ready: bool = False  # D-TX/D-TXNI: initAckMsg arrived (participants: always)
    closing: str = ""  # commit | abort: commitTX/abortTX called
    prepared: bool = False  # D-TX/D-TXNI: prepMsg sent
    acked: bool = False  # the TXC: the outcome's acknowledgement came back
    outcome: str = ""  # committed | aborted
    buffered: list[dict[str, Any]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    tcm_wait: dict[str, set[str]] = field(default_factory=dict)  # tcm id -> triggered op ids unacked
    tcm_deps: dict[str, list[list[Any]]] = field(default_factory=dict)  # S-TX: a tcm's deps + itself
    commit_deps: list[list[Any]] | None = None
    on_decided: Callable[[str], Any] | None = None
    on_acked: Callable[[str], Any] | None = None
    auto: int = 0  # operation counter for ids this manager picks
    restarted: bool = False  # the client's broker came back (resync) while this was open here


class TXManager:
    # what resync() re-sends to a restarted broker, in this order: S-TX, the operations it had
    # processed (received from it), then the operations before the outcomes that end their
    # transactions (a commit ahead of them ended the transaction there before any of its
    # operations); the participants' queries last
    RESYNC = ("known", "ops", "outcomes", "queries")
    KNOWN_TXS = 512  # S-TX: the last transactions whose received operations "known" reports

    def __init__(self, rt: Any, client: str, broker: str, variant: str,
                 notify: Callable[[str, str, dict[str, Any]], Any] | None = None,
                 on_tcm: Callable[[str, str, dict[str, Any]], Any] | None = None,
                 on_outcome: Callable[[str, str, str, list[dict[str, Any]]], Any] | None = None,
                 send: Callable[[dict[str, Any]], Any] | None = None) -> None:
        if variant not in VARIANTS:
            raise TXError(f"TXManager({client}): variant must be one of {VARIANTS}, not {variant!r}")
        self.rt = rt
        self.client = client
        self.broker = broker
        self.variant = variant
        self.notify = notify
        self.on_tcm = on_tcm
        self.on_outcome = on_outcome
        self._send_fn = send
        self.txs: dict[str, TxState] = {}
        self._trigger: list[tuple[str, str]] = []  # (tx, tcm id) while on_tcm runs
        self._init_then: dict[str, Callable[[], Any] | None] = {}
        self._k = 0

    # -- Table 2 ------------------------------------------------------------------------
    def beginTX(self, tx: str | None = None, order: list[Any] | None = None,
                then: Callable[[], Any] | None = None) -> str:
        """Open a transaction coordinated by this client; returns its id. D-TX/D-TXNI: floods
        ``initMsg`` (``order`` = ``[txc, seq]``, the commit-order key's tail); ``then()`` runs on
        ``initAckMsg``, and operations issued before it wait (status buffered)."""
        self._k += 1
        tx = tx or f"{self.client}:{self._k}"
        if tx in self.txs:
            raise TXError(f"{self.client}: transaction {tx} already begun")
        self.txs[tx] = TxState(tx, coordinator=True, ready=self.variant == "stx")
        if self.variant == "stx":
            if then is not None:
                then()
            return tx
        self._init_then[tx] = then
        self._send({"k": "txinit", "tx": tx, "o": order or [self.client, self._k]})
        return tx

    def txPub(self, tx: str, attrs: dict[str, Any], **kw: Any) -> str:
        return self._issue(tx, "pub", attrs=attrs, **kw)

    def txTCM(self, tx: str, attrs: dict[str, Any], **kw: Any) -> str:
        """A transaction control message: a publication whose receiver issues operations."""
        return self._issue(tx, "tcm", attrs=attrs, **kw)

    def txSub(self, tx: str, f: str, sid: str | None = None, **kw: Any) -> str:
        return self._issue(tx, "sub", f=f, sid=sid, **kw)

    def txUsub(self, tx: str, sid: str, f: str = "", **kw: Any) -> str:
        return self._issue(tx, "usub", f=f, sid=sid, **kw)

    def txAdv(self, tx: str, f: str, aid: str | None = None, **kw: Any) -> str:
        return self._issue(tx, "adv", f=f, sid=aid, **kw)

    def txUadv(self, tx: str, aid: str, f: str = "", **kw: Any) -> str:
        return self._issue(tx, "uadv", f=f, sid=aid, **kw)

    def commitTX(self, tx: str, then: Callable[[str], Any] | None = None,
                 acked: Callable[[str], Any] | None = None,
                 deps: list[list[Any]] | None = None) -> None:
        """End the transaction. ``then(outcome)`` on the decision (D-TX: the prepare's answer,
        ``committed`` or ``aborted``; S-TX: ``committed`` at once); ``acked(outcome)`` when the
        outcome's acknowledgement (combined over brokers and participants) is back."""
        st = self._own(tx, "commitTX")
        st.closing, st.on_decided, st.on_acked = "commit", then, acked
        if self.variant == "stx":
            st.commit_deps = deps if deps is not None else [e.desc for e in st.ops]
            self._decide(st, "committed")
            return
        self._pump(st)

    def abortTX(self, tx: str, then: Callable[[str], Any] | None = None,
                acked: Callable[[str], Any] | None = None,
                deps: list[list[Any]] | None = None) -> None:
        """Abort now, also after ``commitTX`` while its decision is pending (a timeout; the abort's
        callbacks then replace the commit's): operations still unacknowledged are abandoned,
        ``abtMsg`` is flooded. S-TX: ``abtMsg`` carries every operation as dependency."""
        st = self._own(tx, "abortTX")
        st.closing, st.on_decided, st.on_acked = "abort", then, acked
        if self.variant == "stx":
            st.commit_deps = deps if deps is not None else [e.desc for e in st.ops]
        self._decide(st, "aborted")

    def resync(self, what: str) -> None:
        """This client's broker came back (restarted, maybe empty): send again what it may have
        lost. ``what``: ``outcomes`` (the TXC's decisions not yet acknowledged, as re-sent
        outcomes ``rs``), ``queries`` (``txq`` for each transaction held here without an outcome)
        ``ops`` (S-TX: the operations of transactions still open here) or ``known`` (S-TX: the
        operations received from the broker, so processed there, in one ``txknown``, for the last
        :attr:`KNOWN_TXS` transactions this client took part in); :attr:`RESYNC` is the
        order to call it in. An S-TX outcome carries its dependencies again (the broker holds it
        until they are processed there, as it did the first one). D-TX/D-TXNI: the broker lost
        the contexts of the transactions still open here, with this client's routing operations
        in them; they are sent again as plain routing messages once the commit is known here."""
        if self.variant != "stx":
            for st in self.txs.values():
                if not st.outcome:
                    st.restarted = True
        if what == "known":
            if self.variant == "stx":
                parts = [st for st in self.txs.values() if st.seen][-self.KNOWN_TXS:]
                ops = [[st.tx, oid] for st in parts for oid in sorted(st.seen)]
                if ops:
                    self._send({"k": "txknown", "ops": ops})
            return
        for st in self.txs.values():
            if what == "outcomes" and st.coordinator and st.outcome and not st.acked:
                m: dict[str, Any] = {"k": "txcmt" if st.outcome == "committed" else "txabt", "tx": st.tx, "rs": True}
                if self.variant == "stx" and st.commit_deps is not None:
                    m["d"] = st.commit_deps
                self._send(m)
            elif what == "queries" and not st.coordinator and not st.outcome:
                self._send({"k": "txq", "tx": st.tx})
            elif what == "ops" and self.variant == "stx" and not (st.acked if st.coordinator else st.outcome):
                for e in st.ops:
                    if e.status == "active":
                        self._send({"k": "txop", "tx": st.tx, "op": e.op, "d": e.deps or []})

    # -- queries ------------------------------------------------------------------------
    def status(self, tx: str) -> list[tuple[int, str, str, str]]:
        """The TXManager's list for ``tx``: (seqNo, opID, kind, status)."""
        st = self.txs.get(tx)
        return [(e.seq, e.op_id, e.op["kind"], e.status) for e in st.ops] if st else []

    def outcome(self, tx: str) -> str:
        st = self.txs.get(tx)
        return st.outcome if st else ""

    def open(self, tx: str) -> bool:
        st = self.txs.get(tx)
        return st is not None and not st.outcome

    # -- issuing ------------------------------------------------------------------------
    def _issue(self, tx: str, kind: str, attrs: dict[str, Any] | None = None, f: str = "",
               sid: str | None = None, n: int | None = None, then: Callable[[], Any] | None = None,
               deps: list[list[Any]] | None = None, log_deps: list[str] | None = None,
               ctx: dict[str, Any] | None = None, trigger: str | None = None) -> str:
        st = self.txs.get(tx)
        if st is None:
            raise TXError(f"{self.client}: {kind} outside a transaction ({tx!r} not begun here and "
                          f"no operation of it received)")
        if st.outcome or (st.coordinator and st.closing):
            raise TXError(f"{self.client}: {kind} in transaction {tx} after "
                          f"{st.outcome or ('commitTX' if st.closing == 'commit' else 'abortTX')}")
        if kind in ("sub", "adv") and not f:
            raise TXError(f"{self.client}: {kind} needs a filter")
        if kind == "usub" and not f and self.variant == "stx":
            raise TXError(f"{self.client}: an S-TX usub needs the subscription's filter (its dependants' "
                          f"brokers check it, §6.2)")
        trig = trigger if trigger is not None else next((t for x, t in reversed(self._trigger) if x == tx), "")
        st.auto += 1
        if n is None:
            op_id, num = f"{tx}/{self.client}.{st.auto}", st.auto
        else:
            op_id, num = f"{tx}/{int(n)}", int(n)
        if kind in ("sub", "adv") and not sid:
            sid = f"{op_id}"
        if kind in ("usub", "uadv") and not sid:
            raise TXError(f"{self.client}: {kind} needs the id of the {kind[1:]} it removes")
        op: dict[str, Any] = {"id": op_id, "n": num, "kind": kind, "c": self.client}
        if attrs is not None:
            op["a"] = attrs
        if f:
            op["f"] = f
        if sid:
            op["sid"] = sid
        if ctx is not None:
            op["ctx"] = ctx
        e = OpEntry(seq=len(st.ops) + 1, op_id=op_id, op=op, then=then, trigger=trig,
                    desc=[op_id, self.client, f, kind])
        if self.variant == "stx":
            if deps is None:
                base = list(st.tcm_deps.get(trig, []))
                deps = base + [x.desc for x in st.ops if x.desc not in base]
            e.deps = deps
        if log_deps is None:
            if self.variant == "stx":
                log_deps = [d[0] for d in deps or []]
            elif n is not None:
                log_deps = [f"{tx}/{k}" for k in range(1, num)]
            else:
                log_deps = [x.op_id for x in st.ops] + ([trig] if trig else [])
        self.rt.log("tx_op", tx=tx, op_id=op_id, n=num, kind=kind, client=self.client, deps=log_deps,
                    trigger=trig, filter=f, sub_id=sid or "")
        st.ops.append(e)
        if trig and self.variant != "stx":
            st.tcm_wait.setdefault(trig, set()).add(op_id)
        self._pump(st)
        return op_id

    def _pump(self, st: TxState) -> None:
        """Send what may go now: S-TX everything; D-TX/D-TXNI the next buffered operation when
        none is active; the commit's prepare when every operation is acknowledged."""
        if st.outcome:
            return
        if self.variant == "stx":
            for e in st.ops:
                if e.status == "buffered":
                    e.status = "active"
                    self._send({"k": "txop", "tx": st.tx, "op": e.op, "d": e.deps or []})
                    if e.then is not None:
                        e.then()
            return
        if not st.ready:
            return
        if any(e.status == "active" for e in st.ops):
            return
        nxt = next((e for e in st.ops if e.status == "buffered"), None)
        if nxt is not None:
            nxt.status = "active"
            self._send({"k": "txop", "tx": st.tx, "op": nxt.op})
            return
        if st.coordinator and st.closing == "commit" and not st.prepared:
            st.prepared = True
            self._send({"k": "txprep", "tx": st.tx})

    def _decide(self, st: TxState, outcome: str) -> None:
        if st.outcome:
            raise TXError(f"{self.client}: transaction {st.tx} already {st.outcome}")
        st.outcome = outcome
        self.rt.log("tx_outcome", client=self.client, tx=st.tx, outcome=outcome)
        msg: dict[str, Any] = {"k": "txcmt" if outcome == "committed" else "txabt", "tx": st.tx}
        if self.variant == "stx":
            msg["d"] = st.commit_deps or []
        self._send(msg)
        self._finish(st, outcome)
        if st.on_decided is not None:
            st.on_decided(outcome)

    def _own(self, tx: str, what: str) -> TxState:
        st = self.txs.get(tx)
        if st is None or not st.coordinator:
            raise TXError(f"{self.client}: {what} of {tx!r}, which this client did not begin")
        if st.outcome:
            raise TXError(f"{self.client}: {what} of {tx}, already {st.outcome}")
        if st.closing == "abort" or (st.closing == "commit" and what == "commitTX"):
            raise TXError(f"{self.client}: {what} of {tx} after "
                          f"{'commitTX' if st.closing == 'commit' else 'abortTX'}")
        return st  # (abortTX after commitTX, before the decision: the abort wins)

    # -- receiving -----------------------------------------------------------------------
    def on_message(self, msg: dict[str, Any]) -> bool:
        """Handle a message addressed to this client; False if it is not a transaction message."""
        k = msg.get("k")
        if k == "txop":
            self._on_txop(msg)
        elif k == "txack":
            self._on_ack(msg["tx"], msg["op"])
        elif k == "txinitack":
            st = self.txs.get(msg["tx"])
            if st is not None and not st.ready:
                st.ready = True
                then = self._init_then.pop(msg["tx"], None)
                if then is not None:
                    then()
                self._pump(st)
        elif k == "txprepack":
            st = self.txs.get(msg["tx"])
            if st is not None and st.coordinator and not st.outcome and st.closing == "commit":
                self._decide(st, "committed" if msg.get("ok") else "aborted")
        elif k in ("txcmt", "txabt"):
            self._on_outcome(msg["tx"], "committed" if k == "txcmt" else "aborted")
            self._send({"k": k + "ack", "tx": msg["tx"], "ok": True})
        elif k in ("txcmtack", "txabtack"):
            st = self.txs.get(msg["tx"])
            if st is not None and st.coordinator:
                st.acked = True
                if st.on_acked is not None:
                    fn, st.on_acked = st.on_acked, None
                    fn(st.outcome)
        else:
            return False
        return True

    def _on_ack(self, tx: str, op_id: str) -> None:
        st = self.txs.get(tx)
        if st is None:
            return
        e = next((x for x in st.ops if x.op_id == op_id), None)
        if e is None or e.status != "active":
            return
        e.status = "acknowledged"
        if st.outcome:
            return  # ended meanwhile (an abort): nothing more is sent
        if e.then is not None:
            e.then()
        if e.trigger:
            waiting = st.tcm_wait.get(e.trigger)
            if waiting is not None:
                waiting.discard(op_id)
                if not waiting and not st.outcome:
                    del st.tcm_wait[e.trigger]
                    self._send({"k": "txack", "tx": tx, "op": e.trigger})
        self._pump(st)

    def _on_txop(self, msg: dict[str, Any]) -> None:
        tx, op = msg["tx"], msg["op"]
        st = self.txs.setdefault(tx, TxState(tx, coordinator=False, ready=True))
        if op["id"] in st.seen:
            if self.variant != "stx" and not st.outcome and op["id"] not in st.tcm_wait:
                self._send({"k": "txack", "tx": tx, "op": op["id"]})
            return  # re-sent after a broker restart
        st.seen.add(op["id"])
        kind = op["kind"]
        self.rt.log("tx_recv", client=self.client, tx=tx, op_id=op["id"], kind=kind, n=int(op.get("n") or 0))
        if st.outcome:
            # late: the transaction ended here already. S-TX: a publication re-sent after a
            # broker's restart can come after the outcome; delivered now if it committed,
            # discarded if it aborted (D-TX/D-TXNI acknowledge every operation before the commit)
            if self.variant == "stx" and kind in ("pub", "tcm") and not st.coordinator:
                st.buffered.append(op)
                self._finish(st, st.outcome)
            return
        if kind in ("pub", "tcm"):
            st.buffered.append(op)
        if kind == "tcm" and self.on_tcm is not None:
            if self.variant == "stx":
                st.tcm_deps[op["id"]] = list(msg.get("d") or []) + [[op["id"], op.get("c", ""), "", "tcm"]]
            self._trigger.append((tx, op["id"]))
            try:
                self.on_tcm(self.client, tx, op)
            finally:
                self._trigger.pop()
            if self.variant != "stx" and not st.tcm_wait.get(op["id"]):
                st.tcm_wait.pop(op["id"], None)
                self._send({"k": "txack", "tx": tx, "op": op["id"]})
        elif self.variant != "stx":
            self._send({"k": "txack", "tx": tx, "op": op["id"]})

    def _on_outcome(self, tx: str, outcome: str) -> None:
        st = self.txs.setdefault(tx, TxState(tx, coordinator=False, ready=True))
        if st.coordinator:
            return  # the TXC decided it (and logged it) itself
        if st.outcome:
            return
        st.outcome = outcome
        self.rt.log("tx_outcome", client=self.client, tx=tx, outcome=outcome)
        self._finish(st, outcome)

    def _finish(self, st: TxState, outcome: str) -> None:
        """Deliver (commit) or discard (abort) the buffered publications."""
        ev = "tx_deliver" if outcome == "committed" else "tx_discard"
        pubs, st.buffered = st.buffered, []
        for op in pubs:
            self.rt.log(ev, client=self.client, tx=st.tx, op_id=op["id"], n=int(op.get("n") or 0))
        if outcome == "committed" and self.notify is not None:
            for op in pubs:
                self.notify(self.client, st.tx, op)
        if outcome == "committed" and st.restarted:
            self._reissue(st)
        if self.on_outcome is not None:
            self.on_outcome(self.client, st.tx, outcome, pubs)

    PLAIN = {"sub": "sub", "usub": "unsub", "adv": "adv", "uadv": "unadv"}

    def _reissue(self, st: TxState) -> None:
        """D-TX/D-TXNI: a committed transaction's routing operations this client sent, again as
        plain routing messages (same ids), because its broker restarted while the transaction was
        open: the restarted broker lost the transaction's context and, with it, these writes (its
        commit, re-sent by a neighbour, changes nothing there). Sim seeds 573, 583: A's op3 stayed
        missing at its restarted broker, and publications for A stopped one hop short. A broker
        that kept them ignores a known id (a sub/adv) or an unknown one (an unsub/unadv)."""
        sent = [e for e in st.ops if e.op["kind"] in self.PLAIN and e.status != "buffered"]
        if not sent:
            return
        self.rt.log("tx_reissue", client=self.client, tx=st.tx, ops=[e.op_id for e in sent])
        for e in sent:
            m: dict[str, Any] = {"k": self.PLAIN[e.op["kind"]], "id": e.op["sid"]}
            if e.op["kind"] in ("sub", "adv"):
                m["f"] = e.op["f"]
            self._send(m)

    def _send(self, msg: dict[str, Any]) -> None:
        if self._send_fn is not None:
            self._send_fn(msg)
            return
        msg["c"] = self.client
        self.rt.send(self.broker, msg)
