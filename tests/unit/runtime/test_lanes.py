"""Lanes: a connection of its own per lane name between two real transports on loopback
(Gryphon's dedicated TCP connection per subscriber)."""

from __future__ import annotations

import asyncio
import socket

from testbed.nodes.runtime import codec
from testbed.nodes.runtime.transport import LANE_CONNECTS, Transport

SECRET = b"k" * 32


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]




class Pair:
    """``a`` sends to ``b``; what b receives, the peer ups/downs and refusals are recorded."""

    def __init__(self, loop: asyncio.AbstractEventLoop, b_connections: int) -> None:
        self.port = _port()
        self.got: list[tuple[str, dict]] = []
        self.ups: list[str] = []
        self.downs: list[str] = []
        self.rejects: list[tuple[str, str]] = []
        self.drops: list[tuple[str, str, int]] = []

        def fatal(e: BaseException) -> None:
            raise e

        self.a = Transport(loop, "a", "run", {"b": ("127.0.0.1", self.port)}, on_message=lambda s, m: None,
                           on_peer_up=self.ups.append, on_peer_down=self.downs.append,
                           on_drop=lambda p, r, n: self.drops.append((p, r, n)), on_fatal=fatal, secret=SECRET)
        self.b = Transport(loop, "b", "run", {"a": ("127.0.0.1", _port())},
                           on_message=lambda s, m: self.got.append((s, m)), on_peer_up=lambda p: None,
                           on_peer_down=lambda p: None, on_drop=lambda p, r, n: None, on_fatal=fatal,
                           secret=SECRET, on_reject=lambda ch, p, r, d: self.rejects.append((p, r)),
                           connections=b_connections)

    async def until(self, cond, timeout: float = 10.0) -> None:
        end = asyncio.get_running_loop().time() + timeout
        while not cond():
            assert asyncio.get_running_loop().time() < end, "timed out"
            await asyncio.sleep(0.01)


def run(coro) -> None:
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(coro(loop))
    finally:
        loop.close()


def test_each_lane_is_a_connection_of_its_own_and_not_a_peer_up():
    async def main(loop):
        p = Pair(loop, b_connections=100)
        await p.b.listen("127.0.0.1", p.port)
        p.a.send("b", [codec.frame({"n": -1})])  # the main connection
        for i in range(100):
            for j in range(3):
                p.a.send("b", [p.a.lane_frame(codec.frame({"c": f"c{i}", "n": j}), f"c{i}")])
        await p.until(lambda: len(p.got) == 301)
        # one inbound connection per lane plus the main one, all from a
        assert len(p.b.inbound) == 101 and p.b.inbound_from() == ["a"]
        assert p.ups == ["b"] and p.rejects == [] and p.drops == []
        per = {}
        for _, m in p.got:
            if "c" in m:
                per.setdefault(m["c"], []).append(m["n"])
        assert per == {f"c{i}": [0, 1, 2] for i in range(100)}  # in order within each lane
        assert p.a.connected() == ["b"]  # lanes are not peers
        await p.a.close()
        await p.b.close()
    run(main)


def test_without_the_connections_the_receiver_refuses_lanes_over_its_cap():
    async def main(loop):
        p = Pair(loop, b_connections=0)  # cap: 1 peer + 64
        await p.b.listen("127.0.0.1", p.port)
        for i in range(80):
            p.a.send("b", [p.a.lane_frame(codec.frame({"c": f"c{i}"}), f"c{i}")])
        await p.until(lambda: len(p.rejects) > 0)
        assert all(r == "over-limit" for _, r in p.rejects)
        assert len(p.b.inbound) <= 65
        await p.a.close()
        await p.b.close()
    run(main)


def test_lanes_connect_a_few_at_a_time():
    async def main(loop):
        p = Pair(loop, b_connections=200)
        await p.b.listen("127.0.0.1", p.port)
        most = 0

        def watch():
            nonlocal most
            most = max(most, p.b.pre_auth)
            loop.call_soon(watch)
        loop.call_soon(watch)
        for i in range(200):
            p.a.open_lane("b", f"c{i}")
        await p.until(lambda: sum(ob.state == "up" for ob in p.a.lanes.values()) == 200)
        assert 0 < most <= LANE_CONNECTS and p.rejects == []
        await p.a.close()
        await p.b.close()
    run(main)


def test_a_fault_holding_the_peer_closed_closes_its_lanes_until_release():
    async def main(loop):
        p = Pair(loop, b_connections=10)
        await p.b.listen("127.0.0.1", p.port)
        p.a.send("b", [codec.frame({"n": 0})])
        for i in range(10):
            p.a.send("b", [p.a.lane_frame(codec.frame({"c": i}), f"c{i}")])
        await p.until(lambda: len(p.got) == 11)
        assert p.a.hold_closed("b")
        await p.until(lambda: len(p.b.inbound) == 0)
        assert p.downs == ["b"]  # one peer_down (the main connection), none per lane
        await asyncio.sleep(0.3)
        assert len(p.b.inbound) == 0 and all(ob.state == "lost" for ob in p.a.lanes.values())
        p.a.release("b")
        await p.until(lambda: all(ob.state == "up" for ob in p.a.lanes.values()) and len(p.b.inbound) == 11)
        p.a.send("b", [p.a.lane_frame(codec.frame({"c": "again"}), "c3")])
        await p.until(lambda: p.got[-1][1] == {"c": "again"})
        await p.a.close()
        await p.b.close()
    run(main)


def test_a_node_config_names_its_connections_and_the_loop_follows(tmp_path):
    import json
    import resource

    import pytest

    from testbed.nodes.runtime import node_main

    base = {"run_id": "r", "node": "n", "kind": "node", "role": "broker", "protocol": "echo",
            "listen": ["127.0.0.1", 1], "control": ["127.0.0.1", 2], "peers": {}, "log_path": "x",
            "secret": "ab" * 32}
    for bad in (-1, "3", True, 1.5):
        p = tmp_path / "c.json"
        p.write_text(json.dumps({**base, "connections": bad}))
        with pytest.raises(node_main.ConfigError, match="connections: expected an integer >= 0"):
            node_main.load_config(str(p))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        want = min(hard, 3000) if hard != resource.RLIM_INFINITY else 3000
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        loop, _ = node_main.make_loop(3, connections=1000)  # epoll, and room for them
        assert not isinstance(loop._selector, __import__("selectors").SelectSelector)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= min(want, 2 * 1003 + 256)
        loop.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
