"""A small synchronous client of a node's control channel (for the controller and tests).

    c = ControlClient("127.0.0.1", 7001, timeout=5.0, secret=run_secret, origin="schedule")
    c.call("ping")                    # -> {"ok": True, "node": "b1"}
    c.call("cut", peers=["b2"])
    c.close()

``call`` raises ConnectionError (cannot connect / connection closed),
TimeoutError (no reply within ``timeout``) or RuntimeError (the node replied
``ok: false``; the message is its error text). Depends only on the stdlib and
the wire codec (msgpack).

Each connection starts with the node's challenge nonce; every request is sealed
with the run secret (:mod:`auth`: HMAC over a per-connection sequence number
and the request) and carries ``origin`` (who asks: ``schedule``, ``inject`` or
``housekeeping``), which the node logs with every applied op. Replies must be
sealed with the connection's key and the request's sequence number (a process
squatting on a crashed node's port cannot answer for it: ConnectionError), and
with ``node`` given, a challenge naming another node is refused.
"""

from __future__ import annotations

import socket
import time
from typing import Any, Callable

from testbed.nodes.runtime import auth, codec
from testbed.nodes.runtime.framing import FrameDecoder, FrameError


class ControlClient:
    def __init__(self, host: str, port: int, timeout: float = 5.0, *, secret: bytes,
                 origin: str = "housekeeping", run_id: str | None = None, node: str | None = None,
                 connector: Callable[[float], Any] | None = None) -> None:
        self.host = host
        # connector(timeout) -> a connected socket-like object (recv/sendall/settimeout/close),
        # e.g. an SSH direct-tcpip channel to a control port bound to a remote host's loopback
        # (testbed/providers/tunnel.py); it raises ConnectionError/TimeoutError. None: TCP.
        self.connector = connector
        self.port = int(port)
        self.timeout = timeout
        self.secret = secret
        self.origin = origin
        self.run_id = run_id  # when given, a node of another run is refused
        self.expect_node = node  # when given, a challenge naming another node is refused
        self._sock: socket.socket | None = None
        self._dec = FrameDecoder()
        self._replies: list[bytes] = []
        self._key = b""
        self._seq = 0
        self.node: str | None = None  # as the node's challenge names it

    def _connect(self) -> socket.socket:
        if self._sock is None:
            if self.connector is not None:
                s = self.connector(self.timeout)
            else:
                try:
                    s = socket.create_connection((self.host, self.port), timeout=self.timeout)
                except socket.timeout:
                    raise TimeoutError(f"control {self.host}:{self.port}: connect timed out") from None
                except OSError as e:
                    raise ConnectionError(f"control {self.host}:{self.port}: {e.strerror or e}") from None
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = s
            self._dec = FrameDecoder()
            self._replies = []
            try:
                ch = codec.decode(self._recv_frame(s, time.monotonic() + self.timeout, "challenge"))
                nonce = auth.check_challenge(ch)
                node, run = ch.get("node"), ch.get("run")
                if not isinstance(node, str) or not isinstance(run, str):
                    raise auth.AuthError("malformed", "challenge without node/run")
                if self.run_id is not None and run != self.run_id:
                    raise auth.AuthError("other-run", f"node {node!r} is in run {run!r}, not {self.run_id!r}")
                if self.expect_node is not None and node != self.expect_node:
                    raise auth.AuthError("other-node", f"the challenge names node {node!r:.80}, "
                                                       f"not {self.expect_node!r}")
            except (auth.AuthError, FrameError) as e:
                self.close()
                raise ConnectionError(f"control {self.host}:{self.port}: {e}") from None
            except BaseException:
                self.close()
                raise
            self.node = node
            self._key = auth.control_key(self.secret, run, node, nonce)
            self._seq = 0
        return self._sock

    def _recv_frame(self, s: socket.socket, deadline: float, what: str) -> bytes:
        """The next frame (TimeoutError / ConnectionError as ``call`` raises them)."""
        try:
            while not self._replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout()
                s.settimeout(left)
                data = s.recv(65536)
                if not data:
                    raise ConnectionError(f"control {self.host}:{self.port}: connection closed by the node")
                self._replies.extend(self._dec.feed(data))
        except socket.timeout:
            raise TimeoutError(f"control {self.host}:{self.port}: no {what} within {self.timeout}s") from None
        except OSError as e:
            if isinstance(e, ConnectionError) and not e.errno:
                raise
            raise ConnectionError(f"control {self.host}:{self.port}: {e.strerror or e}") from None
        return self._replies.pop(0)

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        """Send one request and wait for its reply (the reply dict, ``ok`` is True)."""
        req = {"op": op, "origin": self.origin}
        req.update(args)
        s = self._connect()
        deadline = time.monotonic() + self.timeout
        self._seq += 1
        try:
            s.sendall(codec.frame(auth.seal_request(self._key, self._seq, codec.encode(req))))
            payload = self._recv_frame(s, deadline, f"reply to {op!r}")
        except TimeoutError:
            self.close()  # a late reply would be mistaken for the next one's
            raise
        except FrameError as e:
            self.close()
            raise ConnectionError(f"control {self.host}:{self.port}: {e}") from None
        except ConnectionError:
            self.close()
            raise
        except OSError as e:
            self.close()
            raise ConnectionError(f"control {self.host}:{self.port}: {e.strerror or e}") from None
        try:
            env = codec.decode(payload)
            if isinstance(env, dict) and env.get("ok") is False and "body" not in env:
                rep = env  # a refusal of a request the node could not authenticate: an error either way
            else:
                rep = codec.decode(auth.open_reply(self._key, self._seq, env))
                if not isinstance(rep, dict):
                    raise auth.AuthError("malformed", "reply is not a map")
        except (FrameError, auth.AuthError) as e:
            self.close()
            raise ConnectionError(f"control {self.host}:{self.port}: {e}") from None
        if not rep.get("ok"):
            if str(rep.get("error", "")).startswith("refused:"):
                self.close()  # the node closes a refused connection
            raise RuntimeError(str(rep.get("error", "unknown error")))
        return rep

    def try_call(self, op: str, **args: Any) -> dict[str, Any] | None:
        """``call`` that returns None instead of raising ConnectionError/TimeoutError."""
        try:
            return self.call(op, **args)
        except (ConnectionError, TimeoutError):
            return None

    def wait_ready(self, timeout: float = 10.0, interval: float = 0.02) -> dict[str, Any]:
        """Ping until the node answers (it is listening), or raise TimeoutError."""
        end = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < end:
            try:
                return self.call("ping")
            except (ConnectionError, TimeoutError) as e:
                last = e
                time.sleep(interval)
        raise TimeoutError(f"control {self.host}:{self.port}: node not ready after {timeout}s ({last})")

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> "ControlClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
