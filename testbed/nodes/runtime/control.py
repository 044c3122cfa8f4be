"""The control channel: a request/reply server on ``config["control"]``.

Same framing as the data plane (4-byte length + msgpack map). A request is
``{"op": ..., ...args}``, the reply ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}``. Requests on one connection are answered in
order. Ops (see :class:`ControlOps`): ping, clock, status, set_links, cut, heal,
partition, heal_partition, stall, unstall, start, stop_workload, shutdown;
anything else goes to ``Node.on_control`` and, if the node does not know it
either, gets ``ok: false``. Every applied op is logged (``link_set``,
``link_state``, ``stall``, ``workload``, ``node_stop``).

Authentication (:mod:`auth`): on accept the node sends a challenge nonce; every
request travels in an envelope ``{"seq", "body", "mac"}`` keyed by the run
secret and that nonce, with ``seq`` increasing on the connection. A request
that is unauthenticated, carries a bad MAC or replays a ``seq`` is refused with
``{"ok": false, "error": "refused: ..."}``, changes nothing, is counted and
logged (``conn_rejected``, rate-limited), and the connection is closed.
Every other reply is sealed with the connection's key and the request's ``seq``
(:func:`auth.seal_reply`): a process that is not the node cannot answer for it.

Before its first valid request a connection may send frames of at most
``CTL_PRE_AUTH_MAX_FRAME`` bytes and must send that request within
``AUTH_TIMEOUT_S``; at most ``CTL_MAX_PRE_AUTH`` such connections and
``CTL_MAX_CONNS`` connections in all are served at once, one more is closed at
accept and counted (``over-limit``).

Every applied op other than the read-only ``ping``, ``clock`` and ``status`` is
logged as ``ctl_applied`` with its ``origin`` (the request's ``origin`` field:
``schedule``, ``inject`` or ``housekeeping``; ``unknown`` when absent) and the
controller's address.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

from testbed.nodes.runtime import auth, codec
from testbed.nodes.runtime.framing import FrameDecoder, FrameError, FrameTooLarge
from testbed.nodes.runtime.linkemu import LinkSpec

if TYPE_CHECKING:
    from testbed.nodes.runtime.node_main import NodeRuntime


class OpError(Exception):
    """A bad control request (reply ok: false with this text)."""


def _peers_arg(args: dict[str, Any]) -> list[str]:
    peers = args.get("peers")
    if not isinstance(peers, list) or not all(isinstance(p, str) for p in peers):
        raise OpError("'peers' must be a list of node names")
    return peers


class ControlOps:
    """The built-in ops. Each returns a reply dict (``ok`` added by the server)."""

    def __init__(self, rt: "NodeRuntime") -> None:
        self.rt = rt

    def ping(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"node": self.rt.name, "run": self.rt.run_id, "pid": os.getpid()}

    def clock(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"wall_ns": time.time_ns(), "mono_ns": time.monotonic_ns()}

    def status(self, args: dict[str, Any]) -> dict[str, Any]:
        rt = self.rt
        eg = rt.egress
        return {
            "node": rt.name, "pid": os.getpid(), "uptime_s": round(rt.uptime_s(), 3),
            "counters": rt.transport.counters.as_dict(), "drops": dict(rt.drop_totals),
            "stalled": eg.stalled, "held": eg.held(), "down": eg.down.snapshot(),
            "connected": rt.transport.connected(), "inbound": rt.transport.inbound_from(),
            "emulation": rt.emulation, "workload": rt.workload_state,
            "links": {p: ln.state.spec.to_dict() for p, ln in sorted(eg.links.items())},
            "sched": eg.sched_summary(), "node_status": rt.node.status(),
            "rejected": dict(rt.rejects.totals),
        }

    def set_links(self, args: dict[str, Any]) -> dict[str, Any]:
        links = args.get("links")
        if not isinstance(links, dict):
            raise OpError("'links' must be a map {destination: link spec}")
        rt = self.rt
        new = {}
        for dst, d in links.items():
            if dst not in rt.peers:
                raise OpError(f"set_links: unknown destination {dst!r}")
            try:
                new[dst] = LinkSpec.from_dict(d, rt.egress.spec(dst))
            except ValueError as e:
                raise OpError(f"set_links: {dst}: {e}") from None
        for dst, spec in new.items():  # all validated first: apply all or nothing
            rt.set_link(dst, spec)
        return {"applied": sorted(new)}

    def _hold(self, peers: list[str], reason: str, down: bool) -> dict[str, Any]:
        rt = self.rt
        for p in peers:
            if p not in rt.peers:
                raise OpError(f"unknown peer {p!r}")
        for p in peers:
            was_down = rt.egress.down.is_down(p)
            if down:
                rt.egress.down.add(p, reason)
            else:
                rt.egress.down.remove(p, reason)
            rt.log("link_state", peer=p, up=not rt.egress.down.is_down(p), reason=reason)
            if was_down and not rt.egress.down.is_down(p):
                rt.link_restored(p)
        return {"down": rt.egress.down.snapshot()}

    def cut(self, args: dict[str, Any]) -> dict[str, Any]:
        """``close: true`` also closes the connection to each peer (seen lost at once by both
        ends, ``on_peer_down``) and keeps it closed until the heal; without it a cut is silent
        (frames dropped at egress, the connection stays up)."""
        close = args.get("close", False)
        if not isinstance(close, bool):
            raise OpError("'close' must be true or false")
        peers = _peers_arg(args)
        reply = self._hold(peers, "cut", True)
        if close:
            reply["closed"] = [p for p in peers if self.rt.transport.hold_closed(p)]
        return reply

    def heal(self, args: dict[str, Any]) -> dict[str, Any]:
        peers = _peers_arg(args)
        reply = self._hold(peers, "cut", False)
        for p in peers:
            self.rt.transport.release(p)
        return reply

    def partition(self, args: dict[str, Any]) -> dict[str, Any]:
        pid = args.get("id")
        if not isinstance(pid, str) or not pid:
            raise OpError("'id' must be a non-empty string")
        return self._hold(_peers_arg(args), f"partition:{pid}", True)

    def heal_partition(self, args: dict[str, Any]) -> dict[str, Any]:
        pid = args.get("id")
        if not isinstance(pid, str) or not pid:
            raise OpError("'id' must be a non-empty string")
        reason = f"partition:{pid}"
        return self._hold(self.rt.egress.down.peers_with(reason), reason, False)

    def stall(self, args: dict[str, Any]) -> dict[str, Any]:
        rt = self.rt
        held = rt.egress.stall()
        rt.log("stall", on=True, held=held)
        return {"held": held}

    def unstall(self, args: dict[str, Any]) -> dict[str, Any]:
        rt = self.rt
        held = rt.egress.unstall()
        rt.log("stall", on=False, held=held)
        return {"released": held}

    def start(self, args: dict[str, Any]) -> dict[str, Any]:
        t0 = args.get("t0_wall_ns")
        dur = args.get("duration_s", self.rt.config.get("duration_s"))
        if isinstance(t0, bool) or not isinstance(t0, (int, float)):
            raise OpError("'t0_wall_ns' must be a number (ns since the epoch)")
        t0 = int(t0)
        if isinstance(dur, bool) or not isinstance(dur, (int, float)) or dur < 0:
            raise OpError("'duration_s' must be a number >= 0")
        delay = self.rt.schedule_workload(t0, float(dur))
        return {"starts_in_s": round(delay, 6)}

    async def stop_workload(self, args: dict[str, Any]) -> dict[str, Any]:
        await self.rt.stop_workload()
        return {}

    def shutdown(self, args: dict[str, Any]) -> dict[str, Any]:
        # Reply first; the runtime stops on the next loop iterations.
        self.rt.loop.call_soon(self.rt.request_shutdown, "shutdown")
        return {}


BUILTIN_OPS = ("ping", "clock", "status", "set_links", "cut", "heal", "partition", "heal_partition",
               "stall", "unstall", "start", "stop_workload", "shutdown")
READ_ONLY_OPS = ("ping", "clock", "status")
ORIGINS = ("schedule", "inject", "housekeeping")
AUTH_TIMEOUT_S = 3.0  # a connection that sends no valid request in this time is closed
CTL_MAX_FRAME = 1024 * 1024  # once the connection has sent one valid request
CTL_PRE_AUTH_MAX_FRAME = 64 * 1024  # until then (a set_links for a few hundred peers fits)
CTL_MAX_PRE_AUTH = 8  # control connections at once without a valid request yet
CTL_MAX_CONNS = 32  # control connections at once


class _CtlProtocol(asyncio.Protocol):
    def __init__(self, server: "ControlServer") -> None:
        self.server = server
        self.decoder = FrameDecoder(CTL_PRE_AUTH_MAX_FRAME)
        self.queue: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task | None = None
        self.peer = "?"
        self.nonce = auth.nonce()
        self.key = b""
        self.last_seq = 0
        self.refused = False
        self.timer: asyncio.TimerHandle | None = None
        self.pre_auth_bytes = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.peer = auth.peer_name(transport)
        rt = self.server.rt
        srv = self.server
        if srv.pre_auth >= CTL_MAX_PRE_AUTH or len(srv.conns) >= CTL_MAX_CONNS:
            self.refused = True
            rt.reject("control", self.peer, "over-limit",
                      f"{len(srv.conns)} control connections ({srv.pre_auth} before a valid request; "
                      f"caps {CTL_MAX_CONNS}, {CTL_MAX_PRE_AUTH})")
            transport.abort()
            return
        srv.pre_auth += 1
        self.key = auth.control_key(rt.secret, rt.run_id, rt.name, self.nonce)
        transport.write(codec.frame({"k": "challenge", "nonce": self.nonce, "node": rt.name,  # type: ignore[attr-defined]
                                     "run": rt.run_id}))
        self.task = asyncio.get_running_loop().create_task(self._worker())
        self.server.conns.add(self)
        self.timer = rt.loop.call_later(AUTH_TIMEOUT_S, self._auth_timeout)

    def _auth_timeout(self) -> None:
        self.timer = None
        if self.last_seq == 0 and not self.refused:
            self.refuse("timeout", f"no authenticated request within {AUTH_TIMEOUT_S:g}s")

    def refuse(self, reason: str, detail: str) -> None:
        """Refuse the connection: counted, logged (rate-limited), one error reply, closed."""
        if self.refused:
            return
        self.refused = True
        self.server.rt.reject("control", self.peer, reason, detail)
        self._reply({"ok": False, "error": f"refused: {detail}"})
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        if self.last_seq == 0:
            self.pre_auth_bytes += len(data)
        try:
            for p in self.decoder.feed(data):
                env = codec.decode(p)
                self.last_seq, body = auth.open_request(self.key, self.last_seq, env)
                if self.decoder.max_frame != CTL_MAX_FRAME:  # the first valid request
                    self.decoder.max_frame = CTL_MAX_FRAME
                    self.server.pre_auth -= 1
                req = codec.decode(body)
                if self.timer is not None:
                    self.timer.cancel()
                    self.timer = None
                self.queue.put_nowait((self.last_seq, req))
        except auth.AuthError as e:
            self.refuse(e.reason, str(e))
        except FrameError as e:
            self.refuse("too-large" if isinstance(e, FrameTooLarge) else "malformed", f"bad frame: {e}")

    def connection_lost(self, exc: Exception | None) -> None:
        if self.last_seq == 0 and not self.refused and self.pre_auth_bytes:
            # sent something, but closed before a complete request (silent connections: not counted)
            self.refused = True
            self.server.rt.reject("control", self.peer, "incomplete",
                                  f"closed after {self.pre_auth_bytes} bytes without a complete request")
        if self in self.server.conns:
            self.server.conns.discard(self)
            if self.decoder.max_frame != CTL_MAX_FRAME:
                self.server.pre_auth -= 1
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.task is not None:
            self.task.cancel()

    def _reply(self, rep: dict[str, Any], seq: int = 0) -> None:
        """Write a reply: sealed with the connection's key and the request's ``seq`` (``seq`` 0:
        a refusal of a request that was not authenticated, sent as it is)."""
        if self.transport is not None and not self.transport.is_closing():
            if seq:
                self.transport.write(codec.frame(auth.seal_reply(self.key, seq, codec.encode(rep),
                                                                 bool(rep.get("ok")))))
            else:
                self.transport.write(codec.frame(rep))

    async def _worker(self) -> None:
        while True:
            seq, req = await self.queue.get()
            self._reply(await self.server.handle(req, self.peer), seq)


def _summary(args: dict[str, Any]) -> list[str]:
    """A short, log-friendly list of a built-in op's arguments (peers, link destinations, id)."""
    out: list[str] = []
    peers = args.get("peers")
    if isinstance(peers, list):
        out += [str(p)[:64] for p in peers[:32]]
    links = args.get("links")
    if isinstance(links, dict):
        out += [str(d)[:64] for d in list(links)[:32]]
    if isinstance(args.get("id"), str):
        out.append(f"id={args['id'][:64]}")
    return out


class ControlServer:
    def __init__(self, rt: "NodeRuntime") -> None:
        self.rt = rt
        self.ops = ControlOps(rt)
        self.server: asyncio.AbstractServer | None = None
        self.conns: set[_CtlProtocol] = set()
        self.pre_auth = 0  # connections without a valid request yet

    async def listen(self, host: str, port: int) -> None:
        self.server = await self.rt.loop.create_server(lambda: _CtlProtocol(self), host, port,
                                                       reuse_address=True)

    async def handle(self, req: dict[str, Any], peer: str = "?") -> dict[str, Any]:
        """Carry out one authenticated request."""
        op = req.get("op")
        if not isinstance(op, str):
            return {"ok": False, "error": "request has no 'op' string"}
        origin = req.get("origin")
        origin = origin if isinstance(origin, str) and origin in ORIGINS else "unknown"
        args = {k: v for k, v in req.items() if k not in ("op", "origin")}
        rep = await self._apply(op, args)
        if op not in READ_ONLY_OPS:
            self.rt.log("ctl_applied", op=op[:64], origin=origin, peer=peer, ok=bool(rep.get("ok")),
                        args=_summary(args) if op in BUILTIN_OPS else sorted(map(str, args))[:16])
        return rep

    async def _apply(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        try:
            if op in BUILTIN_OPS:
                rep = getattr(self.ops, op)(args)
                if asyncio.iscoroutine(rep):
                    rep = await rep
            else:
                rep = self.rt.node.on_control(op, args)
                if asyncio.iscoroutine(rep):
                    rep = await rep
                if rep is None:
                    return {"ok": False, "error": f"unknown op {op!r}"}
        except OpError as e:
            return {"ok": False, "error": str(e)}
        except Exception as e:  # a bug in an op or in Node.on_control: report, keep running
            traceback.print_exc(file=sys.stderr)
            return {"ok": False, "error": f"{op}: {type(e).__name__}: {e}"}
        out = {"ok": True}
        out.update(rep)
        return out

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for c in list(self.conns):
            if c.transport is not None:
                c.transport.close()
