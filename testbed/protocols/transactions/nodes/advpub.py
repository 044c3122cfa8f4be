"""``params.scenario: advpub``: transactional advertisements, built on the TXManager library.

Two client groups: ``coordinator`` (C2, the TXC, one per instance) and ``agent`` (C1, the
subscriber, one per instance). Instance ``i`` is ``<coordinator>-i`` and ``<agent>-i``; its
``n``-th transaction (id ``<c2>.0:n``) uses the event space ``q = "q<i>"``, ``x = n``::

    op1  C2  tcm {class: join, to: C1, q, x}      (C1 subscribes to these, standing)
    op2  C1  sub [class,eq,'q'],[q,eq,'q<i>'],[x,eq,n]
                                                  triggered by op1; nothing advertises it yet,
                                                  so C1's broker holds it (not forwarded)
    op3  C2  adv of the same filter               releases op2 at C1's broker: a sub the broker
                                                  issues (Alg 2), acknowledged before op3 is
    op4  C2  pub {class: q, q, x, v: 1}           must reach C1 (only), delivered on commit
    op5  C2  uadv of op3 (even n only)            withdraws what op3 released (usub operations
                                                  the brokers issue)

then ``commitTX`` (``abortTX`` for every ``params.abort_every``-th). D-TX/D-TXNI: the TXManager
sends each operation after the previous one's acknowledgement (op3 after op1, whose ack waits
for op2's). S-TX: everything at once, the TXC passing the dependencies it knows in advance
(op2's descriptor included). Logged: ``tx_begin`` (kind ``advpub``, agent = C1, dispatcher =
''), the TXManager's events, ``tx_end`` when the commit's (abort's) acknowledgement is back.
"""

from __future__ import annotations

from typing import Any

from testbed.nodes.runtime.api import Node
from testbed.protocols.transactions.nodes import events as _events  # noqa: F401
from testbed.protocols.transactions.nodes.workload import begin_workload, client_group
from testbed.protocols.transactions.nodes.txmanager import TXManager

ROLES = ("coordinator", "agent")


def space(i: int, n: int) -> str:
    """The event space of instance i's n-th transaction (``class`` keeps it disjoint from the
    standing ``join`` advertisement: filters on different attributes always intersect)."""
    return f"[class,eq,'q'],[q,eq,'q{i}'],[x,eq,{int(n)}]"


class AdvPubHost(Node):
    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        p = self.config.get("params") or {}
        self.group, self.role, self.clients, self.broker_of = client_group(self, ROLES, "advpub")
        groups = {d.get("role"): name for name, d in (self.config.get("directory") or {}).items()
                  if d.get("kind") == "clients"}
        if "agent" not in groups or "coordinator" not in groups:
            raise ValueError(f"clients {self.group}: scenario advpub needs a coordinator and an agent group")
        self.g_c2, self.g_c1 = groups["coordinator"], groups["agent"]
        self.variant: str = p.get("variant") or "dtx"
        if self.variant == "blwait":
            raise ValueError("scenario advpub needs a transactional variant (dtx, dtxni, stx)")
        self.total = int(p.get("transactions") or 1)
        self.timeout = float(p.get("timeout") or 5.0)
        self.think = float(p.get("think") or 0.0)
        self.abort_every = int(p.get("abort_every") or 0)
        instances = max(1, int(p.get("instances") or 1))
        self.per = [self.total // instances + (1 if i < self.total % instances else 0) for i in range(instances)]
        self.m = {c: TXManager(rt, c, self.broker_of[c], self.variant, on_tcm=self._on_tcm)
                  for c in self.clients}
        self.open: dict[str, dict[str, Any]] = {}  # tx -> {t0, timer, c, n}
        self.next_n = dict.fromkeys(self.clients, 0)
        self._running = False
        self._started = False
        self._last_begin_ns = 0
        self.done = self.committed = self.aborted = 0

    # -- plain pub/sub standing state -------------------------------------------------
    def _send(self, c: str, msg: dict[str, Any]) -> None:
        msg["c"] = c
        self.rt.send(self.broker_of[c], msg)

    async def start(self) -> None:
        for c in self.clients:
            if self.variant == "stx":
                self._send(c, {"k": "join"})
            if self.role == "coordinator":
                self._send(c, {"k": "adv", "id": f"{c}:a1", "f": "[class,eq,'join'],[to,isPresent,'']"})
            else:
                self._send(c, {"k": "sub", "id": f"{c}:join", "f": f"[class,eq,'join'],[to,eq,'{c}']"})

    async def start_workload(self, t0_wall_ns: int, duration_s: float) -> None:
        if self.role != "coordinator":
            return
        begin_workload(self, t0_wall_ns, duration_s)

    async def stop_workload(self) -> None:
        self._running = False

    async def stop(self) -> None:
        self._running = False

    def status(self) -> dict[str, Any]:
        out = {"role": self.role, "variant": self.variant, "scenario": "advpub", "done": self.done,
               "committed": self.committed, "aborted": self.aborted, "open": len(self.open)}
        if self.role == "coordinator":
            out["finished"] = self._started and not self.open and (
                self.rt.mono_ns() > self._last_begin_ns
                or all(self.next_n[c] >= self.per[int(c.rsplit("-", 1)[1])] for c in self.clients))
        return out

    # -- C2, the TXC ----------------------------------------------------------------------
    def _begin_all(self) -> None:
        self._started = True
        for c in self.clients:
            self._next(c)

    def _next(self, c: str) -> None:
        i = int(c.rsplit("-", 1)[1])
        if not self._running or self.rt.mono_ns() > self._last_begin_ns or self.next_n[c] >= self.per[i]:
            return
        n = self.next_n[c] = self.next_n[c] + 1
        c1 = f"{self.g_c1}-{i}"
        tx = f"{c}.0:{n}"
        m = self.m[c]
        self.open[tx] = {"t0": self.rt.mono_ns(), "c": c, "n": n,
                         "timer": self.rt.call_later(self.timeout, self._on_timeout, tx)}
        self.rt.log("tx_begin", tx=tx, client=c, thread=0, agent=c1, dispatcher="", variant=self.variant,
                    kind="advpub")
        f = space(i, n)
        aid = f"{tx}/3"
        ids = {k: f"{tx}/{k}" for k in range(1, 6)}
        desc = {1: [ids[1], c, "", "tcm"], 2: [ids[2], c1, f, "sub"], 3: [ids[3], c, f, "adv"],
                4: [ids[4], c, "", "pub"], 5: [ids[5], c, f, "uadv"]}
        last = 5 if n % 2 == 0 else 4
        stx = self.variant == "stx"

        alldeps = [desc[k] for k in range(1, last + 1)] if stx else None

        def decide() -> None:  # after the last operation's acknowledgement (S-TX: once it is sent)
            if not m.open(tx):
                return  # the timeout aborted it meanwhile
            if self.abort_every and n % self.abort_every == 0:
                m.abortTX(tx, acked=lambda o: self._end(tx, o), deps=alldeps)
            else:
                m.commitTX(tx, acked=lambda o: self._end(tx, o), deps=alldeps)

        # issued at once: the TXManager holds them until initAckMsg, then sends one after the other
        m.beginTX(tx, order=[f"{c}.0", n])
        m.txTCM(tx, {"class": "join", "to": c1, "q": f"q{i}", "x": n}, n=1,
                ctx={"f": f, "n": n}, deps=[] if stx else None)
        m.txAdv(tx, f, aid=aid, n=3, deps=[desc[1], desc[2]] if stx else None)
        m.txPub(tx, {"class": "q", "q": f"q{i}", "x": n, "v": 1}, n=4,
                deps=[desc[k] for k in (1, 2, 3)] if stx else None, then=decide if last == 4 else None)
        if last == 5:
            m.txUadv(tx, aid, f=f, n=5, deps=[desc[k] for k in (1, 2, 3, 4)] if stx else None, then=decide)

    def _on_timeout(self, tx: str) -> None:
        o = self.open.get(tx)
        if o is None:
            return
        m = self.m[o["c"]]
        if m.open(tx):
            m.abortTX(tx)
            self._end(tx, "aborted", reason="timeout")
        else:
            self._end(tx, m.outcome(tx), reason="timeout: the outcome was not acknowledged", lat=-1.0)

    def _end(self, tx: str, outcome: str, reason: str = "", lat: float | None = None) -> None:
        o = self.open.pop(tx, None)
        if o is None:
            return
        o["timer"].cancel()
        outcome = outcome or "aborted"
        latency = (self.rt.mono_ns() - o["t0"]) / 1e6 if lat is None else lat
        self.rt.log("tx_end", tx=tx, client=o["c"], outcome=outcome, latency_ms=round(latency, 3), reason=reason)
        self.done += 1
        if outcome == "committed":
            self.committed += 1
        else:
            self.aborted += 1
        if self.think > 0:
            self.rt.call_later(self.think, self._next, o["c"])
        else:
            self._next(o["c"])

    # -- C1 -------------------------------------------------------------------------------
    def _on_tcm(self, c: str, tx: str, op: dict[str, Any]) -> None:
        ctx = op.get("ctx") or {}
        self.m[c].txSub(tx, ctx["f"], sid=f"{tx}/2", n=2)  # triggered by op1 (S-TX deps: op1's + op1)

    # -- receiving ------------------------------------------------------------------------
    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        c = msg.get("to")
        if isinstance(c, str) and c in self.m:
            self.m[c].on_message(msg)
