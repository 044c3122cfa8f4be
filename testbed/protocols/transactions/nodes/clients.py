"""The instance-dispatching scenario (Fig 1b): E (the TXC), D, the agents, and the TXManager.

One process per client group (role coordinator | dispatcher | agent), hosting
``count`` logical clients ``<group>-<i>``. Instance ``i`` is E ``<e>-i``, D
``<d>-i`` and the agents ``<a>-2i``, ``<a>-2i+1``; the group names come from the
directory (one group per role, checked by the topology).

Event space of TXC thread ``t`` of instance ``i``: process ``p = "p<i>.<t>"``; its
``n``-th transaction dispatches workflow instance ``x = n`` to agent ``n % 2``:

    op1  E  pub {p, x, v: 0}               (a tcm to D in D-TX/D-TXNI/S-TX)
    op2  D  tcm {class: assign, to: A, proc: p, inst: x}
    op3  A  sub [p,eq,'p'],[x,eq,n]
    op4  D  usub of D's standing subscription to (p, x)
    op5  E  pub {p, x, v: 1}               must reach only A

Standing state (issued at start, before the workload): D subscribes to every
(p, x) its instance will dispatch; every agent subscribes to its assign messages
(and to regular events, Fig 9); E subscribes to acknowledgements; everyone
advertises what it publishes. A's acknowledgement of op5 is a plain publication
{class: ack, to: E, tx} (the latency timer at E stops when it arrives).

Every client issues its transaction operations through its own ``TXManager``
(txmanager.py, Table 2): D-TX/D-TXNI send the next operation only after the previous
one is acknowledged and acknowledge a received tcm only after the operations it
triggered are acknowledged; S-TX issues everything at once with dependency lists.
Transaction publications are buffered until ``txcmt`` (delivered) or ``txabt``
(discarded). ``params.scenario: advpub`` builds ``AdvPubHost`` (advpub.py) instead. BL-WAIT uses plain publications and subscriptions: E waits ``wait``
between op1 and op5, D and A react at once. A transaction not ended ``timeout``
after it began is aborted by its TXC (BL-WAIT: recorded as aborted, i.e. failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from testbed.protocols.pubsub.nodes import events as _pubsub_events  # noqa: F401  (publish/deliver)
from testbed.nodes.runtime.api import Node
from testbed.protocols.transactions.nodes import events as _events  # noqa: F401
from testbed.protocols.transactions.nodes.txmanager import TXManager
from testbed.protocols.transactions.nodes.workload import begin_workload, client_group

ROLES = ("coordinator", "dispatcher", "agent")


def space_filter(proc: str, x: int) -> str:
    return f"[p,eq,'{proc}'],[x,eq,{int(x)}]"


def standing_sid(d: str, proc: str, x: int) -> str:
    return f"{d}:s:{proc}:{x}"


def split(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal counts (the first ones get the remainder)."""
    q, r = divmod(total, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


@dataclass
class Tx:
    tx: str
    n: int
    e: str
    thread: int
    proc: str
    d: str
    agent: str
    t0: int = 0
    decided: str = ""  # committed | aborted (the TXC's decision)
    ended: bool = False
    acked: bool = False  # the agent's acknowledgement of op5 arrived
    term_acked: bool = False  # txcmtack / txabtack arrived
    latency_ms: float = -1.0
    timer: Any = None
    deps: list[Any] = field(default_factory=list)  # S-TX: the commit's dependencies
    probe: bool = False  # a conflict run's concurrent publication into a dispatch's event space


class ScenarioHost(Node):
    """The Fig 1b scenario; ``ScenarioHost(rt)`` builds ``AdvPubHost`` for ``params.scenario: advpub``."""

    def __new__(cls, rt: Any = None):
        if cls is ScenarioHost and rt is not None:
            if ((rt.config.get("params") or {}).get("scenario") or "dispatch") == "advpub":
                from testbed.protocols.transactions.nodes.advpub import AdvPubHost
                return AdvPubHost(rt)  # not a ScenarioHost: Python does not call __init__ again
        return super().__new__(cls)

    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        p = self.config.get("params") or {}
        self.group, self.role, self.clients, self.broker_of = client_group(self, ROLES, "dispatch")
        self.index = {c: i for i, c in enumerate(self.clients)}
        groups = {r: None for r in ROLES}
        for name, d in (self.config.get("directory") or {}).items():
            if d.get("kind") == "clients" and d.get("role") in groups and groups[d["role"]] is None:
                groups[d["role"]] = name
        groups[self.role] = self.group
        missing = [r for r, n in groups.items() if n is None]
        if missing:
            raise ValueError(f"clients {self.group}: the scenario lacks a {missing[0]} group")
        self.g_e, self.g_d, self.g_a = groups["coordinator"], groups["dispatcher"], groups["agent"]
        self.variant: str = p.get("variant") or "blwait"
        self.total = int(p.get("transactions") or 1)
        self.threads = int(p.get("threads") or 1)
        self.instances = int(p.get("instances") or max(1, count if self.role != "agent" else count // 2))
        self.wait = float(p.get("wait") or 0.0)
        self.timeout = float(p.get("timeout") or 5.0)
        self.think = float(p.get("think") or 0.0)
        self.abort_every = int(p.get("abort_every") or 0)
        # the §3.3 conflict workload: while a dispatch is open, its TXC thread also runs "probe"
        # transactions, each one publication (op6) into the dispatch's event space (p, x), which
        # the dispatch moves from D (op4) to A (op3): t1 = {sub[A](x), usub[D](x)}, t2 = {pub[E](x)}
        self.conflict = bool(p.get("conflict")) and self.variant != "blwait"
        self._probes: dict[tuple[str, int], int] = {}  # (TXC, thread) -> probes begun
        self.regular_rate = p.get("regular_rate")
        self.round_size = int(p.get("round_size") or 2000)
        self.round_txs = int(p.get("round_txs") or 4)
        # per-thread transaction counts: transactions split over instances x threads
        self.per_thread = split(self.total, self.instances * self.threads)
        self.seq: dict[str, int] = dict.fromkeys(self.clients, 0)
        self.subs: dict[str, dict[str, str]] = {c: {} for c in self.clients}
        self.advs: dict[str, dict[str, str]] = {c: {} for c in self.clients}
        self.txs: dict[str, Tx] = {}  # at the TXC
        self._seen_up: set[str] = set()
        self._running = False
        self.done = 0
        self.committed = 0
        self.aborted = 0
        self._reg_timer: Any = None
        self._last_begin_ns = 0
        self._started = False  # the workload began (_begin_all ran)
        self._queues: dict[tuple[str, int], list[int]] = {}  # (TXC, thread) -> transactions not begun
        # one TXManager (Table 2) per logical client: it issues, sequences and logs the
        # transaction operations, buffers publications until the outcome (BL-WAIT: none)
        self.mgr: dict[str, TXManager] = {} if self.variant == "blwait" else {
            c: TXManager(rt, c, self.broker_of[c], self.variant, on_tcm=self._on_tcm, on_outcome=self._on_outcome)
            for c in self.clients}
        # D: standing subscriptions an open transaction's op4 removes -> (client, sid); not
        # re-issued to a restarted broker until the outcome says (abort: re-issued then)
        self.removing: dict[str, tuple[str, str]] = {}
        self.skipped: set[str] = set()  # tx ids whose standing subscription a re-issue skipped

    # -- naming ------------------------------------------------------------------------
    def inst(self, c: str) -> int:
        i = self.index[c]
        return i // 2 if self.role == "agent" else i

    def d_of(self, i: int) -> str:
        return f"{self.g_d}-{i}"

    def e_of(self, i: int) -> str:
        return f"{self.g_e}-{i}"

    def agents_of(self, i: int) -> list[str]:
        return [f"{self.g_a}-{2 * i}", f"{self.g_a}-{2 * i + 1}"]

    def spaces(self, i: int) -> list[tuple[str, int]]:
        """(process, transactions) of each TXC thread of instance ``i``."""
        return [(f"p{i}.{t}", self.per_thread[i * self.threads + t]) for t in range(self.threads)]

    # -- sending -----------------------------------------------------------------------
    def _send(self, c: str, msg: dict[str, Any]) -> None:
        msg["c"] = c
        self.rt.send(self.broker_of[c], msg)

    def _adv(self, c: str, f: str) -> None:
        aid = f"{c}:a{len(self.advs[c]) + 1}"
        self.advs[c][aid] = f
        self._send(c, {"k": "adv", "id": aid, "f": f})

    def _sub(self, c: str, sid: str, f: str) -> None:
        self.subs[c][sid] = f
        self._send(c, {"k": "sub", "id": sid, "f": f})

    def _unsub(self, c: str, sid: str) -> None:
        self.subs[c].pop(sid, None)
        self._send(c, {"k": "unsub", "id": sid})

    def _pub(self, c: str, attrs: dict[str, Any], **extra: Any) -> str:
        s = self.seq[c] = self.seq[c] + 1
        pid = f"{c}:{s}"
        self._send(c, {"k": "pub", "id": pid, "s": s, "a": attrs, "p": b"", "t": self.rt.wall_ns(),
                       "h": 0, **extra})
        return pid

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        for c in self.clients:
            i = self.inst(c)
            if self.variant == "stx":
                self._send(c, {"k": "join"})
            if self.role == "coordinator":
                self._adv(c, f"[p,str-prefix,'p{i}.'],[x,isPresent,0],[v,isPresent,0]")
                self._adv(c, "[class,eq,'wf'],[to,isPresent,'']")
                self._sub(c, f"{c}:ack", f"[class,eq,'ack'],[to,eq,'{c}']")
            elif self.role == "dispatcher":
                self._adv(c, "[class,eq,'assign'],[to,isPresent,'']")
                for proc, m in self.spaces(i):
                    for x in range(1, m + 1):
                        self._sub(c, standing_sid(c, proc, x), space_filter(proc, x))
            else:
                self._adv(c, "[class,eq,'ack'],[to,isPresent,'']")
                self._sub(c, f"{c}:assign", f"[class,eq,'assign'],[to,eq,'{c}']")
                self._sub(c, f"{c}:wf", f"[class,eq,'wf'],[to,eq,'{c}']")
                self.rt.log("subscribe", client=c, sub_id=f"{c}:wf", filter=f"[class,eq,'wf'],[to,eq,'{c}']",
                            broker=self.broker_of[c])

    def on_peer_up(self, peer: str) -> None:
        """A broker came back (restarted): re-issue this process's standing state (same ids)."""
        if peer not in self.broker_of.values():
            return
        if peer not in self._seen_up:
            self._seen_up.add(peer)
            return
        nadv = nsub = 0
        for c, b in self.broker_of.items():
            if b != peer:
                continue
            if self.variant == "stx":
                self._send(c, {"k": "join"})
            for aid, f in self.advs[c].items():
                self._send(c, {"k": "adv", "id": aid, "f": f})
                nadv += 1
            # (S-TX re-sends op4 after these, so there the subscription goes out and op4 removes it)
            held = {sid: tx for tx, (cc, sid) in self.removing.items()
                    if cc == c and self.variant != "stx"}
            for sid, f in self.subs[c].items():
                if sid in held:
                    self.skipped.add(held[sid])
                    continue
                self._send(c, {"k": "sub", "id": sid, "f": f})
                nsub += 1
        self.rt.log("client_resync", broker=peer, advs=nadv, subs=nsub)
        # outcomes the restarted broker may have lost: the TXC re-sends its decisions not yet
        # acknowledged; a participant asks about transactions it holds without an outcome; S-TX:
        # this process's operations of open transactions, again (the TXManager keeps them)
        for what in TXManager.RESYNC:
            for c, m in self.mgr.items():
                if self.broker_of[c] == peer:
                    m.resync(what)
        if self.variant == "stx":  # all is re-sent: the broker's hold can end (as far as we go)
            c = next((c for c, b in self.broker_of.items() if b == peer), None)
            if c is not None:
                self._send(c, {"k": "txsynced"})

    async def start_workload(self, t0_wall_ns: int, duration_s: float) -> None:
        if self.role != "coordinator":
            return
        begin_workload(self, t0_wall_ns, duration_s)

    async def stop_workload(self) -> None:
        self._running = False
        if self._reg_timer is not None:
            self._reg_timer.cancel()

    async def stop(self) -> None:
        await self.stop_workload()

    def status(self) -> dict[str, Any]:
        out = {"role": self.role, "variant": self.variant, "clients": len(self.clients),
               "done": self.done, "committed": self.committed, "aborted": self.aborted,
               "open": sum(1 for t in self.txs.values() if not t.ended)}
        if self.role == "coordinator" and not self.regular_rate:
            # the run-end condition the controller watches (faults/schedule.py all_finished): every
            # TXC thread has begun what it will begin and every begun transaction has ended (Fig 9's
            # open-loop regular traffic has no such end: it lasts the planned duration)
            out["finished"] = self.finished()
        return out

    def finished(self) -> bool:
        """The TXC's work is over: the workload started, no thread will begin another transaction
        (its queue is empty, or the last moment to begin one has passed) and none is open."""
        if not self._started or any(not t.ended for t in self.txs.values()):
            return False
        late = self.rt.mono_ns() > self._last_begin_ns
        return late or not any(self._queues.values())

    # -- the TXC (E) -----------------------------------------------------------------------
    def _begin_all(self) -> None:
        self._queues = {}
        for c in self.clients:
            i = self.inst(c)
            for t, (proc, m) in enumerate(self.spaces(i)):
                self._queues[(c, t)] = list(range(1, m + 1))
        self._started = True
        if self.regular_rate:
            self._start_regular()
            return
        for (c, t) in self._queues:
            self._next(c, t)

    def _next(self, c: str, t: int) -> None:
        if not self._running or self.rt.mono_ns() > self._last_begin_ns:
            return
        q = self._queues[(c, t)]
        if not q:
            return
        n = q.pop(0)
        i = self.inst(c)
        proc = f"p{i}.{t}"
        tx = Tx(tx=f"{c}.{t}:{n}", n=n, e=c, thread=t, proc=proc, d=self.d_of(i),
                agent=self.agents_of(i)[n % 2])
        self._start_tx(tx)
        getattr(self, f"_begin_{self.variant}")(tx)
        if self.conflict:
            self._probe(tx)

    def _start_tx(self, tx: Tx) -> None:
        self.txs[tx.tx] = tx
        tx.t0 = self.rt.mono_ns()
        self.rt.log("tx_begin", tx=tx.tx, client=tx.e, thread=tx.thread, agent=tx.agent, dispatcher=tx.d,
                    variant=self.variant, kind="probe" if tx.probe else "dispatch")
        tx.timer = self.rt.call_later(self.timeout, self._on_timeout, tx.tx)

    # the conflict workload (params.conflict): probes into an open dispatch's event space
    def _probe(self, disp: Tx) -> None:
        if disp.ended or not self._running:
            return
        key = (disp.e, disp.thread)
        k = self._probes[key] = self._probes.get(key, 0) + 1
        tx = Tx(tx=f"{disp.e}.{disp.thread}c:{k}", n=disp.n, e=disp.e, thread=disp.thread, proc=disp.proc,
                d=disp.d, agent=disp.agent, probe=True)
        self._start_tx(tx)
        attrs = {"p": tx.proc, "x": tx.n, "v": 2}
        m = self.mgr[tx.e]
        if self.variant == "stx":
            m.beginTX(tx.tx)
            op6 = m.txPub(tx.tx, attrs, n=6, deps=[])
            tx.deps = [[op6, tx.e, "", "pub"]]
            tx.acked, tx.latency_ms = True, 0.0
            self._decide(tx, "committed")
            return
        m.beginTX(tx.tx, order=[f"{tx.e}.{tx.thread}c", k],
                  then=lambda: m.txPub(tx.tx, attrs, n=6, then=lambda: self._probe_acked(tx)))

    def _probe_acked(self, tx: Tx) -> None:
        tx.acked = True
        tx.latency_ms = (self.rt.mono_ns() - tx.t0) / 1e6
        self._dtx_prepare(tx)

    def _op(self, txid: str, n: int, c: str, kind: str, trigger: str = "", deps: list[str] | None = None,
            attrs: dict[str, Any] | None = None, f: str = "", sid: str = "") -> dict[str, Any]:
        """BL-WAIT: log an operation issued as a plain pub/sub message (the transactional variants'
        operations are issued and logged by their TXManager)."""
        op_id = f"{txid}/{n}"
        op: dict[str, Any] = {"id": op_id, "n": n, "kind": kind, "c": c}
        if attrs is not None:
            op["a"] = attrs
        self.rt.log("tx_op", tx=txid, op_id=op_id, n=n, kind=kind, client=c,
                    deps=deps if deps is not None else [f"{txid}/{k}" for k in range(1, n)],
                    trigger=trigger, filter=f, sub_id=sid)
        return op

    @staticmethod
    def _ctx(tx: Tx) -> dict[str, Any]:
        """What D and A need to play their part (carried in op1's and op2's message)."""
        return {"tx": tx.tx, "proc": tx.proc, "x": tx.n, "d": tx.d, "agent": tx.agent, "e": tx.e}

    # D-TX / D-TXNI: begin -> init -> op1 (tcm) -> op5 -> prepare -> commit (E's TXManager sends
    # each operation after the previous one's acknowledgement; each is issued in the previous
    # one's continuation, so its tx_op is logged when it is sent)
    def _begin_dtx(self, tx: Tx) -> None:
        self.mgr[tx.e].beginTX(tx.tx, order=[f"{tx.e}.{tx.thread}", tx.n], then=lambda: self._dtx_op1(tx))

    _begin_dtxni = _begin_dtx

    def _dtx_op1(self, tx: Tx) -> None:
        self.mgr[tx.e].txTCM(tx.tx, {"p": tx.proc, "x": tx.n, "v": 0}, n=1, ctx=self._ctx(tx),
                             then=lambda: self._dtx_op5(tx))

    def _dtx_op5(self, tx: Tx) -> None:
        self.mgr[tx.e].txPub(tx.tx, {"p": tx.proc, "x": tx.n, "v": 1}, n=5, then=lambda: self._dtx_prepare(tx))

    def _explicit_abort(self, tx: Tx) -> bool:
        return self.abort_every > 0 and tx.n % self.abort_every == 0

    def _dtx_prepare(self, tx: Tx) -> None:
        if tx.decided:
            return
        if self._explicit_abort(tx):
            self._decide(tx, "aborted", "the TXC's explicit abort")
            return
        self.mgr[tx.e].commitTX(tx.tx, then=lambda outcome: self._decided(tx, outcome, ""),
                                acked=lambda outcome: self._term_acked(tx))

    def _decide(self, tx: Tx, outcome: str, reason: str = "") -> None:
        """The TXC's decision without a prepare: S-TX's commit, an explicit abort, a timeout."""
        if tx.decided or tx.ended:
            return
        m = self.mgr[tx.e]
        deps = {"deps": tx.deps} if self.variant == "stx" else {}
        if outcome == "committed":
            m.commitTX(tx.tx, then=lambda o: self._decided(tx, o, reason), acked=lambda o: self._term_acked(tx),
                       **deps)
        else:
            m.abortTX(tx.tx, then=lambda o: self._decided(tx, o, reason), acked=lambda o: self._term_acked(tx),
                      **deps)

    def _decided(self, tx: Tx, outcome: str, reason: str) -> None:
        tx.decided = outcome
        if outcome == "aborted":
            self._end(tx, "aborted", (self.rt.mono_ns() - tx.t0) / 1e6, reason or "aborted by the TXC")

    def _term_acked(self, tx: Tx) -> None:
        tx.term_acked = True
        self._maybe_end(tx)

    # S-TX: everything at once, with dependencies
    def _begin_stx(self, tx: Tx) -> None:
        f = space_filter(tx.proc, tx.n)
        ids = {k: f"{tx.tx}/{k}" for k in range(1, 6)}
        dep = {1: [ids[1], tx.e, "", "tcm"], 2: [ids[2], tx.d, "", "tcm"], 3: [ids[3], tx.agent, f, "sub"],
               4: [ids[4], tx.d, f, "usub"], 5: [ids[5], tx.e, "", "pub"]}
        tx.deps = [dep[k] for k in range(1, 6)]
        plan = {str(k): [dep[j] for j in range(1, k)] for k in range(1, 6)}
        m = self.mgr[tx.e]
        m.beginTX(tx.tx)
        m.txTCM(tx.tx, {"p": tx.proc, "x": tx.n, "v": 0}, n=1, ctx={**self._ctx(tx), "plan": plan}, deps=[])
        m.txPub(tx.tx, {"p": tx.proc, "x": tx.n, "v": 1}, n=5, deps=plan["5"])
        if self._explicit_abort(tx):
            self._decide(tx, "aborted", "the TXC's explicit abort")
        else:
            self._decide(tx, "committed")

    # BL-WAIT: op1, wait, op5 (plain pub/sub)
    def _begin_blwait(self, tx: Tx) -> None:
        op = self._op(tx.tx, 1, tx.e, "pub", deps=[])
        self._pub(tx.e, {"p": tx.proc, "x": tx.n, "v": 0}, tx=tx.tx, op=op["id"], ctx=self._ctx(tx))
        self.rt.call_later(self.wait, self._blwait_op5, tx)

    def _blwait_op5(self, tx: Tx) -> None:
        if tx.ended:
            return
        op = self._op(tx.tx, 5, tx.e, "pub", deps=[f"{tx.tx}/1"])
        self._pub(tx.e, {"p": tx.proc, "x": tx.n, "v": 1}, tx=tx.tx, op=op["id"])
        tx.decided = "committed"

    def _on_timeout(self, txid: str) -> None:
        tx = self.txs.get(txid)
        if tx is None or tx.ended:
            return
        if self.variant == "blwait":
            self._end(tx, "aborted", -1.0, "timeout: op5's acknowledgement did not come")
        elif not tx.decided:
            self._decide(tx, "aborted", "timeout")
        else:  # committed, but the acknowledgement (or the commit's) never came
            self._end(tx, "committed", -1.0, "timeout after commit: "
                      + ("commit not acknowledged" if tx.acked else "op5 not acknowledged"))

    def _maybe_end(self, tx: Tx) -> None:
        if tx.decided == "committed" and tx.acked and (tx.term_acked or self.variant == "blwait"):
            self._end(tx, "committed", tx.latency_ms, "")

    def _end(self, tx: Tx, outcome: str, latency_ms: float, reason: str) -> None:
        if tx.ended:
            return
        tx.ended = True
        if tx.timer is not None:
            tx.timer.cancel()
        self.rt.log("tx_end", tx=tx.tx, client=tx.e, outcome=outcome, latency_ms=round(latency_ms, 3),
                    reason=reason)
        self.done += 1
        if outcome == "committed":
            self.committed += 1
        else:
            self.aborted += 1
        self._after(tx)

    def _after(self, tx: Tx) -> None:
        if tx.probe:  # the next probe into the same dispatch, while it is open
            disp = self.txs.get(self._disp_of(tx))
            if disp is not None:
                self._probe(disp)
            return
        if self.regular_rate:
            self._round_left -= 1
            if self._round_left <= 0:
                self.rt.log("tx_round", client=tx.e, round=self._round, phase="end")
            else:
                self._later_next(tx.e, tx.thread)
            return
        self._later_next(tx.e, tx.thread)

    @staticmethod
    def _disp_of(probe: Tx) -> str:
        return f"{probe.e}.{probe.thread}:{probe.n}"

    def _later_next(self, c: str, t: int) -> None:
        if self.think > 0:
            self.rt.call_later(self.think, self._next, c, t)
        else:
            self._next(c, t)

    # Fig 9: regular events, and a dispatch round after every round_size of them
    def _start_regular(self) -> None:
        self._reg_k = 0
        self._round = 0
        self._round_left = 0
        self._reg_period = 1.0 / float(self.regular_rate) / max(1, len(self.clients))
        self._reg_next = self.rt.mono_ns()
        self._regular_tick()

    def _regular_tick(self) -> None:
        if not self._running:
            return
        now = self.rt.mono_ns()
        period_ns = self._reg_period * 1e9
        batch = 0
        while self._reg_next <= now and batch < 500:
            c = self.clients[self._reg_k % len(self.clients)]
            i = self.inst(c)
            k = self._reg_k // len(self.clients)
            agent = self.agents_of(i)[k % 2]
            attrs = {"class": "wf", "to": agent, "k": k}
            pid = self._pub(c, attrs)
            self.rt.log("publish", client=c, pub_id=pid, seq=self.seq[c], attrs=attrs, size=0,
                        broker=self.broker_of[c])
            self._reg_k += 1
            self._reg_next += period_ns
            batch += 1
            if self._reg_k % self.round_size == 0 and self._round_left <= 0:
                self._dispatch_round()
        self._reg_timer = self.rt.call_later(max(0.0, (self._reg_next - self.rt.mono_ns()) / 1e9),
                                             self._regular_tick)

    def _dispatch_round(self) -> None:
        started = 0
        for (c, t), q in self._queues.items():
            if t == 0 and q:
                started += 1
        if not started:
            return
        self._round += 1
        self._round_left = self.round_txs * started
        for (c, t), q in self._queues.items():
            if t == 0 and q:
                self.rt.log("tx_round", client=c, round=self._round, phase="start")
                self._next(c, t)

    # -- receiving ----------------------------------------------------------------------------
    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        k = msg.get("k")
        c = msg.get("to")
        if k == "pub":
            for cid in c or ():
                if cid in self.index:
                    self._on_pub(cid, msg)
            return
        if isinstance(c, str) and c in self.mgr:
            self.mgr[c].on_message(msg)  # transaction messages: the client's TXManager

    def _on_pub(self, c: str, msg: dict[str, Any]) -> None:
        a = msg.get("a") or {}
        cls = a.get("class")
        if cls == "ack":
            tx = self.txs.get(msg.get("tx", ""))
            if tx is not None and not tx.acked:
                tx.acked = True
                tx.latency_ms = (self.rt.mono_ns() - tx.t0) / 1e6
                self._maybe_end(tx)
            return
        if cls == "wf":
            self.rt.log("deliver", client=c, pub_id=msg["id"], publisher=msg["c"], seq=msg["s"],
                        pub_t=msg["t"], hops=msg.get("h", 0))
            return
        # BL-WAIT: scenario operations as plain publications, delivered on receipt
        txid, op_id = msg.get("tx"), msg.get("op")
        if not txid or not op_id:
            return
        n = int(str(op_id).rsplit("/", 1)[1])
        self.rt.log("tx_recv", client=c, tx=txid, op_id=op_id, kind="pub", n=n)
        self.rt.log("tx_deliver", client=c, tx=txid, op_id=op_id, n=n)
        ctx = msg.get("ctx") or {}
        if n == 1 and self.role == "dispatcher":
            self._blwait_dispatch(c, ctx, op_id)
        elif n == 2 and self.role == "agent":
            proc, x = ctx["proc"], ctx["x"]
            sid = f"{txid}/3"
            self._log_op(c, txid, 3, "sub", op_id, space_filter(proc, x), sid)
            self._sub(c, sid, space_filter(proc, x))
        elif n == 5 and self.role == "agent":
            self._pub(c, {"class": "ack", "to": ctx.get("e") or self._e_of_tx(txid)}, tx=txid)

    @staticmethod
    def _e_of_tx(txid: str) -> str:
        return txid.split(":", 1)[0].rsplit(".", 1)[0]

    def _log_op(self, c: str, txid: str, n: int, kind: str, trigger: str, f: str = "", sid: str = "") -> str:
        """BL-WAIT: log an operation issued as a plain pub/sub message; its id."""
        return self._op(txid, n, c, kind, trigger=trigger, f=f, sid=sid)["id"]

    def _blwait_dispatch(self, c: str, ctx: dict[str, Any], trigger: str) -> None:
        txid, proc, x, agent = ctx["tx"], ctx["proc"], ctx["x"], ctx["agent"]
        op2 = self._log_op(c, txid, 2, "pub", trigger)
        self._pub(c, {"class": "assign", "to": agent, "proc": proc, "inst": x}, tx=txid, op=op2,
                  ctx=ctx)
        sid = standing_sid(c, proc, x)
        self._log_op(c, txid, 4, "usub", trigger, space_filter(proc, x), sid)
        self._unsub(c, sid)

    # transaction operations received (D-TX, D-TXNI, S-TX): a tcm reaches D (op1) or A (op2);
    # the operations issued here are triggered by it (the TXManager acknowledges it after them)
    def _on_tcm(self, c: str, txid: str, op: dict[str, Any]) -> None:
        ctx = op.get("ctx") or {}
        stx = self.variant == "stx"
        n = int(op["n"])
        if n == 1 and self.role == "dispatcher":
            self._trigger_d(c, txid, op, ctx, stx)
        elif n == 2 and self.role == "agent":
            self._trigger_a(c, txid, ctx, stx)

    def _trigger_d(self, c: str, txid: str, op1: dict[str, Any], ctx: dict[str, Any], stx: bool) -> None:
        proc, x, agent = ctx["proc"], ctx["x"], ctx["agent"]
        f = space_filter(proc, x)
        sid = standing_sid(c, proc, x)
        self.removing[txid] = (c, sid)
        plan = ctx.get("plan") or {}
        m = self.mgr[c]
        attrs = {"class": "assign", "to": agent, "proc": proc, "inst": x}
        if stx:
            m.txTCM(txid, attrs, n=2, ctx=ctx, deps=plan.get("2", []))
            m.txUsub(txid, sid, f=f, n=4, deps=plan.get("4", []))
            return
        # op4 is issued once op2 is acknowledged (logged then), still triggered by op1
        m.txTCM(txid, attrs, n=2, ctx=ctx,
                then=lambda: m.txUsub(txid, sid, f=f, n=4, trigger=op1["id"]) if m.open(txid) else None)

    def _trigger_a(self, c: str, txid: str, ctx: dict[str, Any], stx: bool) -> None:
        plan = ctx.get("plan") or {}
        self.mgr[c].txSub(txid, space_filter(ctx["proc"], ctx["x"]), sid=f"{txid}/3", n=3,
                          deps=plan.get("3", []) if stx else None)

    def _on_outcome(self, c: str, txid: str, outcome: str, pubs: list[dict[str, Any]]) -> None:
        """After the TXManager delivered (or discarded) the buffered publications: the standing
        state follows the outcome (so a re-sync re-issues the right subscriptions); the agent
        acknowledges a committed op5 to E."""
        op5 = any(int(op["n"]) == 5 for op in pubs)
        ctx: dict[str, Any] = next((op.get("ctx") for op in pubs if op.get("ctx")), None) or {}
        removing = self.removing.pop(txid, None)
        if outcome == "committed" and self.role == "dispatcher" and ctx:
            self.subs[c].pop(standing_sid(c, ctx["proc"], ctx["x"]), None)
        if outcome == "aborted" and removing is not None and txid in self.skipped:
            sid = removing[1]  # a restarted broker never got it back: subscribe again
            if sid in self.subs[c]:
                self._send(c, {"k": "sub", "id": sid, "f": self.subs[c][sid]})
        self.skipped.discard(txid)
        if outcome == "committed" and self.role == "agent" and ctx.get("proc") is not None:
            self.subs[c][f"{txid}/3"] = space_filter(ctx["proc"], ctx["x"])
        if outcome == "committed" and op5 and self.role == "agent":
            self._pub(c, {"class": "ack", "to": self._e_of_tx(txid)}, tx=txid)
