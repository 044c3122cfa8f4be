"""Framing and codec, with byte strings alone."""

import msgpack
import pytest

from testbed.nodes.runtime import codec
from testbed.nodes.runtime.framing import HEADER, FrameDecoder, FrameError, FrameTooLarge, pack


def frames(*msgs):
    return b"".join(codec.frame(m) for m in msgs)


def decode_all(dec, data):
    return [codec.decode(p) for p in dec.feed(data)]


def test_one_frame_round_trip():
    msg = {"k": "pub", "seq": 7, "attrs": {"class": "STOCK", "price": 1.5}, "blob": b"\x00\xff", "ids": [1, 2]}
    data = codec.frame(msg)
    assert data[:4] == (len(data) - 4).to_bytes(4, "big")
    assert decode_all(FrameDecoder(), data) == [msg]


def test_byte_by_byte_feed_yields_each_frame_once_complete():
    msgs = [{"k": "m", "i": i, "pad": "x" * i} for i in range(20)]
    data = frames(*msgs)
    dec = FrameDecoder()
    out = []
    for i in range(len(data)):
        out += decode_all(dec, data[i:i + 1])
    assert out == msgs
    assert dec.pending == 0


def test_many_frames_in_one_read_and_a_partial_tail():
    msgs = [{"k": "m", "i": i} for i in range(100)]
    data = frames(*msgs)
    tail = codec.frame({"k": "tail"})
    dec = FrameDecoder()
    assert decode_all(dec, data + tail[:6]) == msgs
    assert dec.pending == 6
    assert decode_all(dec, tail[6:]) == [{"k": "tail"}]
    assert dec.pending == 0


@pytest.mark.parametrize("cut", [1, 2, 3, 4, 5, 9])
def test_split_inside_header_and_payload(cut):
    a, b = {"k": "a", "v": list(range(10))}, {"k": "b"}
    data = frames(a, b)
    dec = FrameDecoder()
    first = decode_all(dec, data[:cut])
    assert first == []
    assert decode_all(dec, data[cut:]) == [a, b]


def test_empty_payload_frame():
    dec = FrameDecoder()
    assert dec.feed(pack(b"") + pack(b"xyz")) == [b"", b"xyz"]


def test_incoming_frame_over_the_maximum_is_a_clear_error():
    dec = FrameDecoder(max_frame=1000)
    with pytest.raises(FrameTooLarge, match="1001 bytes exceeds the maximum frame size of 1000"):
        dec.feed((1001).to_bytes(4, "big") + b"x" * 10)


def test_outgoing_frame_over_the_maximum_is_a_clear_error():
    with pytest.raises(FrameTooLarge, match="exceeds the maximum frame size of 100 bytes .*'big'"):
        codec.frame({"k": "big", "pad": b"x" * 200}, max_frame=100)
    with pytest.raises(FrameTooLarge):
        pack(b"x" * 11, max_frame=10)


def test_payload_that_is_not_a_map_or_not_msgpack():
    with pytest.raises(FrameError, match="not a msgpack map"):
        codec.decode(msgpack.packb([1, 2]))
    with pytest.raises(FrameError, match="undecodable"):
        codec.decode(b"\xc1")  # never used in msgpack
    with pytest.raises(FrameError, match="undecodable"):
        codec.decode(msgpack.packb({"k": 1}) + b"\x01")  # trailing data


def test_int_map_keys_survive():
    assert codec.decode(codec.encode({"k": "x", "tbl": {1: "a", 2: "b"}})) == {"k": "x", "tbl": {1: "a", 2: "b"}}


def test_bytearray_and_memoryview_input_give_bytes_payloads():
    fr = codec.frame({"k": "x"})
    for data in (bytearray(fr * 2), memoryview(fr * 2)):
        got = FrameDecoder().feed(data)
        assert len(got) == 2 and all(type(p) is bytes for p in got)


def test_too_large_keeps_everything_fed_pending():
    ok = codec.frame({"k": "x"})
    bad = HEADER.pack(100) + b"z"
    d = FrameDecoder(max_frame=50)
    with pytest.raises(FrameTooLarge):
        d.feed(ok + bad)
    assert d.pending == len(ok) + len(bad)
    d2 = FrameDecoder(max_frame=50)
    assert d2.feed(ok[:3]) == []
    with pytest.raises(FrameTooLarge):
        d2.feed(ok[3:] + bad)
    assert d2.pending == len(ok) + len(bad)
