"""The client host's ENSsubscribeReturn: ens_settle counted from the broker connection.

OrderingClientHost against a minimal in-memory runtime (config, name, rng, send, log,
call_later, clocks): what it sends and which timers it sets.
"""

from __future__ import annotations

import asyncio
import random

from testbed.protocols.ordering.nodes.clients import OrderingClientHost

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


def _complete_subscriptions(diffuse: bool) -> list[tuple[str, dict]]:
    from testbed.protocols.ordering.nodes.core import COMPLETED_SUB_VC, FILL_IN_SUB_TS

    rt = RT()
    rt.config["params"]["diffuse"] = diffuse
    host = OrderingClientHost(rt)
    asyncio.run(host.start())
    host.on_peer_up("b1")
    host.on_peer_up("b2")
    for _, fn in list(rt.timers):  # every ENSsubscribeReturn
        if getattr(fn, "__name__", "") == "_ens_subscribed":
            fn()
    fills = [m for d, m in rt.sent if m["k"] == FILL_IN_SUB_TS]
    assert len(fills) == 2  # one per client
    for m in fills:  # the TM answers each subscription
        host.on_message("t1", {"k": COMPLETED_SUB_VC, "cid": m["cid"], "rid": m["rid"],
                               "ts": [t for topic in m["sub"] for t in (topic, 1)]})
    assert host.subscribed == 4
    return [(d, m) for d, m in rt.sent if m["k"] == "pub"]


def test_no_subscription_dummies_on_the_ens_when_nothing_is_diffused():
    """diffuse: false (timestamping only, Figs 9-14): no event reaches a subscriber, so the
    subscriptionUpdate dummies order nothing; they are not published (issue #12)."""
    assert len(_complete_subscriptions(diffuse=True)) == 4  # a dummy per subscribed topic
    assert _complete_subscriptions(diffuse=False) == []
