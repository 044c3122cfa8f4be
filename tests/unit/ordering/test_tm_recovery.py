"""TM server recovery (params.tm_recovery): replay of the stable log, the reliable channel.

The TMServer node runs against a minimal in-memory runtime (what Node uses: config, name,
send, log, call_later, mono_ns); its log is a real file in a temporary state_dir.
"""

from __future__ import annotations

import asyncio

from testbed.protocols.ordering.nodes.core import CREATE_PUB_TS, EVENT_TS, FILL_IN_PUB_TS, FILL_IN_SUB_TS
from testbed.protocols.ordering.nodes.tm_server import ACK, CHAN, TMServer

TM = {"topics": 6, "strategy": "explicit", "servers": ["s1", "s2"],
      "assign": {"s1": [0, 1, 2], "s2": [3, 4, 5]}}


class RT:
    def __init__(self, name: str, state_dir: str, recovery: bool = True) -> None:
        self.name = name
        self.config = {"params": {"tm_recovery": recovery}, "placement": {"topic_managers": TM},
                       "state_dir": state_dir}
        self.sent: list[tuple[str, dict]] = []
        self.logged: list[tuple[str, dict]] = []
        self.t = 0.0

    def send(self, dst, msg):
        self.sent.append((dst, msg))

    def log(self, ev, **f):
        self.logged.append((ev, f))

    def call_later(self, d, fn, *a):
        return None

    def mono_ns(self):
        return int(self.t * 1e9)


def server(name, tmp_path, recovery=True):
    rt = RT(name, str(tmp_path / name), recovery)
    (tmp_path / name).mkdir(exist_ok=True)
    node = TMServer(rt)
    asyncio.run(node.start())
    return node, rt


def subscribe(node, cid, topics):
    ts = []
    for t in sorted(topics):
        ts += [t, 0]
    node.on_message(f"h-{cid}", {"k": FILL_IN_SUB_TS, "ts": ts, "sub": sorted(topics), "cid": cid,
                                 "host": f"h-{cid}", "rid": f"{cid}/s", "to": max(topics)})


def test_restart_replays_state_and_answers_retries_the_same(tmp_path):
    s1, rt = server("s1", tmp_path)
    for cid in ("a", "b"):
        subscribe(s1, cid, [0, 1, 2])
    for i in range(5):
        s1.on_message("h-p", {"k": CREATE_PUB_TS, "eid": f"p:{i}", "cid": "p", "host": "h-p",
                              "T": 2, "to": 2})
    answers = [m for d, m in rt.sent if m["k"] == EVENT_TS]
    assert answers[-1]["ts"] == [0, 2, 1, 2, 2, 7]  # two subscriptions, then five events on 2
    lc = {t: tm.lc for t, tm in s1.host.tms.items()}
    # crash: the object is gone; a new process on the same state_dir
    s1b, rt2 = server("s1", tmp_path)
    assert {t: tm.lc for t, tm in s1b.host.tms.items()} == lc
    assert rt2.logged and rt2.logged[0][0] == "o_tm_recovered"
    assert rt2.sent == []  # nothing to re-send: everything went to clients
    s1b.on_message("h-p", {"k": CREATE_PUB_TS, "eid": "p:4", "cid": "p", "host": "h-p", "T": 2, "to": 2})
    assert rt2.sent[-1][1]["ts"] == answers[-1]["ts"]  # a retried request: the logged answer
    s1b.on_message("h-p", {"k": CREATE_PUB_TS, "eid": "p:5", "cid": "p", "host": "h-p", "T": 2, "to": 2})
    assert rt2.sent[-1][1]["ts"][-1] == 8  # a new one: the next number, not 1


def test_without_recovery_a_restart_starts_from_zero(tmp_path):
    s1, rt = server("s1", tmp_path, recovery=False)
    s1.on_message("h-p", {"k": CREATE_PUB_TS, "eid": "p:0", "cid": "p", "host": "h-p", "T": 2, "to": 2})
    s1b, rt2 = server("s1", tmp_path, recovery=False)
    s1b.on_message("h-p", {"k": CREATE_PUB_TS, "eid": "p:1", "cid": "p", "host": "h-p", "T": 2, "to": 2})
    assert rt.sent[-1][1]["ts"] == rt2.sent[-1][1]["ts"] == [2, 1]  # the number is used twice


def test_chain_messages_are_sequenced_acknowledged_and_resent(tmp_path):
    s2, rt = server("s2", tmp_path)
    for cid in ("a", "b"):
        subscribe(s2, cid, [1, 4])  # topic 4 (s2) -> topic 1 (s1): chains cross to s1
    rt.sent.clear()
    for i in range(3):
        s2.on_message("h-p", {"k": CREATE_PUB_TS, "eid": f"p:{i}", "cid": "p", "host": "h-p",
                              "T": 4, "to": 4})
    chans = [m for d, m in rt.sent if d == "s1"]
    assert [m["k"] for m in chans] == [CHAN] * 3 and [m["q"] for m in chans] == [3, 4, 5]
    assert all(m["m"]["k"] == FILL_IN_PUB_TS for m in chans)
    s2.on_message("s1", {"k": ACK, "q": 4})
    assert sorted(s2._out["s1"]) == [5]
    rt.sent.clear()
    s2.on_peer_up("s1")  # s1 came back: what it has not acknowledged goes again, in order
    assert [m["q"] for d, m in rt.sent if m["k"] == CHAN] == [5]
    # the receiver: in order only, duplicates dropped, gaps wait for the re-send
    s1, rt1 = server("s1", tmp_path)
    fill = chans[0]["m"]
    s1.on_message("s2", {"k": CHAN, "q": 2, "m": fill})  # gap (1 missing): ignored
    assert s1.host.c["filled"] == 0
    s1.on_message("s2", {"k": CHAN, "q": 1, "m": fill})
    s1.on_message("s2", {"k": CHAN, "q": 1, "m": fill})  # duplicate
    assert s1.host.c["filled"] == 1 and s1._recv["s2"] == 1
    # and after its own restart it knows where it was
    s1b, _ = server("s1", tmp_path)
    assert s1b._recv["s2"] == 1 and s1b.host.c["filled"] == 1
