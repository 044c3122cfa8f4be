"""A minimal node: sends numbered pings, logs what it receives, optionally echoes.

params (all optional):
    targets     [str]   where the workload sends (default: neighbors)
    rate_per_s  float   pings per second per target during the workload (0 = as fast as possible)
    size        int     padding bytes per ping
    echo        bool    answer each ping with a pong (default false)
    log_each    bool    log echo_send / echo_recv per message (default true)
    forward_to  str     forward every ping received to this node (as a new ping)

Control ops: ``send {dst, n}`` sends n pings now; ``received {}`` returns per-source
counts and FIFO violations.
"""

from __future__ import annotations

import asyncio
from typing import Any

from testbed.protocols.echo.nodes import events as _events  # noqa: F401  (declares the events)
from testbed.nodes.runtime.api import Node

BATCH = 64


class EchoNode(Node):
    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        p = self.config.get("params") or {}
        self.targets: list[str] = list(p.get("targets") or self.config.get("neighbors") or [])
        self.rate = float(p.get("rate_per_s", 100.0))
        self.pad = b"x" * int(p.get("size", 0))
        self.echo = bool(p.get("echo", False))
        self.log_each = bool(p.get("log_each", True))
        self.forward_to = p.get("forward_to")
        self.seq: dict[str, int] = {}
        self.recv: dict[str, int] = {}
        self.last_seq: dict[str, int] = {}
        self.fifo_violations = 0
        self.first_recv_ns = 0
        self.last_recv_ns = 0
        self.peer_events: list[str] = []
        self._task: asyncio.Task | None = None

    def ping(self, dst: str) -> None:
        seq = self.seq.get(dst, 0) + 1
        self.seq[dst] = seq
        t = self.rt.wall_ns()
        if self.log_each:
            self.rt.log("echo_send", dst=dst, seq=seq, size=len(self.pad))
        self.rt.send(dst, {"k": "ping", "seq": seq, "t": t, "pad": self.pad})

    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        seq = msg["seq"]
        now = self.rt.wall_ns()
        if not self.first_recv_ns:
            self.first_recv_ns = now
        self.last_recv_ns = now
        key = f"{src}/{msg['k']}"
        self.recv[key] = self.recv.get(key, 0) + 1
        if seq <= self.last_seq.get(key, 0):
            self.fifo_violations += 1
        self.last_seq[key] = seq
        if self.log_each:
            self.rt.log("echo_recv", src=src, seq=seq, sent_t=msg["t"], kind=msg["k"])
        if msg["k"] == "ping":
            if self.echo:
                self.rt.send(src, {"k": "pong", "seq": seq, "t": msg["t"]})
            if self.forward_to:
                self.ping(self.forward_to)

    def on_peer_up(self, peer: str) -> None:
        self.peer_events.append(f"up:{peer}")

    def on_peer_down(self, peer: str) -> None:
        self.peer_events.append(f"down:{peer}")

    async def start_workload(self, t0_wall_ns: int, duration_s: float) -> None:
        self._task = self.rt.spawn(self._run(duration_s))

    async def _run(self, duration_s: float) -> None:
        loop = self.rt.loop
        start = loop.time()
        end = start + duration_s
        sent = 0
        while True:
            now = loop.time()
            if now >= end:
                return
            if self.rate > 0:
                owed = int((now - start) * self.rate) + 1 - sent
                for _ in range(max(0, owed)):
                    for dst in self.targets:
                        self.ping(dst)
                    sent += 1
                await asyncio.sleep(0.001)
            else:
                for _ in range(BATCH):
                    for dst in self.targets:
                        self.ping(dst)
                await asyncio.sleep(0)

    async def stop_workload(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def on_control(self, op: str, args: dict[str, Any]) -> dict[str, Any] | None:
        if op == "send":
            n = int(args.get("n", 1))
            for _ in range(n):
                self.ping(args["dst"])
            return {"sent": n}
        if op == "received":
            return {"recv": dict(self.recv), "fifo_violations": self.fifo_violations,
                    "first_recv_ns": self.first_recv_ns, "last_recv_ns": self.last_recv_ns,
                    "peer_events": list(self.peer_events)}
        if op == "crash":  # raise from protocol code (tests the fatal path)
            self.rt.call_later(0, self._boom)
            return {}
        return None

    def _boom(self) -> None:
        raise RuntimeError("echo: crash requested")

    def status(self) -> dict[str, Any]:
        return {"received": sum(self.recv.values()), "fifo_violations": self.fifo_violations}
