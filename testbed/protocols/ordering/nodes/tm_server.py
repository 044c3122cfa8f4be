"""A TM server process: hosts the topic managers that the placement gives it.

With ``params.tm_recovery: true`` the server survives a crash and restart (Sec 4: "the
internal state of TMs should be preserved despite possible process failures"):

* **stable storage**: every message that changes or routes state (client requests and
  chain messages) is appended to ``state_dir/tm.log`` before it is handled. A
  :class:`TMHost` is a deterministic function of the messages it handled, so a restarted
  server replays the log and is back where it was: LC, LLC, subscriptions, the answers
  it gave (retried requests get them again) and its outgoing chain messages.
* **reliable FIFO channels between TM servers**: the runtime drops frames while a
  connection is down, and a lost chain message would break the pipeline's order (docs).
  Chain messages to another server carry a per-link sequence number (``o.tm``); the
  receiver accepts them in order only, logs the sequence number with the message and
  acknowledges (``o.ack``); the sender keeps what is not acknowledged and re-sends it
  when the connection comes back and every ``RESEND_S`` without progress.

Requests from clients lost while the server is down are re-sent by the clients
(``params.retry``); a duplicate gets the logged answer.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import msgpack

from testbed.protocols.ordering.nodes.core import TMHost
from testbed.protocols.ordering.nodes.placement import make_placement, rank_table
from testbed.protocols.ordering.nodes import events as _events  # noqa: F401  (declares our events)
from testbed.nodes.runtime.api import Node

STATS_INTERVAL_S = 1.0
ACK_INTERVAL_S = 0.1
RESEND_S = 0.5
CHAN = "o.tm"
ACK = "o.ack"
_LEN = struct.Struct(">I")


class TMServer(Node):
    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        params = self.config.get("params") or {}
        tm = (self.config.get("placement") or {}).get("topic_managers")
        if not tm:
            raise ValueError("ordering: placement.topic_managers is required")
        self.servers = list(tm["servers"])
        pipeline = bool(params.get("pipeline", True))  # false: the paper's routing (issue #11)
        self.host = TMHost(self.name, make_placement(tm), causal=params.get("order") == "causal",
                           servers=self.servers if pipeline else None,
                           rank=rank_table(tm) if pipeline else None)
        self.recovery = bool(params.get("tm_recovery", False))
        self._fd: int | None = None
        self._out: dict[str, dict[int, dict[str, Any]]] = {}  # peer -> seq -> chain message
        self._out_seq: dict[str, int] = {}
        self._recv: dict[str, int] = {}  # peer -> last sequence number accepted
        self._acked_sent: dict[str, int] = {}
        self._progress: dict[str, float] = {}
        self.replayed = 0
        self.resent = 0

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self.recovery:
            path = os.path.join(self.config.get("state_dir") or ".", "tm.log")
            self._replay(path)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            for peer in list(self._out):
                self._resend(peer)
            self.rt.call_later(ACK_INTERVAL_S, self._chan_tick)
        self.rt.call_later(STATS_INTERVAL_S, self._tick)

    def _replay(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        i = 0
        while i + 4 <= len(data):
            (n,) = _LEN.unpack_from(data, i)
            if i + 4 + n > len(data):
                break  # a record cut by the crash: it was never handled
            src, msg = msgpack.unpackb(data[i + 4:i + 4 + n], raw=False, strict_map_key=False)
            i += 4 + n
            if msg.get("k") == CHAN:
                self._recv[src] = msg["q"]
                msg = msg["m"]
            self._route(self.host.handle(msg), send=False)
            self.replayed += 1
        if self.replayed:
            self.rt.log("o_tm_recovered", replayed=self.replayed,
                        outstanding=sum(len(v) for v in self._out.values()))

    def _tick(self) -> None:
        self._log_stats()
        self.rt.call_later(STATS_INTERVAL_S, self._tick)

    def _log_stats(self) -> None:
        self.rt.log("o_tm_stats", **self.host.c, tms=len(self.host.tms))

    async def stop(self) -> None:
        self._log_stats()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def status(self) -> dict[str, Any]:
        return {**self.host.c, "tms": len(self.host.tms), "replayed": self.replayed,
                "resent": self.resent}

    # -- messages ---------------------------------------------------------------------------
    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        if not self.recovery:
            send = self.rt.send
            for dst, out in self.host.handle(msg):
                send(dst, out)
            return
        k = msg.get("k")
        if k == ACK:
            out = self._out.get(src)
            if out:
                done = [q for q in out if q <= msg["q"]]
                for q in done:
                    del out[q]
                if done:
                    self._progress[src] = self.rt.mono_ns() / 1e9
            return
        if k == CHAN:
            if msg["q"] != self._recv.get(src, 0) + 1:
                self._acked_sent.pop(src, None)  # a duplicate (its ack was lost?) or a gap:
                return  # acknowledge again at the next tick; the sender re-sends what follows
            self._recv[src] = msg["q"]
            self._append(src, msg)
            inner = msg["m"]
        else:
            self._append(src, msg)
            inner = msg
        self._route(self.host.handle(inner), send=True)

    def _append(self, src: str, msg: dict[str, Any]) -> None:
        rec = msgpack.packb([src, msg], use_bin_type=True)
        os.write(self._fd, _LEN.pack(len(rec)) + rec)  # type: ignore[arg-type]

    def _route(self, outs: list[tuple[str, dict[str, Any]]], send: bool) -> None:
        for dst, out in outs:
            if dst in self.servers and dst != self.name:
                q = self._out_seq.get(dst, 0) + 1
                self._out_seq[dst] = q
                buf = self._out.setdefault(dst, {})
                if not buf:
                    self._progress[dst] = self.rt.mono_ns() / 1e9
                buf[q] = out
                if send:
                    self.rt.send(dst, {"k": CHAN, "q": q, "m": out})
            elif send:
                self.rt.send(dst, out)

    # -- the reliable channel -----------------------------------------------------------------
    def _resend(self, peer: str) -> None:
        out = self._out.get(peer)
        if not out:
            return
        for q in sorted(out):
            self.rt.send(peer, {"k": CHAN, "q": q, "m": out[q]})
            self.resent += 1
        self._progress[peer] = self.rt.mono_ns() / 1e9

    def _chan_tick(self) -> None:
        now = self.rt.mono_ns() / 1e9
        for peer, q in self._recv.items():
            if self._acked_sent.get(peer) != q:
                self.rt.send(peer, {"k": ACK, "q": q})
                self._acked_sent[peer] = q
        for peer, out in self._out.items():
            if out and now - self._progress.get(peer, 0.0) > RESEND_S:
                self._resend(peer)
        self.rt.call_later(ACK_INTERVAL_S, self._chan_tick)

    def on_peer_up(self, peer: str) -> None:
        if not self.recovery or peer not in self.servers:
            return
        if peer in self._recv:  # it may have restarted: tell it where we are
            self.rt.send(peer, {"k": ACK, "q": self._recv[peer]})
            self._acked_sent[peer] = self._recv[peer]
        self._resend(peer)
