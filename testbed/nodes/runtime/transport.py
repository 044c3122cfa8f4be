"""asyncio TCP transport: one data listener, one outbound connection per destination.

* Outbound: the first frame on a connection is ``{"k": "hello", "from", "run"}``;
  the receiving runtime answers ``{"k": "hello_ack", "from"}`` (the only frame
  ever sent back on a data connection) and only then is the peer up.
  Frames for a destination never reached yet are queued (at most
  ``queue_limit``, beyond that dropped as ``queue-full``) until the first
  connection; after a connection is lost, frames are dropped (``no-connection``)
  until the reconnect succeeds. Reconnects back off from 50 ms, doubling, to 1 s.
* Write batching: frames released in the same loop iteration are joined into
  one ``transport.write`` (a ``call_soon`` flush per connection). TCP_NODELAY.
* Inbound: one :class:`FrameDecoder` per connection (asyncio Protocols, no
  streams); the hello frame names the peer; every later frame goes to
  ``on_message(src, msg)``. Any error on a connection goes down one path,
  ``connection_lost`` (framing errors close the connection and are reported on
  stderr; exceptions raised by ``on_message`` go to ``on_fatal``).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any, Callable

from testbed.nodes.runtime import codec
from testbed.nodes.runtime.framing import MAX_FRAME, FrameDecoder, FrameError

BACKOFF_START_S = 0.05
BACKOFF_CAP_S = 1.0
HELLO_TIMEOUT_S = 5.0
QUEUE_LIMIT = 100_000


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
        self.decoder: FrameDecoder | None = FrameDecoder(4096)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        _nodelay(transport)

    def data_received(self, data: bytes) -> None:
        if self.decoder is None:
            return
        try:
            for p in self.decoder.feed(data):
                if codec.decode(p).get("k") == "hello_ack":
                    self.decoder = None
                    self.peer._acked(self)
                    return
        except FrameError as e:
            print(f"[{self.peer.tr.name}] connection to {self.peer.peer}: {e}; closing",
                  file=sys.stderr, flush=True)
            if self.transport is not None:
                self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.peer._lost(self, exc)


class Outbound:
    """The outbound connection to one destination (state: never / up / lost / closed)."""

    def __init__(self, tr: "Transport", peer: str, addr: tuple[str, int]) -> None:
        self.tr = tr
        self.peer = peer
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
        loop = self.tr.loop
        while self.state != "closed":
            try:
                transport, proto = await loop.create_connection(
                    lambda: _OutProtocol(self), self.addr[0], self.addr[1])
            except OSError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_CAP_S)
                continue
            if self.state == "closed":
                transport.close()
                return
            # Up only once the peer's runtime answers the hello: a connection the
            # kernel accepted for a dying process must not count as a peer_up.
            self.ack = loop.create_future()
            self.proto = proto
            hello = codec.frame({"k": "hello", "from": self.tr.name, "run": self.tr.run_id})
            transport.write(hello)  # type: ignore[attr-defined]
            self.tr.counters.bytes_out += len(hello)
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
                self.tr.on_peer_up(self.peer)
                return
            self.proto = None
            transport.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_CAP_S)

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
        self.decoder = FrameDecoder(tr.max_frame)
        self.src: str | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        _nodelay(transport)
        self.tr.inbound.add(self)

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
                hello = decode(payloads[0])
                if hello.get("k") != "hello" or not isinstance(hello.get("from"), str):
                    raise FrameError(f"first frame is not a hello: {hello!r:.200}")
                if hello.get("run") != tr.run_id:
                    raise FrameError(f"hello from {hello['from']!r} of run {hello.get('run')!r}, "
                                     f"this node is in run {tr.run_id!r}")
                self.src = hello["from"]
                payloads = payloads[1:]
                if self.transport is not None:
                    self.transport.write(codec.frame({"k": "hello_ack", "from": tr.name}))
            src = self.src
            on_message = tr.on_message
            for p in payloads:
                msg = decode(p)
                c.received += 1
                try:
                    on_message(src, msg)
                except BaseException as e:  # protocol code: ends the node
                    tr.on_fatal(e)
                    return
        except FrameError as e:
            print(f"[{tr.name}] data connection from {self.src or 'unknown peer'}: {e}; closing",
                  file=sys.stderr, flush=True)
            if self.transport is not None:
                self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.tr.inbound.discard(self)


class Transport:
    """Data listener + outbound connections. Callbacks run on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str, run_id: str,
                 peers: dict[str, tuple[str, int]], *,
                 on_message: Callable[[str, dict[str, Any]], None],
                 on_peer_up: Callable[[str], None], on_peer_down: Callable[[str], None],
                 on_drop: Callable[[str, str, int], None], on_fatal: Callable[[BaseException], None],
                 max_frame: int = MAX_FRAME, queue_limit: int = QUEUE_LIMIT) -> None:
        self.loop = loop
        self.name = name
        self.run_id = run_id
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
        self.inbound: set[_InProtocol] = set()
        self.server: asyncio.AbstractServer | None = None

    async def listen(self, host: str, port: int) -> None:
        self.server = await self.loop.create_server(lambda: _InProtocol(self), host, port,
                                                    reuse_address=True, backlog=1024)

    def drop(self, peer: str, reason: str, count: int) -> None:
        self._on_drop(peer, reason, count)  # the runtime counts every drop (egress and transport)

    def outbound(self, peer: str) -> Outbound | None:
        ob = self.out.get(peer)
        if ob is None:
            addr = self.peers.get(peer)
            if addr is None:
                return None
            ob = self.out[peer] = Outbound(self, peer, (addr[0], int(addr[1])))
        return ob

    def connect(self, peer: str) -> None:
        """Open the connection to ``peer`` now (rather than at the first send)."""
        ob = self.outbound(peer)
        if ob is not None:
            ob.start()

    def send(self, peer: str, frames: list[bytes]) -> None:
        ob = self.out.get(peer) or self.outbound(peer)
        if ob is None:
            self.drop(peer, "unknown-peer", len(frames))
            return
        ob.send(frames)

    def connected(self) -> list[str]:
        return sorted(p for p, ob in self.out.items() if ob.state == "up")

    def inbound_from(self) -> list[str]:
        return sorted({p.src for p in self.inbound if p.src})

    async def close(self) -> None:
        for ob in self.out.values():
            ob.close()
        if self.server is not None:
            self.server.close()
        for p in list(self.inbound):
            if p.transport is not None:
                p.transport.close()
        await asyncio.sleep(0)
