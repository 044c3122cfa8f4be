"""A stranger's raw connections and a fuzzer, for the authentication tests (local and Docker)."""

from __future__ import annotations

import random
import socket
import struct

from testbed.nodes.runtime import codec


# -- a stranger's (or a test's) raw connections ------------------------------------------------
def connect(addr, timeout: float = 5.0) -> tuple[socket.socket, dict]:
    """A raw connection and the node's first frame (its challenge)."""
    s = socket.create_connection((addr[0], int(addr[1])), timeout=timeout)
    return s, codec.decode(recv_frame(s))


def recv_frame(s: socket.socket) -> bytes:
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf[4:4 + struct.unpack(">I", buf[:4])[0]]


def closed_by_peer(s: socket.socket, timeout: float = 5.0) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def fuzz_frames(rng: random.Random, run_id: str, node: str, n: int) -> list[bytes]:
    """``n`` frames a stranger might send: random bytes, oversized or bogus length prefixes,
    malformed msgpack, non-map msgpack, wrong hellos, unauthenticated and mis-sealed requests."""
    out = []
    for i in range(n):
        kind = i % 10
        if kind == 0:
            out.append(rng.randbytes(rng.randint(1, 300)))
        elif kind == 1:
            out.append(struct.pack(">I", rng.choice([2 ** 32 - 1, 16 * 1024 * 1024 + 1, 10 ** 9]))
                       + rng.randbytes(16))
        elif kind == 2:
            out.append(codec.HEADER.pack(5) + b"\xc1\xc1\xc1\xc1\xc1")  # 0xc1: never valid msgpack
        elif kind == 3:
            out.append(codec.HEADER.pack(3) + b"\x93\x01\x02")  # a msgpack array, not a map
        elif kind == 4:
            out.append(codec.frame({"k": "hello", "from": "b1", "run": run_id}))  # no MAC
        elif kind == 5:
            out.append(codec.frame({"k": "hello", "from": node, "run": run_id, "nonce": rng.randbytes(16),
                                    "mac": rng.randbytes(32)}))
        elif kind == 6:
            out.append(codec.frame({"k": "hello", "from": "b1", "run": "another-run", "nonce": rng.randbytes(16),
                                    "mac": rng.randbytes(32)}))
        elif kind == 7:
            out.append(codec.frame({"op": rng.choice(["stall", "shutdown", "cut", "partition", "set_links"]),
                                    "peers": ["b1"], "id": "x", "links": {"b1": {"up": False}}}))
        elif kind == 8:
            out.append(codec.frame({"seq": rng.randint(0, 5), "body": codec.encode({"op": "stall"}),
                                    "mac": rng.randbytes(32)}))
        else:
            out.append(codec.HEADER.pack(20) + rng.randbytes(7))  # truncated: the sender hangs up
    return out


def fuzz(addrs: list[tuple[str, int]], frames: list[bytes]) -> int:
    """Send each frame on its own connection (a refused connection is closed); returns frames sent."""
    sent = 0
    for i, f in enumerate(frames):
        addr = addrs[i % len(addrs)]
        try:
            with socket.create_connection(addr, timeout=2.0) as s:
                s.sendall(f)
                s.settimeout(0.05)
                try:
                    s.recv(4096)
                except (socket.timeout, OSError):
                    pass
            sent += 1
        except OSError:
            pass
    return sent
