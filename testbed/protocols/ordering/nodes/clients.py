"""A client process hosting ``count`` logical clients, each with its own ordering module.

Roles: ``client`` (subscribes and publishes), ``publisher``, ``subscriber``.
Group params (``clients.<g>.params``, in ``config["clients"]["extra"]``):
``topics_per_client`` (k, subscribers), ``shape`` (0.901 | 0.349, the popularity law
of ``workload.py``). Protocol params (``params``): ``ens`` (reliable | unreliable),
``buffer``, ``ttl``, ``retry``, ``order`` (total | causal), ``ens_settle``,
``diffuse`` (publish events and subscription dummies on the ENS at all), ``log_notify``, ``warmup``, ``foreign_eps``
(the subscription law's per-client probability of one foreign topic, ``workload.py``).

The ENS is the pub/sub core's broker in topic mode: a client subscribes
``[topic,eq,T]`` at the broker it is attached to; each client process advertises
``[topic,>=,0]`` once per broker. The PADRES broker acknowledges nothing, so
ENSsubscribe "returns" ``ens_settle`` seconds after the subscription was sent
(longer than the subscription's propagation through the overlay; see docs).
"""

from __future__ import annotations

import random
from typing import Any, Callable

from testbed.protocols.ordering.nodes.core import (COMPLETED_SUB_VC, EVENT_TS, OrderingModule, ts_from_wire,
                                         ts_to_wire)
from testbed.protocols.ordering.nodes.placement import make_placement, rank_table
from testbed.protocols.ordering.nodes.workload import FOREIGN_EPS, Popularity, client_subscriptions, own_topics
from testbed.protocols.ordering.nodes import events as _events  # noqa: F401  (declares our events)
from testbed.nodes.runtime.api import Node
from testbed.nodes.runtime.workload import PacedWorkload

STATS_INTERVAL_S = 1.0
TICK_S = 0.01


class _Env:
    """The world as one logical client's ordering module sees it."""

    __slots__ = ("h", "cid", "broker", "n", "seq", "ens_topics", "mod")

    def __init__(self, host: "OrderingClientHost", cid: str, broker: str) -> None:
        self.h, self.cid, self.broker = host, cid, broker
        self.n = 0
        self.seq = 0
        self.ens_topics: set[int] = set()  # topics this client holds at the ENS
        self.mod: OrderingModule | None = None

    def send_tm(self, topic: int, msg: dict[str, Any]) -> None:
        self.h.rt.send(self.h.where(topic), msg)

    def ens_publish(self, topic: int, msg: dict[str, Any]) -> None:
        h = self.h
        if not h.diffuse:
            # Timestamping only: no event reaches a subscriber, so the subscriptionUpdate dummies
            # (Fig 4a line 11) order nothing either. They were still published: with 200 clients
            # per site on the same hot topics every dummy reaches every co-subscriber (185,000
            # notifications per site at k = 10, 864,000 at k = 40), seconds of CPU per client
            # process before the workload, which it either delayed (missed workload starts) or
            # overlapped (issue #12). Subscriptions themselves (ENS and TM chains) are unchanged.
            return
        self.seq += 1
        h.rt.send(self.broker, {"k": "pub", "id": f"{self.cid}:{self.seq}", "c": self.cid,
                                "s": self.seq, "a": {"topic": topic}, "p": h.payload,
                                "t": h.rt.wall_ns(), "o": msg})
        if topic in self.ens_topics and self.mod is not None:
            # A PADRES broker never sends a publication back to the client it came from;
            # an ENS notifies every subscriber, the publisher included: deliver it here.
            h.rt.call_later(0, self.mod.on_ens_notify, msg)

    def ens_subscribe(self, topic: int, done: Callable[[], None]) -> None:
        h = self.h
        h.rt.send(self.broker, {"k": "sub", "id": f"{self.cid}:t{topic}",
                                "f": f"[topic,eq,{topic}]", "c": self.cid})
        self.ens_topics.add(topic)
        h.after_broker_up(self.broker, done)

    def ens_unsubscribe(self, topic: int) -> None:
        self.ens_topics.discard(topic)
        self.h.rt.send(self.broker, {"k": "unsub", "id": f"{self.cid}:t{topic}", "c": self.cid})

    def now(self) -> float:
        return self.h.rt.mono_ns() / 1e9

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> Any:
        return self.h.rt.call_later(delay_s, fn, *args)

    def notify(self, cid: str, ev: dict[str, Any], out_of_order: bool, buffered_s: float) -> None:
        h = self.h
        h.notified += 1
        self.n += 1
        if h.log_notify:
            h.rt.log("o_notify", client=cid, eid=ev["eid"], topic=ev["T"], ts=list(ev["ts"]),
                     ooo=out_of_order, n=self.n, wait_ms=buffered_s * 1e3)

    def timestamp_done(self, cid: str, eid: str, topic: int, ts: dict[int, int], latency_s: float,
                       hops: int, servers: list[str], tries: int) -> None:
        h = self.h
        h.rt.log("o_timestamp", client=cid, eid=eid, topic=topic, sn=ts.get(topic, 0), size=len(ts),
                 latency_ms=latency_s * 1e3, hops=hops, servers=list(servers), tries=tries,
                 t0=h.rt.wall_ns() - int(latency_s * 1e9))

    def subscribed(self, cid: str, topic: int, ts: dict[int, int], latency_s: float) -> None:
        self.h.subscribed += 1
        self.h.rt.log("o_subscribed", client=cid, topic=topic, latency_ms=latency_s * 1e3,
                      size=len(ts), ts=ts_to_wire(ts))


def ens_advertisements(process: str, brokers: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The advertisement a client process sends each broker its clients are attached to.

    One per broker, each with its own id: the overlay keeps the first advertisement of an
    id and drops later copies, so with one shared id every broker but one would hold the
    advertisement from a neighbour instead of from its own clients; subscriptions would
    stop at that one broker and the publications of clients attached elsewhere would match
    nothing (issue #11: a client group with ``attach: [b2, b3]``).
    """
    return [(b, {"k": "adv", "id": f"{process}@{b}:adv", "f": "[topic,>=,0]",
                 "c": f"{process}.adv"}) for b in brokers]


class OrderingClientHost(Node):
    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        g = self.config.get("clients") or {}
        params = self.config.get("params") or {}
        extra = g.get("extra") or {}
        self.group: str = g.get("name") or self.name
        self.role: str = g.get("role", "client")
        if self.role not in ("client", "publisher", "subscriber"):
            raise ValueError(f"clients {self.group}: role must be client, publisher or subscriber")
        count = int(g.get("count") or 0)
        attach = list(g.get("attach") or [])
        if count and not attach:
            raise ValueError(f"clients {self.group}: attach names no broker")
        tm = (self.config.get("placement") or {}).get("topic_managers")
        if not tm:
            raise ValueError("ordering: placement.topic_managers is required")
        self.where = make_placement(tm)
        self.n_topics = int(tm["topics"])
        own = own_topics(tm, self.config.get("directory") or {}, self.config.get("site"))
        self.k = int(extra.get("topics_per_client", 10))
        self.pop = Popularity(self.n_topics, float(extra.get("shape", 0.901)), own,
                              float(params.get("foreign_eps", FOREIGN_EPS)))
        self.rate = float(g.get("rate_per_s") or 0.0) * count  # the group's total
        self.payload = b"\x00" * int(g.get("size_bytes") or 0)
        self.settle = float(params.get("ens_settle", 0.3))
        self.diffuse = bool(params.get("diffuse", True))
        self.log_notify = bool(params.get("log_notify", True))
        self.warmup = float(params.get("warmup", 0.0))
        self.stuck_after = float(params.get("stuck_after", 0.5))
        self._brokers_up: set[str] = set()
        self._until_up: dict[str, list[Callable[[], None]]] = {}
        self._stuck_seen: set[tuple[str, str]] = set()
        opts = dict(reliable=params.get("ens", "reliable") == "reliable",
                    buffer_size=int(params.get("buffer", 64)), ttl_s=float(params.get("ttl", 1.0)),
                    retry_s=float(params.get("retry", 0.0)),
                    rank=rank_table(tm) if params.get("pipeline", True) else None)
        self.clients = [f"{self.group}-{i}" for i in range(count)]
        self.brokers = sorted(set(attach))
        self.mods: dict[str, OrderingModule] = {}
        for i, c in enumerate(self.clients):
            env = _Env(self, c, attach[i % len(attach)])
            self.mods[c] = env.mod = OrderingModule(c, self.name, env, **opts)
        self.rng: random.Random = self.rt.rng
        self.notified = 0
        self.subscribed = 0
        self._born_ns = self.rt.wall_ns()
        self.workload = PacedWorkload(self.rt, self._publish_one, max_batch=5000, min_wait_s=TICK_S)

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        for b, msg in ens_advertisements(self.name, self.brokers):
            self.rt.send(b, msg)
        if self.role in ("client", "subscriber") and self.k > 0:
            subs = client_subscriptions(self.rng, self.pop, self.clients, self.k)
            for c, m in self.mods.items():
                m.subscribe_many(subs[c])
        self.rt.call_later(STATS_INTERVAL_S, self._stats_tick)

    async def start_workload(self, t0_wall_ns: int, duration_s: float) -> None:
        if self.role == "subscriber" or self.rate <= 0 or not self.clients:
            return
        # from the run's t0 + warmup (which may be past for a process restarted mid-run: it
        # resumes where the schedule stands), not from now; the group's rate, each publication
        # by a client drawn at random
        self.workload.start(self.rate, t0_wall_ns, duration_s, born_wall_ns=self._born_ns,
                            lead_s=self.warmup)

    async def stop_workload(self) -> None:
        self.workload.stop()

    def _publish_one(self, k: int) -> None:
        rng = self.rng
        c = self.clients[rng.randrange(len(self.clients))]
        self.mods[c].publish({}, self.pop.pick(rng))

    def _stats_tick(self) -> None:
        self._log_stats()
        self._log_stuck(final=False)
        self.rt.call_later(STATS_INTERVAL_S, self._stats_tick)

    def _log_stuck(self, final: bool) -> None:
        """``o_stuck`` for every event held back longer than ``stuck_after`` (once per event),
        and at the end for every event still held back (``final``), with what it waits for."""
        now = self.rt.mono_ns() / 1e9
        rt, where, seen = self.rt, self.where, self._stuck_seen
        for c, m in self.mods.items():
            def select(eid: str, at: float, c: str = c) -> bool:
                age = now - at if at else 0.0
                return final or (age >= self.stuck_after and (c, eid) not in seen)

            for b in m.buffered(select):
                age = now - b["at"] if b["at"] else 0.0
                seen.add((c, b["eid"]))
                rt.log("o_stuck", client=c, eid=b["eid"], topic=b["topic"],
                       ts=ts_to_wire(b["ts"]), dummy=b["dummy"], age_ms=age * 1e3, final=final,
                       waits=[[t, have, need, where(t)] for t, have, need in b["waits"]],
                       sub=b.get("sub", ""))

    def _log_stats(self) -> None:
        ms = self.mods.values()
        self.rt.log("o_client_stats", published=sum(m.stats["published"] for m in ms),
                    notified=self.notified, ooo=sum(m.stats["ooo"] for m in ms),
                    buffered=sum(len(m.to_deliver) for m in ms),
                    retries=sum(m.stats["retries"] for m in ms),
                    forced=sum(m.stats["forced"] for m in ms),
                    pending_ts=sum(len(m.outgoing) for m in ms), subscribed=self.subscribed)

    async def stop(self) -> None:
        self.workload.stop()
        self._log_stats()
        self._log_stuck(final=True)

    def status(self) -> dict[str, Any]:
        return {"clients": len(self.clients), "notified": self.notified, "subscribed": self.subscribed}

    # -- ENSsubscribeReturn ---------------------------------------------------------------
    def after_broker_up(self, broker: str, done: Callable[[], None]) -> None:
        """``done`` ``ens_settle`` after the subscription reached ``broker``: counted from the
        connection to the broker, not from the send. A client process that subscribes at start
        may do so before its broker is up; its frames wait in the runtime's queue, and a timer
        started at the send could expire before the broker even saw the subscription (found by
        the randomized runs: a broker up 0.35 s after its clients, settle 0.3 s)."""
        if broker in self._brokers_up:
            self.rt.call_later(self.settle, done)
        else:
            self._until_up.setdefault(broker, []).append(done)

    def on_peer_up(self, peer: str) -> None:
        self._brokers_up.add(peer)
        for done in self._until_up.pop(peer, ()):
            self.rt.call_later(self.settle, done)

    def on_peer_down(self, peer: str) -> None:
        self._brokers_up.discard(peer)

    # -- messages ---------------------------------------------------------------------------
    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        k = msg.get("k")
        if k == "pub":
            ev = msg.get("o")
            if ev is None:
                return
            ts = ts_from_wire(ev["ts"])  # once for every addressed client (read-only)
            for c in msg.get("to") or ():
                m = self.mods.get(c)
                if m is not None:
                    m.on_ens_notify(ev, ts)
        elif k == EVENT_TS:
            m = self.mods.get(msg["cid"])
            if m is not None:
                m.on_event_ts(msg)
        elif k == COMPLETED_SUB_VC:
            m = self.mods.get(msg["cid"])
            if m is not None:
                m.on_completed_sub_vc(msg)


__all__ = ["OrderingClientHost", "ts_to_wire"]
