"""asyncio TCP transport: one data listener, one outbound connection per destination.

* Handshake (:mod:`auth`): the receiver sends ``{"k": "challenge", "nonce"}`` on
  accept; the sender answers ``{"k": "hello", "from", "run", "nonce", "mac"}``
  (an HMAC with the run secret over sender, run, receiver and the receiver's
  nonce); the receiver checks it before it processes any other frame, then
  answers ``{"k": "hello_ack", "from", "mac"}`` (an HMAC over the sender's nonce),
  and only once the sender has checked that is the peer up. A stranger, a node of
  another run or garbage is refused (connection closed, counted and logged as
  ``conn_rejected`` through ``on_reject``); nothing is added per data frame.
  Before the hello frames are limited to ``HANDSHAKE_MAX_FRAME`` bytes, and a
  connection without a valid hello after ``HELLO_TIMEOUT_S`` is closed.
* Connection caps: at most ``MAX_PRE_AUTH`` inbound connections without a valid hello
  and at most one per peer plus ``MAX_INBOUND_EXTRA`` in all; a connection beyond
  either is closed at once and counted (``over-limit``), so a flood of idle
  connections holds a bounded number of descriptors and bytes.
* Outbound: frames for a destination never reached yet are queued (at most
  ``queue_limit``, beyond that dropped as ``queue-full``) until the first
  connection; after a connection is lost, frames are dropped (``no-connection``)
  until the reconnect succeeds. Reconnects back off from 50 ms, doubling, to 1 s.
* Write batching: frames released in the same loop iteration are joined into
  one ``transport.write`` (a ``call_soon`` flush per connection). TCP_NODELAY.
* Lanes: a frame that is a :class:`LaneFrame` goes on a connection of its own to the
  destination, one per lane name (Gryphon's dedicated connection per subscriber): an
  :class:`Outbound` like the main one, whose coming and going is not a peer up/down; at most
  ``LANE_CONNECTS`` lanes of a node connect at a time (the receiver's pre-hello cap), the rest
  queue their frames until their turn. A fault holding a peer closed closes its lanes too.
* Inbound: one :class:`FrameDecoder` per connection (asyncio Protocols, no
  streams); the hello frame names the peer; every later frame goes to
  ``on_message(src, msg)``. Any error on a connection goes down one path,
  ``connection_lost`` (framing errors close the connection and are counted and
  logged through ``on_reject``; exceptions raised by ``on_message`` go to ``on_fatal``).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any, Callable

from testbed.nodes.runtime import auth, codec
from testbed.nodes.runtime.framing import MAX_FRAME, FrameDecoder, FrameError, FrameTooLarge

BACKOFF_START_S = 0.05
BACKOFF_CAP_S = 1.0
HELLO_TIMEOUT_S = 5.0
HOLD_POLL_S = 0.05  # how often a held-closed connection checks whether it may reconnect
QUEUE_LIMIT = 100_000
HANDSHAKE_MAX_FRAME = 4096  # until a peer has proved the run secret, frames are small
MAX_PRE_AUTH = 32  # inbound data connections at once that have not sent a valid hello yet
MAX_INBOUND_EXTRA = 64  # inbound data connections at once: one per peer plus this many
ACCEPT_BATCH = 128  # connections accepted per listener wake-up (asyncio's backlog argument)
LANE_CONNECTS = 8  # lanes of one node connecting (before their hello_ack) at a time


class LaneFrame(bytes):
    """A frame for lane ``lane`` of its destination (``bytes`` to the link emulation)."""

    lane: str


class Counters:
    __slots__ = ("sent", "received", "bytes_out", "bytes_in", "dropped")

    def __init__(self) -> None:
        self.sent = self.received = self.bytes_out = self.bytes_in = self.dropped = 0

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}


def _nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


class _OutProtocol(asyncio.Protocol):
    """Outbound side: writes frames; reads only the receiver's hello_ack."""

    def __init__(self, peer: "Outbound") -> None:
        self.peer = peer
        self.decoder: FrameDecoder | None = FrameDecoder(HANDSHAKE_MAX_FRAME)
        self.transport: asyncio.Transport | None = None
        self.nonce: bytes | None = None  # ours, sent in the hello; the ack's MAC covers it

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        _nodelay(transport)

    def data_received(self, data: bytes) -> None:
        if self.decoder is None:
            return
        tr = self.peer.tr
        try:
            for p in self.decoder.feed(data):
                msg = codec.decode(p)
                if self.nonce is None:  # the receiver's challenge: answer with the hello
                    their = auth.check_challenge(msg)
                    self.nonce = auth.nonce()
                    hello = codec.frame({
                        "k": "hello", "from": tr.name, "run": tr.run_id, "nonce": self.nonce,
                        "mac": auth.hello_mac(tr.secret, tr.name, tr.run_id, self.peer.peer, their)})
                    tr.counters.bytes_out += len(hello)
                    if self.transport is not None:
                        self.transport.write(hello)
                    continue
                auth.check_ack(tr.secret, tr.run_id, tr.name, self.peer.peer, self.nonce, msg)
                self.decoder = None
                self.peer._acked(self)
                return
        except (FrameError, auth.AuthError) as e:
            reason = getattr(e, "reason", "too-large" if isinstance(e, FrameTooLarge) else "malformed")
            tr.reject("data-out", f"{self.peer.peer}@{auth.peer_name(self.transport)}", reason, str(e))
            if self.transport is not None:
                self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.peer._lost(self, exc)


class Outbound:
    """The outbound connection to one destination (state: never / up / lost / closed)."""

    def __init__(self, tr: "Transport", peer: str, addr: tuple[str, int], lane: str | None = None) -> None:
        self.tr = tr
        self.peer = peer
        self.lane = lane
        self.addr = addr
        self.state = "never"
        self.pending: list[bytes] = []  # before the first connection
        self.buf: list[bytes] = []  # frames waiting for this iteration's flush
        self.flush_scheduled = False
        self.transport: asyncio.Transport | None = None
        self.proto: _OutProtocol | None = None
        self.task: asyncio.Task | None = None
        self.ack: asyncio.Future[bool] | None = None

    def start(self) -> None:
        if self.task is None and self.state != "closed":
            self.task = self.tr.loop.create_task(self._connect_loop())

    async def _connect_loop(self) -> None:
        delay = BACKOFF_START_S
        while self.state != "closed":
            if self.peer in self.tr.held:  # closed by a fault (cut with close): no reconnect
                await asyncio.sleep(HOLD_POLL_S)
                continue
            if self.lane is None:
                res = await self._attempt()
            else:
                async with self.tr.lane_connects:  # a bounded number of lanes in their handshake at once
                    res = await self._attempt()
            if res is None:  # up, or closed meanwhile
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_CAP_S)

    async def _attempt(self) -> bool | None:
        """One connection and handshake: None when up (or closed meanwhile), False to retry."""
        loop = self.tr.loop
        try:
            transport, proto = await loop.create_connection(
                lambda: _OutProtocol(self), self.addr[0], self.addr[1])
        except OSError:
            return False
        if self.state == "closed":
            transport.close()
            return None
        # Up only once the peer's runtime answers the hello: a connection the
        # kernel accepted for a dying process must not count as a peer_up.
        self.ack = loop.create_future()
        self.proto = proto  # it answers the receiver's challenge with the hello
        try:
            await asyncio.wait_for(asyncio.shield(self.ack), HELLO_TIMEOUT_S)
            ok = self.ack.result()
        except asyncio.TimeoutError:
            ok = False
        if ok and self.state != "closed":
            self.transport = transport  # type: ignore[assignment]
            self.state = "up"
            self.task = None
            if self.pending:
                self.buf.extend(self.pending)
                self.pending = []
                self._flush()
            if self.lane is None:
                self.tr.on_peer_up(self.peer)
            return None
        self.proto = None
        transport.close()
        return None if self.state == "closed" else False

    def _acked(self, proto: _OutProtocol) -> None:
        if proto is self.proto and self.ack is not None and not self.ack.done():
            self.ack.set_result(True)

    def send(self, frames: list[bytes]) -> None:
        state = self.state
        if state == "up":
            if not self.flush_scheduled:
                self.flush_scheduled = True
                self.tr.loop.call_soon(self._flush)
            self.buf.extend(frames)
        elif state == "never":
            room = self.tr.queue_limit - len(self.pending)
            if room >= len(frames):
                self.pending.extend(frames)
            else:
                if room > 0:
                    self.pending.extend(frames[:room])
                self.tr.drop(self.peer, "queue-full", len(frames) - max(room, 0))
            self.start()
        else:  # lost (reconnecting) or closed
            self.tr.drop(self.peer, "no-connection", len(frames))

    def _flush(self) -> None:
        self.flush_scheduled = False
        buf = self.buf
        if not buf or self.transport is None:
            return
        self.buf = []
        data = buf[0] if len(buf) == 1 else b"".join(buf)
        c = self.tr.counters
        c.sent += len(buf)
        c.bytes_out += len(data)
        self.transport.write(data)

    def _lost(self, proto: _OutProtocol, exc: Exception | None) -> None:
        if proto is not self.proto:
            return
        if self.state != "up":  # lost before the hello_ack: the connect loop retries
            if self.ack is not None and not self.ack.done():
                self.ack.set_result(False)
            return
        self.transport = None
        self.proto = None
        if self.buf:
            self.tr.drop(self.peer, "no-connection", len(self.buf))
            self.buf = []
        if self.state == "closed":
            return
        self.state = "lost"
        if self.lane is None:
            self.tr.on_peer_down(self.peer)
        self.start()

    def close(self) -> None:
        if self.state == "up":
            self._flush()
        self.state = "closed"
        if self.task is not None:
            self.task.cancel()
            self.task = None
        if self.transport is not None:
            self.transport.close()
        elif self.proto is not None and self.proto.transport is not None:
            self.proto.transport.close()  # still waiting for the hello_ack


class _InProtocol(asyncio.Protocol):
    def __init__(self, tr: "Transport") -> None:
        self.tr = tr
        self.decoder = FrameDecoder(HANDSHAKE_MAX_FRAME)
        self.src: str | None = None
        self.transport: asyncio.Transport | None = None
        self.nonce = auth.nonce()
        self.peer = "?"
        self.timer: asyncio.TimerHandle | None = None
        self.refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.peer = auth.peer_name(transport)
        tr = self.tr
        if tr.pre_auth >= tr.max_pre_auth or len(tr.inbound) >= tr.max_inbound:
            self.refused = True
            tr.reject("data", self.peer, "over-limit",
                      f"{len(tr.inbound)} inbound connections ({tr.pre_auth} before their hello; "
                      f"caps {tr.max_inbound}, {tr.max_pre_auth})")
            transport.abort()
            return
        _nodelay(transport)
        tr.inbound.add(self)
        tr.pre_auth += 1
        transport.write(codec.frame({"k": "challenge", "nonce": self.nonce, "from": self.tr.name}))  # type: ignore[attr-defined]
        self.timer = self.tr.loop.call_later(HELLO_TIMEOUT_S, self._hello_timeout)

    def _hello_timeout(self) -> None:
        self.timer = None
        if self.src is None and self.transport is not None and not self.transport.is_closing():
            self.refused = True
            self.tr.reject("data", self.peer, "timeout", f"no valid hello within {HELLO_TIMEOUT_S:g}s")
            self.transport.abort()

    def _refuse(self, e: Exception) -> None:
        reason = getattr(e, "reason", "too-large" if isinstance(e, FrameTooLarge) else "malformed")
        who = self.peer if self.src is None else f"{self.src}@{self.peer}"
        self.refused = True
        self.tr.reject("data", who, reason, str(e))
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        tr = self.tr
        c = tr.counters
        c.bytes_in += len(data)
        try:
            payloads = self.decoder.feed(data)
            if not payloads:
                return
            decode = codec.decode
            if self.src is None:
                try:
                    hello = decode(payloads[0])
                    src = auth.check_hello(tr.secret, tr.run_id, tr.name, self.nonce, hello)
                except (FrameError, auth.AuthError) as e:
                    self._refuse(e)
                    return
                self.src = src
                tr.pre_auth -= 1
                self.decoder.max_frame = tr.max_frame
                if self.timer is not None:
                    self.timer.cancel()
                    self.timer = None
                payloads = payloads[1:]
                if self.transport is not None:
                    self.transport.write(codec.frame({
                        "k": "hello_ack", "from": tr.name,
                        "mac": auth.ack_mac(tr.secret, tr.name, tr.run_id, src, bytes(hello["nonce"]))}))
            src = self.src
            on_message = tr.on_message
            unpackb = codec.unpackb
            for p in payloads:
                try:  # codec.decode inlined: the hot path of every node
                    msg = unpackb(p)
                except Exception:
                    msg = decode(p)  # raises its FrameError
                if type(msg) is not dict:
                    msg = decode(p)  # a dict subclass passes; anything else raises its FrameError
                c.received += 1
                try:
                    on_message(src, msg)
                except BaseException as e:  # protocol code: ends the node
                    tr.on_fatal(e)
                    return
        except FrameError as e:
            self._refuse(e)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.src is None and not self.refused and self.decoder.pending:
            # sent part of a frame, then closed before a complete hello (a connection that
            # sends nothing at all, e.g. a port probe, is not counted)
            self.tr.reject("data", self.peer, "incomplete",
                           f"closed after {self.decoder.pending} bytes without a complete hello")
        if self in self.tr.inbound:
            self.tr.inbound.discard(self)
            if self.src is None:
                self.tr.pre_auth -= 1


class Transport:
    """Data listener + outbound connections. Callbacks run on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str, run_id: str,
                 peers: dict[str, tuple[str, int]], *,
                 on_message: Callable[[str, dict[str, Any]], None],
                 on_peer_up: Callable[[str], None], on_peer_down: Callable[[str], None],
                 on_drop: Callable[[str, str, int], None], on_fatal: Callable[[BaseException], None],
                 secret: bytes, on_reject: Callable[[str, str, str, str], None] | None = None,
                 max_frame: int = MAX_FRAME, queue_limit: int = QUEUE_LIMIT,
                 max_pre_auth: int = MAX_PRE_AUTH, max_inbound: int | None = None,
                 connections: int = 0) -> None:
        self.loop = loop
        self.name = name
        self.run_id = run_id
        self.secret = secret
        self._on_reject = on_reject
        self.peers = peers
        self.on_message = on_message
        self.on_peer_up = on_peer_up
        self.on_peer_down = on_peer_down
        self._on_drop = on_drop
        self.on_fatal = on_fatal
        self.max_frame = max_frame
        self.queue_limit = queue_limit
        self.counters = Counters()
        self.out: dict[str, Outbound] = {}
        self.held: set[str] = set()  # peers whose connection a fault holds closed
        self.inbound: set[_InProtocol] = set()
        self.pre_auth = 0  # inbound connections waiting for their hello
        self.max_pre_auth = max_pre_auth
        # ``connections``: the lanes this node opens or accepts beyond one per peer (its config's
        # ``connections``): that many more inbound connections are allowed
        self.connections = connections
        self.max_inbound = (len(peers) + MAX_INBOUND_EXTRA if max_inbound is None else max_inbound) + connections
        self.lanes: dict[tuple[str, str], Outbound] = {}
        self.lanes_used = False  # set by the first lane frame made: only then does send look for them
        self.lane_connects = asyncio.Semaphore(LANE_CONNECTS)
        self.server: asyncio.AbstractServer | None = None

    async def listen(self, host: str, port: int) -> None:
        self.server = await self.loop.create_server(lambda: _InProtocol(self), host, port,
                                                    reuse_address=True, backlog=ACCEPT_BATCH)

    def reject(self, channel: str, peer: str, reason: str, detail: str) -> None:
        """A refused or malformed connection (``on_reject`` counts and logs it)."""
        if self._on_reject is not None:
            self._on_reject(channel, peer, reason, detail)
        else:
            print(f"[{self.name}] {channel} connection {peer}: {reason}: {detail}", file=sys.stderr, flush=True)

    def drop(self, peer: str, reason: str, count: int) -> None:
        self._on_drop(peer, reason, count)  # the runtime counts every drop (egress and transport)

    def _new(self, peer: str, lane: str | None = None) -> Outbound | None:
        addr = self.peers.get(peer)
        return None if addr is None else Outbound(self, peer, (addr[0], int(addr[1])), lane)

    def outbound(self, peer: str) -> Outbound | None:
        ob = self.out.get(peer)
        if ob is None:
            ob = self._new(peer)
            if ob is not None:
                self.out[peer] = ob
        return ob

    def connect(self, peer: str) -> None:
        """Open the connection to ``peer`` now (rather than at the first send)."""
        ob = self.outbound(peer)
        if ob is not None:
            ob.start()

    def lane(self, peer: str, lane: str) -> Outbound | None:
        ob = self.lanes.get((peer, lane))
        if ob is None:
            ob = self._new(peer, lane)
            if ob is not None:
                self.lanes[(peer, lane)] = ob
        return ob

    def lane_frame(self, frame: bytes, lane: str) -> LaneFrame:
        """``frame`` marked for lane ``lane`` (what :meth:`send` routes to that lane's connection)."""
        self.lanes_used = True
        f = LaneFrame(frame)
        f.lane = lane
        return f

    def open_lane(self, peer: str, lane: str) -> None:
        self.lanes_used = True
        ob = self.lane(peer, lane)
        if ob is not None:
            ob.start()

    def send(self, peer: str, frames: list[bytes]) -> None:
        if self.lanes_used and any(type(f) is LaneFrame for f in frames):
            main = [f for f in frames if type(f) is not LaneFrame]
            by_lane: dict[str, list[bytes]] = {}
            for f in frames:
                if type(f) is LaneFrame:
                    by_lane.setdefault(f.lane, []).append(f)  # type: ignore[attr-defined]
            for name, fs in by_lane.items():
                lob = self.lane(peer, name)
                if lob is None:
                    self.drop(peer, "unknown-peer", len(fs))
                else:
                    lob.send(fs)
            if not main:
                return
            frames = main
        ob = self.out.get(peer) or self.outbound(peer)
        if ob is None:
            self.drop(peer, "unknown-peer", len(frames))
            return
        ob.send(frames)

    def connected(self) -> list[str]:
        return sorted(p for p, ob in self.out.items() if ob.state == "up")

    def hold_closed(self, peer: str) -> bool:
        """Close the connection to ``peer`` and do not reconnect until :meth:`release`
        (a fault ``{cut: [a, b], close: true}``: both ends see the connection lost at once,
        ``on_peer_down``). True if a live connection was closed."""
        self.held.add(peer)
        for (p, _), lob in self.lanes.items():
            if p == peer and lob.state == "up" and lob.transport is not None:
                lob.transport.abort()
        ob = self.out.get(peer)
        if ob is None or ob.state != "up" or ob.transport is None:
            return False
        ob.transport.abort()  # connection_lost -> Outbound._lost -> on_peer_down
        return True

    def release(self, peer: str) -> None:
        """Let the connection to ``peer`` come back (the reconnect loop picks it up)."""
        self.held.discard(peer)

    def inbound_from(self) -> list[str]:
        return sorted({p.src for p in self.inbound if p.src})

    async def close(self) -> None:
        for ob in (*self.out.values(), *self.lanes.values()):
            ob.close()
        if self.server is not None:
            self.server.close()
        for p in list(self.inbound):
            if p.transport is not None:
                p.transport.close()
        await asyncio.sleep(0)
