"""The event log: buffering, flush, append on reopen, registry checks."""

import asyncio
import json

import pytest

from testbed.nodes.runtime.eventlog import EventLog, UnknownEvent


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(x) for x in f.read().splitlines()]


def test_buffered_until_flush_then_common_fields(tmp_path):
    p = tmp_path / "logs" / "n1.jsonl"
    log = EventLog(str(p), "n1", flush_ms=100)
    assert not log.existed
    log.log("peer_up", {"peer": "b2"})
    log.log("drop", {"peer": "b2", "reason": "loss", "count": 3})
    assert p.read_text() == ""  # nothing written before a flush
    log.flush()
    got = lines(p)
    assert [e["ev"] for e in got] == ["peer_up", "drop"]
    e = got[1]
    assert e["node"] == "n1" and e["count"] == 3 and e["reason"] == "loss"
    assert isinstance(e["t"], int) and e["t"] > 1_600_000_000 * 10**9
    assert isinstance(e["m"], int) and got[0]["m"] <= e["m"]
    log.close()


def test_reopen_appends_and_reports_existed(tmp_path):
    p = str(tmp_path / "n.jsonl")
    a = EventLog(p, "n")
    a.log("node_start", {"pid": 1, "restarted": False, "role": "r", "kind": "node", "emulation": "userspace"})
    a.close()
    b = EventLog(p, "n")
    assert b.existed
    b.log("node_stop", {"reason": "shutdown"})
    b.close()
    assert [e["ev"] for e in lines(p)] == ["node_start", "node_stop"]


def test_undeclared_event_or_field_is_refused(tmp_path):
    log = EventLog(str(tmp_path / "n.jsonl"), "n")
    with pytest.raises(UnknownEvent, match="'no_such_event' is not declared"):
        log.log("no_such_event", {})
    with pytest.raises(UnknownEvent, match="undeclared field.*bogus"):
        log.log("peer_up", {"peer": "x", "bogus": 1})
    log.close()


def test_json_fields_and_non_json_values(tmp_path):
    p = str(tmp_path / "n.jsonl")
    log = EventLog(p, "n")
    log.log("link_set", {"peer": "b", "spec": {"delay_ms": 1.5, "rate_bps": None}})
    log.log("peer_up", {"peer": b"raw"})  # not JSON: written as its str(), never crashes the node
    log.close()
    got = lines(p)
    assert got[0]["spec"] == {"delay_ms": 1.5, "rate_bps": None}
    assert got[1]["peer"] == "b'raw'"


def test_periodic_flush_on_the_loop_and_flush_on_close(tmp_path):
    p = tmp_path / "n.jsonl"

    async def main():
        log = EventLog(str(p), "n", flush_ms=10)
        log.start(asyncio.get_running_loop())
        log.log("peer_up", {"peer": "a"})
        await asyncio.sleep(0.05)
        flushed = len(lines(p))
        log.log("peer_up", {"peer": "b"})
        log.close()
        return flushed

    assert asyncio.run(main()) == 1
    assert [e["peer"] for e in lines(p)] == ["a", "b"]


def test_flush_interval_is_capped_at_100ms(tmp_path):
    log = EventLog(str(tmp_path / "n.jsonl"), "n", flush_ms=5000)
    assert log.flush_ms == 100
    log.close()


def test_line_encoder_writes_what_json_dumps_writes():
    """The hot path's encoder (the C encoder made once) against the plain JSONEncoder."""
    from testbed.nodes.runtime.eventlog import _dumps, _encode_line
    recs = [
        {"t": 1795762137635041377, "m": 13146620758143, "node": "subs", "ev": "deliver", "client": "subs-0",
         "pub_id": "pubs-0:1", "publisher": "pubs-0", "seq": 1, "pub_t": 17957621376350, "hops": 1},
        {"ev": "publish", "attrs": {"class": "STOCK", "price": 12.345678901234567, "sym": "IBM"}, "size": 16},
        {"f": [float("nan"), float("inf"), -float("inf"), -0.0, 1e300, 2**70, -(2**63)], "b": [True, False, None]},
        {"u": "é ü \u2028 \x00 \"quoted\" \\ back\nslash", "nested": {"a": [1, {"b": (2, 3)}]}, "e": {}, "l": []},
        {"raw": b"bytes", "set": {1}, "obj": object.__new__(type("X", (), {"__str__": lambda s: "X!"}))},
    ]
    for rec in recs:
        assert _encode_line(rec) == _dumps(rec)
