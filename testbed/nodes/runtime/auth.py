"""The run secret and the handshakes that prove knowledge of it (stdlib only).

Every run has one secret (32 random bytes) made by the controller at ``up``,
kept in ``runs/<id>/secret`` and in each node's config (key ``secret``, hex),
both mode 0600; never on a command line, in a log, the manifest or the report.

Data plane (per connection, nothing per data frame)::

    receiver -> sender   {"k": "challenge", "nonce": 16 bytes, "from": receiver}
    sender   -> receiver {"k": "hello", "from", "run", "nonce": 16 bytes,
                          "mac": HMAC(secret, "data-hello" | from | run | receiver | receiver's nonce)}
    receiver -> sender   {"k": "hello_ack", "from": receiver,
                          "mac": HMAC(secret, "data-ack" | receiver | run | from | sender's nonce)}

The receiver processes no frame before a valid hello; the sender counts the
peer as up only after a valid ack (so a stranger cannot pose as a receiver).

Control channel: the node sends ``{"k": "challenge", "nonce", "node", "run"}``
on accept; the connection key is ``K = HMAC(secret, "control" | run | node |
nonce)``. Every request is ``{"seq": n, "body": msgpack(request), "mac":
HMAC(K, seq as 8 bytes | body)}`` with ``seq`` = 1, 2, 3 ... on the
connection: a frame replayed on the same connection repeats a ``seq``, one
replayed on another connection fails its MAC (another nonce). Refused
requests change nothing; the connection is closed after the reply.

Replies are sealed the same way: ``{"ok", "seq": n, "body": msgpack(reply),
"mac": HMAC(K, "reply" | n as 8 bytes | body)}`` with the ``seq`` of the
request answered, so a reply proves that whoever answers holds the run secret
(a process squatting on a crashed node's port cannot answer for it) and belongs
to this request. The client refuses a reply with a bad MAC or another ``seq``,
and a challenge that names another node than the one it meant to reach. Only a
refusal (``ok: false``, ``refused: ...``) to a request the node could not
authenticate travels unsealed; a client takes it as an error.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import time
from typing import Any, Callable

SECRET_BYTES = 32
NONCE_BYTES = 16
SECRET_KEY = "secret"  # node config key: the run secret as hex

_SEQ = struct.Struct(">Q")


class AuthError(ValueError):
    """A handshake or request that does not prove knowledge of the run secret.

    ``reason`` is a short class (``not-hello``, ``other-run``, ``bad-mac``, ``replay``,
    ``unauthenticated``, ``malformed``) for counting; the message says more."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def new_secret() -> bytes:
    return os.urandom(SECRET_BYTES)


def parse_secret(value: Any) -> bytes:
    """The secret from its config form (hex string of at least 16 bytes)."""
    if not isinstance(value, str):
        raise ValueError("secret: expected a hex string")
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise ValueError("secret: not a hex string") from None
    if len(raw) < 16:
        raise ValueError(f"secret: {len(raw)} bytes, at least 16 are needed")
    return raw


def nonce() -> bytes:
    return os.urandom(NONCE_BYTES)


def _mac(key: bytes, *parts: bytes | str) -> bytes:
    h = hmac.new(key, digestmod=hashlib.sha256)
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(_SEQ.pack(len(b)))  # length-prefixed: no ambiguity between fields
        h.update(b)
    return h.digest()


def _is_nonce(v: Any) -> bool:
    return isinstance(v, (bytes, bytearray)) and len(v) == NONCE_BYTES


# --- data plane -------------------------------------------------------------------------
def hello_mac(secret: bytes, sender: str, run: str, receiver: str, receiver_nonce: bytes) -> bytes:
    return _mac(secret, "data-hello", sender, run, receiver, receiver_nonce)


def ack_mac(secret: bytes, receiver: str, run: str, sender: str, sender_nonce: bytes) -> bytes:
    return _mac(secret, "data-ack", receiver, run, sender, sender_nonce)


def check_hello(secret: bytes, run: str, receiver: str, my_nonce: bytes, hello: Any) -> str:
    """The sender's name from a valid hello; AuthError with the reason otherwise."""
    if not isinstance(hello, dict) or hello.get("k") != "hello":
        raise AuthError("not-hello", "first frame is not a hello")
    frm = hello.get("from")
    if not isinstance(frm, str) or not frm or len(frm) > 256:
        raise AuthError("not-hello", "hello without a sender name")
    if hello.get("run") != run:
        raise AuthError("other-run", f"hello from {frm!r:.80} of another run ({str(hello.get('run'))[:80]!r})")
    mac = hello.get("mac")
    if not isinstance(mac, (bytes, bytearray)):
        raise AuthError("unauthenticated", f"hello from {frm!r:.80} without a MAC")
    if not hmac.compare_digest(bytes(mac), hello_mac(secret, frm, run, receiver, my_nonce)):
        raise AuthError("bad-mac", f"hello from {frm!r:.80}: bad MAC (not this run's secret)")
    if not _is_nonce(hello.get("nonce")):
        raise AuthError("malformed", f"hello from {frm!r:.80} without a nonce")
    return frm


def check_ack(secret: bytes, run: str, sender: str, receiver: str, my_nonce: bytes, ack: Any) -> None:
    if not isinstance(ack, dict) or ack.get("k") != "hello_ack":
        raise AuthError("malformed", "expected a hello_ack")
    mac = ack.get("mac")
    if not isinstance(mac, (bytes, bytearray)) or not hmac.compare_digest(
            bytes(mac), ack_mac(secret, receiver, run, sender, my_nonce)):
        raise AuthError("bad-mac", "hello_ack with a bad MAC (the receiver does not know this run's secret)")


def check_challenge(msg: Any) -> bytes:
    if not isinstance(msg, dict) or msg.get("k") != "challenge" or not _is_nonce(msg.get("nonce")):
        raise AuthError("malformed", "expected a challenge with a nonce")
    return bytes(msg["nonce"])


# --- control channel ----------------------------------------------------------------------
def control_key(secret: bytes, run: str, node: str, challenge_nonce: bytes) -> bytes:
    return _mac(secret, "control", run, node, challenge_nonce)


def request_mac(key: bytes, seq: int, body: bytes) -> bytes:
    return hmac.new(key, _SEQ.pack(seq) + body, hashlib.sha256).digest()


def seal_request(key: bytes, seq: int, body: bytes) -> dict[str, Any]:
    """The envelope of one control request (``body`` is the msgpack of the request map)."""
    return {"seq": seq, "body": body, "mac": request_mac(key, seq, body)}


def reply_mac(key: bytes, seq: int, body: bytes) -> bytes:
    return hmac.new(key, b"reply" + _SEQ.pack(seq) + body, hashlib.sha256).digest()


def seal_reply(key: bytes, seq: int, body: bytes, ok: bool) -> dict[str, Any]:
    """The envelope of the reply to request ``seq`` (``body``: the msgpack of the reply map;
    ``ok`` repeated outside for readers of raw frames, the body's is authoritative)."""
    return {"ok": ok, "seq": seq, "body": body, "mac": reply_mac(key, seq, body)}


def open_reply(key: bytes, seq: int, env: Any) -> bytes:
    """The body of a valid reply to request ``seq``; AuthError otherwise."""
    if not isinstance(env, dict):
        raise AuthError("malformed", "reply is not a map")
    body, mac = env.get("body"), env.get("mac")
    if not isinstance(body, (bytes, bytearray)) or not isinstance(mac, (bytes, bytearray)):
        raise AuthError("unauthenticated", "unauthenticated reply (not from a node holding the run secret)")
    if env.get("seq") != seq:
        raise AuthError("replay", f"reply to request {env.get('seq')!r:.20}, not {seq}")
    if not hmac.compare_digest(bytes(mac), reply_mac(key, seq, bytes(body))):
        raise AuthError("bad-mac", "reply with a bad MAC (not from a node holding the run secret)")
    return bytes(body)


def open_request(key: bytes, last_seq: int, env: Any) -> tuple[int, bytes]:
    """(seq, body) of a valid envelope whose seq follows ``last_seq``; AuthError otherwise."""
    if not isinstance(env, dict):
        raise AuthError("malformed", "request is not a map")
    seq, body, mac = env.get("seq"), env.get("body"), env.get("mac")
    if not isinstance(body, (bytes, bytearray)) or not isinstance(mac, (bytes, bytearray)) \
            or isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < 2 ** 64:
        if isinstance(env.get("op"), str):
            raise AuthError("unauthenticated", f"unauthenticated request (op {env['op']!r:.40})")
        raise AuthError("malformed", "request without seq/body/mac")
    if not hmac.compare_digest(bytes(mac), request_mac(key, seq, bytes(body))):
        raise AuthError("bad-mac", "bad MAC (not this run's secret, or a frame from another connection)")
    if seq <= last_seq:
        raise AuthError("replay", f"replayed request (seq {seq} after {last_seq})")
    return seq, bytes(body)


# --- refused connections: counted always, logged at a limited rate ----------------------------
class RejectLog:
    """Counts refused connections/requests and logs ``conn_rejected`` at most ``per_s`` lines
    per second per (channel, reason); suppressed ones are added to the next line's ``count``
    (or flushed by :meth:`flush`), so the sum of ``count`` over the log is the exact total."""

    def __init__(self, log: Callable[[str, dict[str, Any]], None], per_s: int = 5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self.per_s = per_s
        self._clock = clock
        self.totals: dict[str, int] = {}  # "channel:reason-class" -> count
        self._window: dict[tuple[str, str], tuple[float, int]] = {}
        self._pending: dict[tuple[str, str], tuple[int, str, str]] = {}  # key -> (n, last peer, detail)

    @property
    def total(self) -> int:
        return sum(self.totals.values())

    def reject(self, channel: str, peer: str, reason: str, detail: str = "") -> None:
        key = (channel, reason)
        tk = f"{channel}:{reason}"
        self.totals[tk] = self.totals.get(tk, 0) + 1
        now = self._clock()
        start, n = self._window.get(key, (now, 0))
        if now - start >= 1.0:
            start, n = now, 0
        pend = self._pending.pop(key, None)
        if n < self.per_s:
            self._window[key] = (start, n + 1)
            count = 1 + (pend[0] if pend else 0)
            self._log("conn_rejected", {"channel": channel, "peer": peer, "reason": reason,
                                        "detail": detail[:300], "count": count})
        else:
            self._window[key] = (start, n)
            self._pending[key] = ((pend[0] if pend else 0) + 1, peer, detail)

    def flush(self) -> None:
        """Log what was suppressed (called periodically and at shutdown)."""
        pend, self._pending = self._pending, {}
        for (channel, reason), (n, peer, detail) in pend.items():
            self._log("conn_rejected", {"channel": channel, "peer": peer, "reason": reason,
                                        "detail": detail[:300], "count": n})


def peer_name(transport: Any) -> str:
    try:
        pn = transport.get_extra_info("peername")
    except Exception:  # noqa: BLE001 - a transport already torn down
        pn = None
    if isinstance(pn, tuple) and len(pn) >= 2:
        return f"{pn[0]}:{pn[1]}"
    return str(pn) if pn else "?"
