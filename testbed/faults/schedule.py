"""The fault schedule runner: actions at planned times on the controller's monotonic clock.

``t0`` is the controller's monotonic instant of the workload start; an action
planned at ``at_s`` fires at ``t0 + at_s``. Each fired action's actual time
(from the same clock, taken just before the action's first side effect) and
its outcome are recorded in the run manifest's ``timeline``.

Process actions (crash, restart, pause, resume, throttle, unthrottle) go to the provider; link
actions (stall, cut, partition, set_link and their ends) go to the nodes'
control channels.

Actions on different nodes run concurrently: each fires in its own thread at its
planned time, after every earlier action that touches one of its nodes has finished
(so a node's pause and resume, or a crash and the cut that follows it, keep their
order). A slow engine call on one node (``docker kill`` takes ~0.1-0.3 s) therefore
does not delay another node's fault; one that must wait for its node records the
wait in its actual time. The runner also keeps the current link state (set_link
overrides, cuts, partitions, stalls) so that a restarted node gets it again.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from testbed.errors import ProviderError, TestbedError
from testbed.providers.base import PROCESS_OPS, Provider
from testbed.runs.deployment import Deployment
from testbed.runs.rundir import RunDir
from testbed.topology.plan import Action, LinkSpec, Plan

if TYPE_CHECKING:
    from testbed.providers.control import Controls

OnEvent = Callable[[dict[str, Any]], None]

DRAIN_S = 2.0  # after the workload: time for in-flight messages before logs are collected
RESTART_READY_S = 30.0  # a restarted node must answer (authenticated) within this
FINISH_POLL_S = 0.5  # how often the controller asks the nodes whether their work is done


def all_finished(replies: dict[str, Any]) -> bool | None:
    """The run-end condition, from the nodes' ``status`` replies ({node: reply or error}).

    A node whose work has an end (e.g. a client that makes a fixed number of requests)
    reports ``finished`` (a bool) in its ``node_status``; other nodes do not report it. None: no
    node reports it (the run lasts its planned duration); else True iff every node that reports
    it says True and no status call failed (a node that did not answer may be one of them)."""
    flags = []
    for r in replies.values():
        if not isinstance(r, dict):
            return False
        f = (r.get("node_status") or {}).get("finished")
        if f is not None:
            flags.append(bool(f))
    if not flags:
        return None
    return all(flags)


def drain_s(plan: Plan) -> float:
    """How long past its duration a run whose nodes report when their work is done may wait for
    them (``params.drain``, at least ``DRAIN_S``; a protocol without the key: ``DRAIN_S``)."""
    d = plan.params.get("drain") if isinstance(plan.params, dict) else None
    return max(DRAIN_S, float(d)) if d is not None else DRAIN_S


def settle_s(plan: Plan) -> float:
    """Seconds to wait between bring-up and the workload start (``params.settle``, default 1):
    time for subscriptions and advertisements to propagate."""
    return float(plan.params.get("settle", 1.0)) if isinstance(plan.params, dict) else 1.0


@dataclass
class LinkState:
    """What the controller has done to the links, so it can be re-applied after a restart. Pure."""

    overrides: dict[str, dict[str, LinkSpec]] = field(default_factory=dict)  # src -> dst -> spec
    cuts: set[frozenset[str]] = field(default_factory=set)
    closed: set[frozenset[str]] = field(default_factory=set)  # cuts with close: true
    partitions: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # id -> node -> peers
    stalled: set[str] = field(default_factory=set)

    def apply(self, a: Action) -> None:
        if a.op == "set_link":
            for key, spec in a.links.items():
                src, dst = key.split("->")
                self.overrides.setdefault(src, {})[dst] = spec
        elif a.op == "cut":
            self.cuts.add(frozenset(a.target))
            if a.close:
                self.closed.add(frozenset(a.target))
        elif a.op == "heal":
            self.cuts.discard(frozenset(a.target))
            self.closed.discard(frozenset(a.target))
        elif a.op == "partition":
            self.partitions[partition_id(a)] = partition_peers(a.groups)
        elif a.op == "heal_partition":
            self.partitions.pop(partition_id(a), None)
        elif a.op == "stall":
            self.stalled.add(a.target[0])
        elif a.op == "unstall":
            self.stalled.discard(a.target[0])

    def restore_calls(self, node: str) -> list[tuple[str, dict[str, Any]]]:
        """Control calls that bring a freshly restarted node to the current link state."""
        calls: list[tuple[str, dict[str, Any]]] = []
        if node in self.overrides:
            calls.append(("set_links", {"links": {d: s.to_dict() for d, s in self.overrides[node].items()}}))
        peers = sorted(next(iter(pair - {node})) for pair in self.cuts - self.closed if node in pair)
        if peers:
            calls.append(("cut", {"peers": peers}))
        closed = sorted(next(iter(pair - {node})) for pair in self.closed if node in pair)
        if closed:
            calls.append(("cut", {"peers": closed, "close": True}))
        for pid, per_node in self.partitions.items():
            if node in per_node:
                calls.append(("partition", {"id": pid, "peers": per_node[node]}))
        return calls


def partition_id(a: Action) -> str:
    return f"fault-{a.fault}"


def partition_peers(groups: tuple[tuple[str, ...], ...]) -> dict[str, list[str]]:
    """Every node of a group -> every node of the other groups."""
    out: dict[str, list[str]] = {}
    for i, g in enumerate(groups):
        others = sorted({n for j, h in enumerate(groups) if j != i for n in h})
        for n in g:
            out[n] = others
    return out


def link_calls(a: Action) -> list[tuple[str, str, dict[str, Any]]]:
    """The (node, op, args) control calls that carry out one link action. Pure."""
    if a.op in ("stall", "unstall"):
        return [(a.target[0], a.op, {})]
    if a.op in ("cut", "heal"):
        x, y = a.target
        args: dict[str, Any] = {"close": True} if a.op == "cut" and a.close else {}
        return [(x, a.op, {"peers": [y], **args}), (y, a.op, {"peers": [x], **args})]
    if a.op == "partition":
        return [(n, "partition", {"id": partition_id(a), "peers": peers})
                for n, peers in partition_peers(a.groups).items()]
    if a.op == "heal_partition":
        return [(n, "heal_partition", {"id": partition_id(a)}) for g in a.groups for n in g]
    if a.op == "set_link":
        by_src: dict[str, dict[str, Any]] = {}
        for key, spec in a.links.items():
            src, dst = key.split("->")
            by_src.setdefault(src, {})[dst] = spec.to_dict()
        return [(src, "set_links", {"links": links}) for src, links in sorted(by_src.items())]
    raise ValueError(f"not a link action: {a.op}")


def raise_priority() -> str:
    """Run this (schedule) thread real-time where allowed, so a loaded machine does not delay faults.

    Returns what was obtained ("SCHED_FIFO 10", "nice -10" or "normal"), which goes to the manifest.
    Undo with :func:`restore_priority`.
    """
    import os

    try:
        # RESET_ON_FORK: processes this thread starts (a restarted node) get the normal policy
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(10))
        return "SCHED_FIFO 10"
    except (AttributeError, PermissionError, OSError):
        pass
    try:
        os.nice(-10)
        return "nice -10"
    except (PermissionError, OSError):
        return "normal"


def restore_priority() -> None:
    import os

    try:
        if os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK == os.SCHED_FIFO:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, PermissionError, OSError):
        pass


def nodes_of(a: Action) -> frozenset[str]:
    """Every node an action touches (its targets, partition groups, set_link ends). Pure."""
    out = set(a.target)
    for g in a.groups:
        out.update(g)
    for key in a.links:
        out.update(key.split("->"))
    return frozenset(out)


def timeline_entry(a: Action) -> dict[str, Any]:
    e = {
        "fault": a.fault, "op": a.op, "target": list(a.target), "groups": [list(g) for g in a.groups],
        "planned_s": a.at_s, "actual_s": None, "done_s": None, "status": "pending", "error": None,
        "window": list(a.window), "source": a.source,
    }
    if a.op in ("throttle", "unthrottle"):
        e["cpu"] = a.cpu  # the share from this action on (None: no limit)
    if a.call:  # a protocol's own action (not a fault: the analysis attributes nothing to it)
        e["call"] = a.call.get("op")
        e["accepted_by"] = []
    return e


def call_outcome(a: Action, replies: dict[str, Any]) -> tuple[str, list[str], str | None]:
    """(status, nodes that accepted, error) of a protocol action from its control replies. Pure.

    ``any`` actions (a move sent to every broker) are done when one node accepted, skipped when
    none did (e.g. the client is started nowhere: its broker crashed); the others are done when
    every node accepted, failed otherwise."""
    ok = sorted(n for n, r in replies.items() if isinstance(r, dict))
    errs = {n: str(r) for n, r in replies.items() if not isinstance(r, dict)}
    if a.call.get("any"):
        if ok:
            return "done", ok, None
        reasons = sorted({e.split(": ")[-1] for e in errs.values()})
        return "skipped", [], f"{a.op}: no node accepted it ({'; '.join(reasons)[:300]})"
    if errs:
        n, e = sorted(errs.items())[0]
        return "failed", ok, f"{a.op}: {len(errs)} of {len(replies)} nodes refused; {n}: {e}"
    return "done", ok, None


class _Workers:
    """Threads that run actions: an idle one takes the next action (a queue hand-off, tens of
    microseconds); when none is idle, one more is started. With ``realtime`` each thread asks
    for the dispatcher's real-time policy itself (SCHED_RESET_ON_FORK applies to new threads
    too, so they would not inherit it)."""

    def __init__(self, spare: int = 2, realtime: bool = False):
        self._realtime = realtime
        import queue

        self._q: "queue.SimpleQueue[Callable[[], None] | None]" = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads: list[threading.Thread] = []
        for _ in range(spare):
            self._start(None)

    def _start(self, job: Callable[[], None] | None) -> None:
        th = threading.Thread(target=self._loop, args=(job,), daemon=True, name=f"fault-{len(self._threads)}")
        self._threads.append(th)
        th.start()

    def _loop(self, job: Callable[[], None] | None) -> None:
        if self._realtime:
            raise_priority()
        while True:
            if job is not None:
                try:
                    job()
                except Exception:  # execute() records errors; never lose the worker
                    pass
            with self._lock:
                self._idle += 1
            job = self._q.get()
            if job is None:
                return

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                self._q.put(job)
                return
        self._start(job)

    def close(self) -> None:
        for _ in self._threads:
            self._q.put(None)
        for th in self._threads:
            th.join(timeout=30)


class ScheduleRunner:
    """Executes a plan's actions against a deployment; records planned vs actual times."""

    def __init__(self, run: RunDir, provider: Provider, deployment: Deployment, controls: "Controls",
                 on_event: OnEvent | None = None):
        self.run = run
        self.provider = provider
        self.deployment = deployment
        self.controls = controls
        self._on_event = on_event or (lambda e: None)
        self._event_lock = threading.Lock()
        self.links = LinkState()
        self.down_nodes: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.t0_mono: float | None = None
        self.t0_wall_ns: int | None = None
        self.duration_s = 0.0
        self.finished_s: float | None = None  # when every node reported its work done (end_when_finished)

    # -- workload start ------------------------------------------------------------
    def start_workload(self, duration_s: float, lead_s: float = 0.5) -> None:
        """Tell every node to start the workload ``lead_s`` from now; fixes t0 on both clocks."""
        self.provider.warm_up(self.run)  # e.g. ansible opens its per-host SSH sessions now
        self.duration_s = duration_s
        now_mono, now_wall = time.monotonic(), time.time_ns()
        self.t0_mono = now_mono + lead_s
        self.t0_wall_ns = now_wall + int(lead_s * 1e9)
        offsets = self.run.manifest.get("clock_offsets", {})
        calls = []
        for n, ep in self.deployment.endpoints.items():
            off = int(offsets.get(ep.host, {}).get("offset_ns", 0))
            calls.append((n, "start", {"t0_wall_ns": self.t0_wall_ns + off, "duration_s": duration_s}))
        res = self.controls.call_many(calls)
        errors = {n: r for n, r in res.items() if isinstance(r, Exception)}
        if errors:
            n, e = next(iter(errors.items()))
            raise ProviderError(f"could not start the workload on {len(errors)} node(s): {e}")
        self.run.update_manifest(t0_wall_ns=self.t0_wall_ns, duration_s=duration_s)

    def on_event(self, event: dict[str, Any]) -> None:
        with self._event_lock:  # actions run in threads of their own
            self._on_event(event)

    def now_s(self) -> float:
        assert self.t0_mono is not None
        return time.monotonic() - self.t0_mono

    def stop(self) -> None:
        self._stop.set()

    # -- the schedule ----------------------------------------------------------------
    def run_actions(self, actions: list[Action], until_s: float | None = None,
                    end_when_finished: bool = False) -> list[dict[str, Any]]:
        """Fire every action at its planned time, then wait until ``until_s``. Returns the timeline.

        ``end_when_finished``: after the last action, poll the nodes' status every FINISH_POLL_S;
        once every node that reports ``finished`` says so (:func:`all_finished`), wait DRAIN_S more
        and return (``finished_s`` = when), not later than ``until_s`` either way."""
        assert self.t0_mono is not None, "start_workload first"
        priority = raise_priority()
        self.run.update_manifest(schedule_priority=priority)
        timeline = [timeline_entry(a) for a in actions]
        self._save_timeline(timeline)
        last: dict[str, threading.Event] = {}  # node -> "done" of the latest action touching it
        dones: list[threading.Event] = []
        # started before the first action: a hand-off, not a thread start
        workers = _Workers(spare=2, realtime=priority.startswith("SCHED_FIFO"))

        def one(a: Action, entry: dict[str, Any], after: list[threading.Event], done: threading.Event) -> None:
            try:
                for ev in after:
                    ev.wait()
                self.execute(a, entry)
            finally:
                done.set()  # the node's next action may go; the timeline is saved meanwhile
            self._save_timeline(timeline)
            self.on_event({"kind": "fault", **entry})

        try:
            for a, entry in zip(actions, timeline):
                if not self._sleep_until(a.at_s):
                    break
                nodes = nodes_of(a)
                after = list({id(ev): ev for n in nodes if (ev := last.get(n)) is not None
                              and not ev.is_set()}.values())
                done = threading.Event()
                workers.submit(lambda a=a, entry=entry, after=after, done=done: one(a, entry, after, done))
                for n in nodes:
                    last[n] = done
                dones.append(done)
            for done in dones:
                done.wait()
        finally:
            workers.close()
            restore_priority()
        if until_s is not None:
            if end_when_finished:
                self._wait_finished(until_s)
            else:
                self._sleep_until(until_s)
        return timeline

    def _wait_finished(self, until_s: float) -> None:
        while self.now_s() < until_s:
            if not self._sleep_until(min(until_s, max(0.0, self.now_s()) + FINISH_POLL_S)):
                return
            if self.exited():  # a node's process is gone outside the schedule: the run is not valid
                return
            calls = [(n, "status", {}) for n in self.deployment.endpoints if n not in self.down_nodes]
            done = all_finished(self.controls.call_many(calls))
            if done is None:  # no node's work has an end: the planned duration
                self._sleep_until(until_s)
                return
            if done:
                self.finished_s = self.now_s()
                self._sleep_until(min(until_s, self.finished_s + DRAIN_S))
                return

    def exited(self) -> dict[str, str]:
        """The nodes whose process is gone although the schedule did not crash them (or restarted
        them since), node -> the provider's reason (the node's last words): e.g. a node that raised,
        or one killed from outside (another session's ``testbed wipe`` removes every testbed process
        on the machine); not one the plan's memory limit ended (``Provider.killed_by_limit``: the
        OOM kill is recorded as a crash at ``down``). Only a provider that can tell
        (``Provider.dead_reason``, the local one) reports any."""
        with self._lock:
            down = set(self.down_nodes)
        out = {}
        for n in self.deployment.endpoints:
            if n not in down and (why := self.provider.dead_reason(self.run, n)) is not None \
                    and not self.provider.killed_by_limit(self.run, n):  # an OOM kill: a crash at down
                out[n] = why
        return out

    def _sleep_until(self, at_s: float) -> bool:
        target = self.t0_mono + at_s
        while True:
            left = target - time.monotonic()
            if left <= 0:
                return True
            if self._stop.wait(min(left, 0.2) if left > 0.003 else 0):
                return False
            if left <= 0.003:
                while time.monotonic() < target:  # spin the last few ms: the wait is coarse;
                    time.sleep(0)  # sleep(0) drops the GIL, so running fault threads are not held up
                return True

    def execute(self, a: Action, entry: dict[str, Any]) -> None:
        """Carry out one action now, filling ``entry``'s actual time, status and error."""
        entry["actual_s"] = self.now_s()
        try:
            if a.call:
                self._call(a, entry)
            elif a.op in PROCESS_OPS:
                self._process(a)
                entry["status"] = "done"
            else:
                self._link(a)
                entry["status"] = "done"
        except TestbedError as e:
            entry["status"] = "skipped" if "not running" in str(e) else "failed"
            entry["error"] = str(e)
        entry["done_s"] = self.now_s()

    def _process(self, a: Action) -> None:
        node = a.target[0]
        self.provider.process_action(self.run, a)
        if a.op == "crash":
            with self._lock:
                self.down_nodes.add(node)
                self.links.stalled.discard(node)  # a crash loses what a stall held
        elif a.op == "restart":
            self._confirm_restart(node)  # a ProviderError: the restart is recorded as failed
            with self._lock:
                self.down_nodes.discard(node)
            threading.Thread(target=self._after_restart, args=(node,), daemon=True).start()

    def _confirm_restart(self, node: str) -> None:
        """The restarted process is the node: it is alive, answers an authenticated ping (only a
        holder of the run secret can seal the reply) naming this node and run, and the provider
        recognises it as the process it started (pid, config). Raises ProviderError otherwise
        (e.g. its ports were taken while it was down and it exited)."""
        self.controls.refresh(self.run.deployment())  # the provider may have moved its endpoint
        self.controls.wait_ready([node], timeout=RESTART_READY_S,
                                 alive=lambda n: self.provider.dead_reason(self.run, n))
        ping = self.controls.call(node, "ping")
        if ping.get("node") != node or ping.get("run") != self.deployment.run_id:
            raise ProviderError(f"restart: the process answering is {ping.get('node')!r} of run "
                                f"{ping.get('run')!r}", node=node)
        self.provider.confirm_node(self.run, node, ping)

    def _after_restart(self, node: str) -> None:
        """Once the restarted node answered: give it the current link state and the workload."""
        try:
            for op, args in self.links.restore_calls(node):
                self.controls.call(node, op, **args)
            if self.t0_wall_ns is not None:
                off = int(self.run.manifest.get("clock_offsets", {})
                          .get(self.deployment.endpoints[node].host, {}).get("offset_ns", 0))
                self.controls.call(node, "start", t0_wall_ns=self.t0_wall_ns + off, duration_s=self.duration_s)
            self.on_event({"kind": "restarted", "node": node, "at_s": self.now_s()})
        except TestbedError as e:
            self.on_event({"kind": "error", "node": node, "error": f"after restart: {e}"})

    def _call(self, a: Action, entry: dict[str, Any]) -> None:
        """A protocol's own action: its control op on its target nodes (those not crashed)."""
        with self._lock:
            down = set(self.down_nodes)
        targets = [n for n in a.target if n not in down]
        if not targets:
            raise ProviderError(f"{a.op}: not running (crashed: {', '.join(sorted(down))})")
        args = dict(a.call.get("args") or {})
        if a.call.get("any"):
            # one request, many copies (e.g. a move sent to every broker): its id lets the node that
            # acted on it, and whoever inherits its state, know a late copy of the same request
            args["req"] = entry["req"] = uuid.uuid4().hex[:12]
        replies = self.controls.call_many([(n, str(a.call["op"]), args) for n in targets])
        status, ok, error = call_outcome(a, replies)
        entry["status"], entry["accepted_by"], entry["error"] = status, ok, error

    def _link(self, a: Action) -> None:
        with self._lock:
            self.links.apply(a)
            down = set(self.down_nodes)
        calls = [(n, op, args) for n, op, args in link_calls(a) if n not in down]
        if not calls:
            raise ProviderError(f"{a.op}: not running (crashed: {', '.join(sorted(down))})")
        res = self.controls.call_many(calls)
        errs = [f"{n}: {r}" for n, r in res.items() if isinstance(r, Exception)]
        if errs:
            raise ProviderError(f"{a.op}: {len(errs)} of {len(calls)} control calls failed; first: {errs[0]}")

    def _save_timeline(self, timeline: list[dict[str, Any]]) -> None:
        with self._lock:
            self.run.modify_manifest(lambda m: m.__setitem__("timeline", timeline))
