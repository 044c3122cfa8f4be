"""Gryphon client processes: a group of publishers or subscribers (one process each group).

Publishers: logical client ``<group>-<i>`` is one pubend ``<phb>/<group>-<i>`` at
its attach broker (the PHB); it publishes ``rate_per_s`` messages of
``size_bytes`` with attributes ``{"k": n % attr_space, "src": client}``.
Subscribers: client ``<group>-<i>`` subscribes at its SHB with the group's
filter (the pubsub filter language, ``testbed.protocols.pubsub.nodes.filters``), or -- with
``extra.filter_mod: M`` -- with ``[k,eq,i % M]`` so that
each subscriber gets ``rate / M`` of the input (the Fig 4 workload).
"""

from __future__ import annotations

import json
from typing import Any

from testbed.protocols.gryphon.nodes import events as _events  # noqa: F401  (registers the gryphon events)
from testbed.protocols.gryphon.nodes.cells import pubend_id
from testbed.protocols.gryphon.nodes.summary import filter_of, key_filter, spec_json
from testbed.nodes.runtime.api import Node
from testbed.nodes.runtime.workload import PacedWorkload


class ClientHost(Node):
    def __init__(self, rt) -> None:
        super().__init__(rt)
        self._born_ns = rt.wall_ns()
        g = self.config.get("clients") or {}
        self.group = g.get("name", self.name)
        self.role = g.get("role", self.config.get("role"))
        self.count = int(g.get("count", 1))
        attach = list(g.get("attach") or [])
        self.extra = g.get("extra") or {}
        self.clients = [f"{self.group}-{i}" for i in range(self.count)]
        self.attach = {c: attach[i % len(attach)] for i, c in enumerate(self.clients)} if attach else {}
        self.rate = float(g.get("rate_per_s") or 1.0)
        self.size = int(g.get("size_bytes") or 100)
        self.attr_space = int(self.extra.get("attr_space", 1000))
        self.filter_text = g.get("filter")
        self.dedicated = self.extra.get("connection") == "dedicated"  # one connection per subscriber
        self.seq = {c: 0 for c in self.clients}
        self.workload = PacedWorkload(rt, self._publish_k,
                                      min_wait_s=max(0.005, min(0.05, 1.0 / max(self.rate, 1e-9))))
        self.received = 0
        self.published = 0
        self._payload = b"x" * max(0, self.size - 60)  # ~60 bytes of header fields

    def filter_for(self, i: int):
        """Client i's filter: ``[k,eq,i % filter_mod]``, else the group's (pubsub filter language)."""
        mod = self.extra.get("filter_mod")
        if mod:
            return key_filter("k", i % int(mod))
        return filter_of(self.filter_text)

    async def start(self) -> None:
        if self.role == "subscriber":
            self._subscribe_all()

    def _subscribe_all(self, only: str | None = None) -> None:
        for i, c in enumerate(self.clients):
            b = self.attach.get(c)
            if b is None or (only is not None and b != only):
                continue
            spec = spec_json(self.filter_for(i))
            sub = {"k": "sub", "c": c, "f": spec}
            if self.dedicated:
                sub["ln"] = 1  # deliver to c on a connection of its own
            self.rt.send(b, sub)
            if only is None:
                self.rt.log("g_subscribe", client=c, filter=json.dumps(spec), broker=b)

    def on_peer_up(self, peer: str) -> None:
        if self.role == "subscriber" and peer in self.attach.values():
            self._subscribe_all(only=peer)  # (re)register after a (re)connection

    async def start_workload(self, t0_wall_ns: int, duration_s: float) -> None:
        if self.role != "publisher" or not self.clients:
            return
        # the schedule runs from the run's t0: publication k is client k % count's seq
        # k // count (each client publishes ``rate`` per second). The runtime calls this at t0,
        # a little late at times (the loop catches up); a process restarted after t0 resumes at
        # the current point (seqs due while it was down are skipped, so none is reused) and
        # ends at t0 + duration
        self.workload.start(self.rate * self.count, t0_wall_ns, duration_s, born_wall_ns=self._born_ns)

    async def stop_workload(self) -> None:
        self.workload.stop()

    def _publish_k(self, k: int) -> None:
        ci = k % self.count
        n = k // self.count
        c = self.clients[ci]
        b = self.attach[c]
        pe = pubend_id(b, c)
        self.seq[c] = n + 1
        self.rt.send(b, {"k": "pub", "pe": pe, "c": c, "seq": n,
                         "a": {"k": k % self.attr_space, "src": c},
                         "pt": self.rt.wall_ns(), "pl": self._payload})
        self.rt.log("g_publish", client=c, pubend=pe, seq=n, size=self.size, broker=b)
        self.published += 1

    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        if msg.get("k") == "dlv":
            self.received += 1
            self.rt.log("g_deliver", client=msg["c"], pubend=msg["pe"], tick=msg["t"], seq=msg["s"],
                        pub_t=msg["pt"], broker=src)

    def status(self) -> dict[str, Any]:
        return {"role": self.role, "clients": self.count, "published": self.published,
                "received": self.received}
