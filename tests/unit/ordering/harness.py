"""An in-memory, discrete-event harness for the ordering protocol's pure state machines.

TM servers (:class:`TMHost`) and ordering modules (:class:`OrderingModule`) exchange
messages over FIFO links with random delays; the ENS is a reliable (or lossy)
topic-based service whose per-subscriber paths are FIFO per publisher but
unordered across publishers. Every notification is recorded into a history in
the same shape the node logs produce, so the same checkers read both.
"""

from __future__ import annotations

import heapq
import itertools
import random
from typing import Any, Callable

from testbed.protocols.ordering.nodes.core import (COMPLETED_SUB_VC, EVENT_TS, OrderingModule, TMHost,
                                         ts_from_wire, ts_to_wire)
from testbed.protocols.ordering.nodes.placement import make_placement, rank_table


class Sim:
    def __init__(self, *, n_topics: int = 12, servers=("s1", "s2"), seed: int = 1,
                 ens_loss: float = 0.0, tm_loss: float = 0.0, reliable: bool = True,
                 retry_s: float = 0.0, causal: bool = False, ttl_s: float = 0.5,
                 buffer_size: int = 16, delay=(0.001, 0.05), strategy: str = "range",
                 link_delay: Callable[[str, str], tuple[float, float]] | None = None,
                 assign: dict[str, list[int]] | None = None, pipeline: bool = True) -> None:
        self.rng = random.Random(seed)
        self.now = 0.0
        self.q: list = []
        self.seq = itertools.count()
        self.tmconf = {"topics": n_topics, "strategy": strategy, "servers": list(servers)}
        if assign is not None:
            self.tmconf.update(strategy="explicit", assign=assign)
        self.where = make_placement(self.tmconf)
        self.rank = rank_table(self.tmconf)
        if not pipeline:  # the routing before issue #11: topic id order, straight to the next server
            self.rank = None
        self.hosts = {s: TMHost(s, self.where, causal=causal, servers=servers if pipeline else None,
                                rank=self.rank) for s in servers}
        self.clients: dict[str, OrderingModule] = {}
        self.ens_subs: dict[int, set[str]] = {}
        self.ens_loss, self.tm_loss, self.delay = ens_loss, tm_loss, delay
        self.link_delay = link_delay  # (src, dst) -> (lo, hi) seconds; default: delay
        self.link_free: dict[tuple[str, str], float] = {}
        self.history: list[dict[str, Any]] = []
        self.t0: dict[str, float] = {}
        self.opts = dict(reliable=reliable, retry_s=retry_s, ttl_s=ttl_s, buffer_size=buffer_size,
                         rank=self.rank)

    # -- scheduling ------------------------------------------------------------------------
    def at(self, t: float, fn: Callable, *args) -> None:
        heapq.heappush(self.q, (t, next(self.seq), fn, args))

    def later(self, d: float, fn: Callable, *args) -> None:
        self.at(self.now + d, fn, *args)

    def send(self, src: str, dst: str, fn: Callable, *args, loss: float = 0.0) -> None:
        if loss and self.rng.random() < loss:
            return
        d = self.rng.uniform(*(self.link_delay(src, dst) if self.link_delay else self.delay))
        t = max(self.now + d, self.link_free.get((src, dst), 0.0))  # FIFO per link
        self.link_free[(src, dst)] = t
        self.at(t, fn, *args)

    def run(self, until: float | None = None) -> None:
        while self.q and (until is None or self.q[0][0] <= until):
            t, _, fn, args = heapq.heappop(self.q)
            self.now = t
            fn(*args)

    # -- nodes -------------------------------------------------------------------------------
    def client(self, cid: str) -> OrderingModule:
        sim = self

        class E:
            def send_tm(self, topic, msg):
                server = sim.where(topic)
                sim.send(cid, server, sim._tm_recv, server, msg, loss=sim.tm_loss)

            def ens_publish(self, topic, msg):
                sim.history.append({"ev": "o_ens_publish", "client": cid, "eid": msg["eid"],
                                    "topic": topic, "t": sim.now, "dummy": bool(msg.get("dummy")),
                                    "sn": ts_from_wire(msg["ts"]).get(topic),
                                    "t0": sim.t0.get(msg["eid"], sim.now)})
                for sub in list(sim.ens_subs.get(topic, ())):
                    sim.send("ens:" + cid, sub, sim._ens_recv, sub, msg, loss=sim.ens_loss)

            def ens_subscribe(self, topic, done):
                def activate():
                    sim.ens_subs.setdefault(topic, set()).add(cid)
                    sim.later(sim.rng.uniform(*sim.delay), done)
                sim.later(sim.rng.uniform(*sim.delay), activate)

            def ens_unsubscribe(self, topic):
                sim.ens_subs.get(topic, set()).discard(cid)

            def now(self):
                return sim.now

            def call_later(self, d, fn, *args):
                sim.later(d, fn, *args)

            def notify(self, c, ev, ooo, waited):
                sim.history.append({"ev": "o_notify", "client": c, "eid": ev["eid"], "topic": ev["T"],
                                    "ts": ev["ts"], "ooo": ooo, "t": sim.now, "wait_ms": waited * 1e3})

            def timestamp_done(self, c, eid, topic, ts, lat, hops, servers, tries):
                sim.t0[eid] = sim.now - lat
                sim.history.append({"ev": "o_timestamp", "client": c, "eid": eid, "topic": topic,
                                    "ts": ts_to_wire(ts), "size": len(ts), "t": sim.now,
                                    "servers": list(servers), "hops": hops})

            def subscribed(self, c, topic, ts, lat):
                sim.history.append({"ev": "o_subscribed", "client": c, "topic": topic, "t": sim.now,
                                    "ts": ts_to_wire(ts)})

        m = OrderingModule(cid, cid, E(), **self.opts)
        self.clients[cid] = m
        return m

    def stuck_records(self) -> list[dict[str, Any]]:
        """What the client host logs at the end (``o_stuck`` with final=True), for every client."""
        out = []
        for cid, m in self.clients.items():
            for b in m.buffered():
                out.append({"ev": "o_stuck", "client": cid, "eid": b["eid"], "topic": b["topic"],
                            "age_ms": (self.now - b["at"]) * 1e3, "final": True,
                            "waits": [[t, h, n, self.where(t)] for t, h, n in b["waits"]],
                            "sub": b.get("sub", ""), "t": self.now})
        return out


    def _tm_recv(self, server: str, msg: dict) -> None:
        for dst, out in self.hosts[server].handle(msg):
            if dst in self.hosts:  # TM <-> TM: reliable FIFO (TCP); see docs/ordering.md
                self.send(server, dst, self._tm_recv, dst, out)
            else:
                self.send(server, dst, self._client_recv, dst, out, loss=self.tm_loss)

    def _client_recv(self, cid: str, msg: dict) -> None:
        m = self.clients[cid]
        if msg["k"] == EVENT_TS:
            m.on_event_ts(msg)
        elif msg["k"] == COMPLETED_SUB_VC:
            m.on_completed_sub_vc(msg)

    def _ens_recv(self, cid: str, msg: dict) -> None:
        if msg["T"] in self.ens_subs and cid in self.ens_subs[msg["T"]]:
            self.clients[cid].on_ens_notify(msg)

    def unsubscribe_at(self, t: float, cid: str, topic: int | None = None) -> None:
        def go():
            nonlocal topic
            if topic is None:
                if not self.clients[cid].subs:
                    return
                topic = min(self.clients[cid].subs)
            self.history.append({"ev": "o_unsubscribe", "client": cid, "topic": topic, "t": self.now})
            self.clients[cid].unsubscribe(topic)
        self.at(t, go)


def random_run(seed: int, *, n_clients: int = 8, n_topics: int = 12, k: int = 4, events: int = 200,
               churn: bool = True, **kw) -> Sim:
    sim = Sim(n_topics=n_topics, seed=seed, **kw)
    rng = random.Random(seed * 7 + 1)
    for i in range(n_clients):
        sim.client(f"c{i}")
    for i in range(n_clients):
        m = sim.clients[f"c{i}"]
        topics = rng.sample(range(n_topics), k)
        if i % 2:  # one SUBSCRIBE of the whole set
            sim.at(rng.uniform(0, 0.5), m.subscribe_many, topics)
        else:  # one topic at a time
            for j, t in enumerate(topics):
                sim.at(rng.uniform(0, 0.5), m.subscribe, t)
    for e in range(events):
        cid = f"c{rng.randrange(n_clients)}"
        sim.at(rng.uniform(0.0, 3.0), sim.clients[cid].publish, {"n": e}, rng.randrange(n_topics))
    if churn:
        for i in range(0, n_clients, 3):
            extra = rng.randrange(n_topics)
            sim.at(rng.uniform(1.0, 2.0), sim.clients[f"c{i}"].subscribe, extra)
        sim.unsubscribe_at(2.2, "c1")
    sim.run()
    return sim

