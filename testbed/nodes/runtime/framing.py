"""Length-prefixed framing, bytes only: ``4-byte big-endian length`` + payload.

:class:`FrameDecoder` is incremental (the nats.py parser/transport split): feed
it whatever a socket read returned -- half a header, many frames, a frame split
across reads -- and it returns the complete payloads in order, keeping the rest
for the next read. Tested with byte strings alone.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct(">I")
HEADER_SIZE = 4
MAX_FRAME = 16 * 1024 * 1024  # 16 MiB


class FrameError(ValueError):
    """The byte stream is not valid framing (the connection must be closed)."""


class FrameTooLarge(FrameError):
    """A frame longer than the configured maximum."""


def pack(payload: bytes, max_frame: int = MAX_FRAME) -> bytes:
    """``payload`` with its length prefix."""
    n = len(payload)
    if n > max_frame:
        raise FrameTooLarge(f"frame of {n} bytes exceeds the maximum frame size of {max_frame} bytes")
    return HEADER.pack(n) + payload


class FrameDecoder:
    """Incremental decoder. ``feed(data)`` -> list of complete payloads (bytes)."""

    __slots__ = ("_buf", "max_frame")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self.max_frame = max_frame

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        buf = self._buf
        if buf:
            buf += data
            src = bytes(buf)  # one copy; the payloads are slices of it (one copy each)
        else:  # nothing held back (the common case): slice what the socket gave
            src = data if type(data) is bytes else bytes(data)
        out: list[bytes] = []
        pos = 0
        end = len(src)
        unpack_from = HEADER.unpack_from
        max_frame = self.max_frame
        while end - pos >= HEADER_SIZE:
            (n,) = unpack_from(src, pos)
            if n > max_frame:
                # Keep everything fed: the stream cannot be resynchronised.
                if not buf:
                    buf += src
                raise FrameTooLarge(
                    f"incoming frame of {n} bytes exceeds the maximum frame size of {max_frame} bytes")
            stop = pos + HEADER_SIZE + n
            if stop > end:
                break
            out.append(src[pos + HEADER_SIZE:stop])
            pos = stop
        if pos == end:
            if buf:
                buf.clear()
        elif buf:
            if pos:
                del buf[:pos]
        else:
            buf += src[pos:] if pos else src
        return out

    @property
    def pending(self) -> int:
        """Bytes held for a frame not complete yet."""
        return len(self._buf)
