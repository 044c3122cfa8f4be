"""A small synchronous client of a node's control channel (for the controller and tests).

    c = ControlClient("127.0.0.1", 7001, timeout=5.0)
    c.call("ping")                    # -> {"ok": True, "node": "b1"}
    c.call("cut", peers=["b2"])
    c.close()

``call`` raises ConnectionError (cannot connect / connection closed),
TimeoutError (no reply within ``timeout``) or RuntimeError (the node replied
``ok: false``; the message is its error text). Depends only on the stdlib and
the wire codec (msgpack).
"""

from __future__ import annotations

import socket
import time
from typing import Any

from testbed.nodes.runtime import codec
from testbed.nodes.runtime.framing import FrameDecoder, FrameError


class ControlClient:
    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.host = host
        self.port = int(port)
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._dec = FrameDecoder()
        self._replies: list[bytes] = []

    def _connect(self) -> socket.socket:
        if self._sock is None:
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
        return self._sock

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        """Send one request and wait for its reply (the reply dict, ``ok`` is True)."""
        req = {"op": op}
        req.update(args)
        s = self._connect()
        deadline = time.monotonic() + self.timeout
        try:
            s.sendall(codec.frame(req))
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
            self.close()  # a late reply would be mistaken for the next one's
            raise TimeoutError(f"control {self.host}:{self.port}: no reply to {op!r} within "
                               f"{self.timeout}s") from None
        except FrameError as e:
            self.close()
            raise ConnectionError(f"control {self.host}:{self.port}: {e}") from None
        except ConnectionError:
            self.close()
            raise
        except OSError as e:
            self.close()
            raise ConnectionError(f"control {self.host}:{self.port}: {e.strerror or e}") from None
        rep = codec.decode(self._replies.pop(0))
        if not rep.get("ok"):
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
