"""The schedule runner fires actions on different nodes concurrently and keeps each node's
actions in order (a real ScheduleRunner and run directory; a provider whose calls take time)."""

from __future__ import annotations

import threading
import time

from testbed.faults.schedule import ScheduleRunner, nodes_of
from testbed.providers.base import Provider
from testbed.runs.deployment import Deployment
from testbed.runs.rundir import RunDir
from testbed.topology.plan import Action, LinkSpec


class SlowProvider(Provider):
    """Process faults that take ``slow`` seconds on some nodes (as ``docker kill`` does)."""

    name = "slow"

    def __init__(self, slow: dict[str, float]):
        self.slow = slow
        self.calls: list[tuple[str, str, float, float]] = []  # (op, node, start, end) on the monotonic clock
        self.lock = threading.Lock()

    def up(self, plan, run, progress):  # pragma: no cover - not used here
        raise NotImplementedError

    def down(self, run, progress):  # pragma: no cover
        pass

    def status(self, run):  # pragma: no cover
        return []

    def collect(self, run, progress):  # pragma: no cover
        pass

    @classmethod
    def wipe(cls, progress):  # pragma: no cover
        return []

    def process_action(self, run, action):
        start = time.monotonic()
        time.sleep(self.slow.get(action.target[0], 0.0))
        with self.lock:
            self.calls.append((action.op, action.target[0], start, time.monotonic()))


def _runner(tmp_path, provider):
    run = RunDir.create(tmp_path, "run-1")
    r = ScheduleRunner(run, provider, Deployment("run-1", "slow", "userspace", {}, {}), controls=None)
    r.t0_mono = time.monotonic()
    return r


def test_nodes_of_every_kind_of_action():
    assert nodes_of(Action(at_s=0, op="crash", fault=0, target=("b1",))) == {"b1"}
    assert nodes_of(Action(at_s=0, op="cut", fault=0, target=("b1", "b2"))) == {"b1", "b2"}
    assert nodes_of(Action(at_s=0, op="partition", fault=0, groups=(("a", "b"), ("c",)))) == {"a", "b", "c"}
    spec = LinkSpec(delay_ms=10.0)
    assert nodes_of(Action(at_s=0, op="set_link", fault=0, links={"a->b": spec, "c->a": spec})) == {"a", "b", "c"}


def test_a_slow_fault_on_one_node_does_not_hold_back_another_nodes(tmp_path):
    p = SlowProvider({"a": 0.5})
    r = _runner(tmp_path, p)
    acts = [Action(at_s=0.05, op="crash", fault=0, target=("a",)),
            Action(at_s=0.10, op="pause", fault=1, target=("b",)),
            Action(at_s=0.15, op="resume", fault=1, target=("b",))]
    tl = r.run_actions(acts)
    assert [e["status"] for e in tl] == ["done"] * 3
    crash, pause, resume = tl
    # b's pause and resume were issued while a's crash was still going on
    assert pause["actual_s"] < crash["done_s"] and resume["actual_s"] < crash["done_s"]
    assert r.run.manifest["timeline"] == tl  # every entry saved, in plan order


def test_actions_on_one_node_keep_their_order(tmp_path):
    p = SlowProvider({"a": 0.3})
    r = _runner(tmp_path, p)
    acts = [Action(at_s=0.05, op="pause", fault=0, target=("a",)),
            Action(at_s=0.10, op="resume", fault=0, target=("a",)),  # planned while the pause is running
            Action(at_s=0.12, op="crash", fault=1, target=("a",))]
    tl = r.run_actions(acts)
    assert [c[0] for c in p.calls] == ["pause", "resume", "crash"]
    assert tl[1]["actual_s"] >= tl[0]["done_s"] and tl[2]["actual_s"] >= tl[1]["done_s"]
    # a call never overlaps the previous one on the same node
    assert all(p.calls[i][2] >= p.calls[i - 1][3] for i in range(1, len(p.calls)))


def test_stop_schedules_ends_a_runs_wait_for_its_planned_end(tmp_path):
    """An interrupted reproduction stops its runs' nodes (``down``), then ``api.stop_schedules``: a
    run's thread waiting for its planned end (an hour here; Fig 11's mobility runs are 600 s) returns
    then, instead of sleeping the rest of the run's duration before its teardown."""
    from testbed import api

    r = _runner(tmp_path, SlowProvider({}))
    api._SCHEDULES.add(r)
    out: list = []
    t = threading.Thread(target=lambda: out.append(r.run_actions([], until_s=3600.0)), daemon=True)
    t.start()
    time.sleep(0.3)
    assert t.is_alive()  # waiting for the planned end
    assert api.stop_schedules() >= 1
    t.join(timeout=30)
    assert not t.is_alive() and out == [[]]


class GoneProvider(SlowProvider):
    """Every node in ``gone`` has no process (its last words: the reason)."""

    def __init__(self, gone: dict[str, str]):
        super().__init__({})
        self.gone = gone
        self.oom: set[str] = set()

    def dead_reason(self, run, node):
        return self.gone.get(node)

    def killed_by_limit(self, run, node):
        return node in self.oom


def test_exited_names_the_nodes_gone_outside_the_schedule_not_the_ones_it_crashed(tmp_path):
    run = RunDir.create(tmp_path, "run-1")
    dep = Deployment("run-1", "slow", "userspace", {n: None for n in ("a", "b", "c")}, {})
    p = GoneProvider({"a": "Traceback: boom", "b": "no output (see the stderr file)"})
    r = ScheduleRunner(run, p, dep, controls=None)
    r.t0_mono = time.monotonic()
    assert r.exited() == {"a": "Traceback: boom", "b": "no output (see the stderr file)"}
    r.run_actions([Action(at_s=0.0, op="crash", fault=0, target=("b",))])  # b: the schedule's crash
    assert r.exited() == {"a": "Traceback: boom"}
    p.oom.add("a")  # ended by the plan's memory limit: recorded as a crash at down, not "exited"
    assert r.exited() == {}
    p.gone.clear()
    assert r.exited() == {}
