"""The per-message service queue (testbed/nodes/runtime/service.py) on a fake clock, and the
``service`` key from a topology file to a node's config."""

from __future__ import annotations

import random
import statistics

import pytest

from testbed.nodes.runtime import service
from testbed.nodes.runtime.service import ServiceQueue


class Clock:
    """A fake event loop: call_at timers fired in time order by run()."""

    def __init__(self) -> None:
        self.t = 0.0
        self.timers: list[tuple[float, int, object]] = []
        self.n = 0

    def call_at(self, when, fn):
        self.n += 1
        self.timers.append((when, self.n, fn))

    def run_until(self, t: float) -> None:
        while True:
            due = sorted(x for x in self.timers if x[0] <= t)
            if not due:
                break
            when, n, fn = due[0]
            self.timers.remove(due[0])
            self.t = when
            fn()
        self.t = t


def _queue(mean_s=0.01, dist="constant", seed=1):
    clock, got = Clock(), []
    q = ServiceQueue(mean_s, dist, random.Random(seed), lambda: clock.t, clock.call_at,
                     lambda src, msg: got.append((clock.t, src, msg["i"])))
    return clock, q, got


def test_messages_are_served_one_at_a_time_in_arrival_order():
    clock, q, got = _queue(0.01, "constant")
    for i in range(5):  # a burst of 5 at t=0: done at 10, 20, ... 50 ms
        q.arrive("a" if i % 2 else "b", {"i": i})
    clock.run_until(0.025)
    assert [x[2] for x in got] == [0, 1]
    clock.run_until(1.0)
    assert [x[2] for x in got] == [0, 1, 2, 3, 4]
    assert [round(x[0], 6) for x in got] == [0.01, 0.02, 0.03, 0.04, 0.05]
    # an idle server serves a later message after one service time, not after the backlog's end
    clock.t = 2.0
    q.arrive("a", {"i": 5})
    clock.run_until(3.0)
    assert round(got[-1][0], 6) == 2.01


def test_sample_reports_queue_busy_fraction_and_wait():
    clock, q, got = _queue(0.1, "constant")
    for i in range(4):
        q.arrive("a", {"i": i})
    clock.run_until(0.25)  # two served, two waiting
    s = q.sample(0.25)
    assert s["queued"] == 2 and s["max_queued"] == 4 and s["served"] == 2
    assert s["busy"] == 1.0  # 0.4 s of service drawn in a 0.25 s interval: capped
    # waits: 0, 0.1, 0.2, 0.3 over the 2 served so far
    assert s["wait_ms"] == pytest.approx(300.0)
    clock.run_until(1.0)
    s = q.sample(0.75)
    assert s["queued"] == 0 and s["served"] == 2 and s["busy"] == 0.0 and s["max_queued"] == 2


def test_exponential_service_has_the_mean_and_the_spread_of_an_exponential():
    q = _queue(0.02, "exponential", seed=7)[1]
    draws = [q.draw() for _ in range(20000)]
    assert statistics.mean(draws) == pytest.approx(0.02, rel=0.03)
    assert statistics.pstdev(draws) == pytest.approx(0.02, rel=0.05)  # an exponential's sd = its mean
    c = _queue(0.02, "constant")[1]
    assert {c.draw() for _ in range(10)} == {0.02}


@pytest.mark.parametrize("bad, why", [
    ({"mean_s": 0}, "mean_s"), ({"mean_s": -1}, "mean_s"), ({"mean_s": True}, "mean_s"),
    ({"mean_s": 0.01, "distribution": "pareto"}, "distribution"), ({"mean": 0.01}, "expected"), (5, "expected"),
])
def test_a_bad_service_config_is_named(bad, why):
    assert why in service.check(bad)
    assert service.check(None) is None and service.check({"mean_s": 0.005}) is None


def test_the_topology_key_reaches_the_plan_and_the_node_config(tmp_path):
    from testbed.errors import TopologyError
    from testbed.render.node_config import render_node_config
    from testbed.topology.loader import plans

    def load_plan(f):
        return plans(f)[0]

    def topo(service_line: str) -> str:
        return ("version: 1\nname: svc\nprotocol: pubsub\nduration: 5s\nsites: {s: {}}\nnodes:\n"
                f"  b1: {{role: broker, site: s{service_line}}}\n  b2: {{role: broker, site: s, neighbors: [b1]}}\n"
                "clients:\n  p: {role: publisher, attach: b1, rate: 10/s}\n"
                "  c: {role: subscriber, attach: b2, filter: \"[class,eq,'S']\"}\n")

    f = tmp_path / "t.yaml"
    f.write_text(topo(", service: 8ms"))
    plan = load_plan(f)
    assert plan.nodes["b1"].service == {"mean_s": 0.008, "distribution": "exponential"}
    assert plan.nodes["b2"].service is None
    assert "service" not in plan.to_dict()["nodes"]["b2"]  # plans without it are unchanged
    assert type(plan).from_dict(plan.to_dict()).nodes["b1"].service == plan.nodes["b1"].service
    cfg = render_node_config(plan, "r", "b1", listen=("127.0.0.1", 1), control=("127.0.0.1", 2), peers={},
                             emulation="userspace", log_path="x", state_dir="y", secret=b"k" * 32)
    assert cfg["service"] == {"mean_s": 0.008, "distribution": "exponential"}
    f.write_text(topo(", service: {mean: 2ms, distribution: constant}"))
    assert load_plan(f).nodes["b1"].service == {"mean_s": 0.002, "distribution": "constant"}
    for bad, where in ((", service: 0ms", "nodes.b1.service"), (", service: {mean: 2ms, distribution: normal}",
                                                               "nodes.b1.service.distribution")):
        f.write_text(topo(bad))
        with pytest.raises(TopologyError) as e:
            load_plan(f)
        assert len(e.value.problems) == 1 and where in str(e.value)
        assert f"{f}:7:" in str(e.value)  # the file and the line of the node (b1)
