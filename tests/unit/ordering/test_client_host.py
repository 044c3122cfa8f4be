"""The client host's ENSsubscribeReturn: ens_settle counted from the broker connection.

OrderingClientHost against a minimal in-memory runtime (config, name, rng, send, log,
call_later, clocks): what it sends and which timers it sets.
"""

from __future__ import annotations

import asyncio
import random

from testbed.nodes.ordering.clients import OrderingClientHost

TM = {"topics": 8, "strategy": "range", "servers": ["t1"]}


class RT:
    def __init__(self) -> None:
        self.name = "g"
        self.rng = random.Random(1)
        self.config = {"clients": {"name": "g", "role": "client", "count": 2, "attach": ["b1", "b2"],
                                   "extra": {"topics_per_client": 2}},
                       "params": {"ens_settle": 0.3}, "placement": {"topic_managers": TM},
                       "directory": {"t1": {"site": "a"}}, "site": "a"}
        self.sent: list[tuple[str, dict]] = []
        self.timers: list[tuple[float, object]] = []

    def send(self, dst, msg):
        self.sent.append((dst, msg))

    def log(self, ev, **f):
        pass

    def call_later(self, d, fn, *a):
        self.timers.append((d, fn))

    def wall_ns(self):
        return 0

    def mono_ns(self):
        return 0


def test_settle_timer_starts_when_the_broker_is_up():
    rt = RT()
    host = OrderingClientHost(rt)
    asyncio.run(host.start())
    subs = [(d, m) for d, m in rt.sent if m["k"] == "sub"]
    assert {d for d, _ in subs} == {"b1", "b2"} and len(subs) == 4  # 2 clients x 2 topics
    advs = [m["id"] for d, m in rt.sent if m["k"] == "adv"]
    assert sorted(advs) == ["g@b1:adv", "g@b2:adv"]
    settle = [d for d, fn in rt.timers if d == 0.3]
    assert settle == []  # neither broker is up: no ENSsubscribeReturn yet
    host.on_peer_up("b1")
    assert [d for d, fn in rt.timers if d == 0.3] == [0.3, 0.3]  # the b1 client's two topics
    host.on_peer_up("b2")
    assert len([d for d, fn in rt.timers if d == 0.3]) == 4
    host.on_peer_up("b2")  # a reconnect schedules nothing twice
    assert len([d for d, fn in rt.timers if d == 0.3]) == 4
