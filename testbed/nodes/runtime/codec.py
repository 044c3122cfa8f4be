"""The wire codec: one msgpack map per frame (every message type).

Frames are ``4-byte big-endian length`` + ``msgpack map``; the length-prefix
part lives in :mod:`framing` and deals in bytes only. This module turns a
message dict into a complete frame and a payload back into a dict.
"""

from __future__ import annotations

import functools
from typing import Any

import msgpack

from testbed.nodes.runtime.framing import MAX_FRAME, FrameError, FrameTooLarge, HEADER

__all__ = ["encode", "decode", "frame", "MAX_FRAME", "FrameError", "FrameTooLarge"]

_packer_pack = msgpack.Packer(use_bin_type=True).pack
_unpackb = msgpack.unpackb


#: msgpack's unpackb with the codec's options: any value (:func:`decode` checks for a map)
unpackb = functools.partial(_unpackb, raw=False, strict_map_key=False)


def encode(msg: dict[str, Any]) -> bytes:
    """The msgpack payload of ``msg`` (no length prefix)."""
    return _packer_pack(msg)


def decode(payload: bytes | bytearray | memoryview) -> dict[str, Any]:
    """A payload back into a message dict. Raises FrameError if it is not a msgpack map."""
    try:
        msg = _unpackb(payload, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several types (ExtraData, FormatError, ValueError)
        raise FrameError(f"undecodable frame payload ({len(payload)} bytes): {e}") from None
    if not isinstance(msg, dict):
        raise FrameError(f"frame payload is a {type(msg).__name__}, not a msgpack map")
    return msg


def frame(msg: dict[str, Any], max_frame: int = MAX_FRAME) -> bytes:
    """The complete frame (length prefix + payload) of ``msg``."""
    payload = _packer_pack(msg)
    n = len(payload)
    if n > max_frame:
        raise FrameTooLarge(f"frame of {n} bytes exceeds the maximum frame size of {max_frame} bytes"
                            f" (message kind {msg.get('k')!r})")
    return HEADER.pack(n) + payload
