"""The node process: ``python -m testbed.nodes CONFIG.json``.

Loads the config (keys in :mod:`api`), resolves the protocol's Node class,
builds the :class:`NodeRuntime` (the :class:`api.Runtime` implementation),
opens the event log, starts the data and control listeners, logs
``node_start``, and runs until a graceful shutdown (control op ``shutdown``,
SIGTERM, SIGINT: exit 0) or an uncaught exception in protocol code (traceback
on stderr, ``node_error`` logged, log flushed, exit 1). A bad config is one
line on stderr and exit 2.

The loop uses ``select()`` (microsecond timeouts) so the egress link emulation
releases frames within a fraction of a millisecond of their due time; epoll
would round every timeout up to a whole millisecond. With more than
``SELECT_MAX_PEERS`` peers (file descriptors near select's 1024 limit) it falls
back to epoll, where the emulation releases up to half a millisecond early.
``TESTBED_NODE_SELECTOR=epoll|select`` overrides the choice. Under ``select()`` the
soft descriptor limit is lowered to ``SELECT_FD_LIMIT`` (select cannot watch a
descriptor >= 1024): a flood of connections then meets ``EMFILE`` at accept (asyncio
pauses accepting for a second) instead of a descriptor select() cannot take; the
transport's and control channel's connection caps keep the node's own connections far
below it.

Whatever escapes the event loop (a bug in the runtime, a resource error) ends the
node the way an exception in protocol code does: traceback on stderr, ``node_error``
with the refusal counts so far, log flushed, exit 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import selectors
import signal
import sys
import time
import traceback
from typing import Any, Callable

from testbed.nodes.runtime import api, auth, codec, service
from testbed.nodes.runtime.control import ControlServer
from testbed.nodes.runtime.eventlog import EventLog
from testbed.nodes.runtime.linkemu import Egress, LinkSpec
from testbed.nodes.runtime.transport import Transport

REQUIRED_KEYS = ("run_id", "node", "kind", "role", "protocol", "listen", "control", "peers", "log_path",
                 auth.SECRET_KEY)
SELECT_MAX_PEERS = 300
SELECT_FD_LIMIT = 1024  # FD_SETSIZE: select() raises ValueError on a descriptor >= this
PERIODIC_S = 1.0
DROP_FLUSH_S = 0.1
STOP_TIMEOUT_S = 5.0


class ConfigError(Exception):
    """A node config that cannot be used (one line, names the file)."""


def _addr(path: str, key: str, v: Any) -> tuple[str, int]:
    if (not isinstance(v, (list, tuple)) or len(v) != 2 or not isinstance(v[0], str)
            or isinstance(v[1], bool) or not isinstance(v[1], int)):
        raise ConfigError(f"{path}: {key}: expected [host, port], got {v!r}")
    return v[0], v[1]


def load_config(path: str) -> dict[str, Any]:
    """Read and check a node config file. Raises ConfigError with a one-line message."""
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read node config: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: node config must be a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in cfg]
    if missing:
        raise ConfigError(f"{path}: missing key(s) {', '.join(missing)}")
    try:
        auth.parse_secret(cfg[auth.SECRET_KEY])
    except ValueError as e:
        raise ConfigError(f"{path}: {e}") from None  # the message never contains the secret
    _addr(path, "listen", cfg["listen"])
    _addr(path, "control", cfg["control"])
    if not isinstance(cfg["peers"], dict):
        raise ConfigError(f"{path}: peers: expected a map {{name: [host, port]}}")
    for name, a in cfg["peers"].items():
        _addr(path, f"peers.{name}", a)
    links = cfg.get("links") or {}
    if not isinstance(links, dict):
        raise ConfigError(f"{path}: links: expected a map {{destination: link spec}}")
    for dst, d in links.items():
        try:
            LinkSpec.from_dict(d)
        except ValueError as e:
            raise ConfigError(f"{path}: links.{dst}: {e}") from None
    em = cfg.get("emulation", "userspace")
    if em not in ("userspace", "kernel"):
        raise ConfigError(f"{path}: emulation: expected userspace or kernel, got {em!r}")
    why = service.check(cfg.get("service"))
    if why:
        raise ConfigError(f"{path}: service: {why}")
    conns = cfg.get("connections", 0)
    if isinstance(conns, bool) or not isinstance(conns, int) or conns < 0:
        raise ConfigError(f"{path}: connections: expected an integer >= 0, got {conns!r}")
    fm = cfg.get("log_flush_ms", 100)
    if isinstance(fm, bool) or not isinstance(fm, int) or not 1 <= fm <= 100:
        raise ConfigError(f"{path}: log_flush_ms: expected an integer 1..100, got {fm!r}")
    return cfg


def make_loop(n_peers: int, connections: int = 0) -> tuple[asyncio.AbstractEventLoop, float]:
    """The event loop and the egress release tolerance ``early_s`` that suits its timer precision.

    ``connections``: lanes beyond one connection per peer (the config's ``connections``): with any,
    epoll, and the soft descriptor limit raised to hold them (up to the hard limit)."""
    n = n_peers + connections
    choice = os.environ.get("TESTBED_NODE_SELECTOR") or ("select" if n <= SELECT_MAX_PEERS else "epoll")
    if choice == "select" and not connections:
        limit_fds(SELECT_FD_LIMIT)
        return asyncio.SelectorEventLoop(selectors.SelectSelector()), 0.0001
    if connections:
        raise_fds(2 * n + 256)
    return asyncio.SelectorEventLoop(selectors.DefaultSelector()), 0.0005


def raise_fds(n: int) -> int:
    """Raise the soft RLIMIT_NOFILE to at least ``n`` where the hard limit allows; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= n:
        return soft
    want = n if hard == resource.RLIM_INFINITY else min(n, hard)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        return want
    return soft


def limit_fds(n: int) -> int:
    """Lower the soft RLIMIT_NOFILE to at most ``n`` (never raises it); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n if soft == resource.RLIM_INFINITY else min(soft, n)
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if want != soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


def _rss_kb() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class NodeRuntime(api.Runtime):
    """The runtime of one node process (implements :class:`api.Runtime`)."""

    def __init__(self, config: dict[str, Any], loop: asyncio.AbstractEventLoop, early_s: float = 0.0001) -> None:
        self.config = config
        self.name: str = config["node"]
        self.run_id = str(config["run_id"])
        self.secret = auth.parse_secret(config[auth.SECRET_KEY])
        self.loop = loop
        self.rng = random.Random(config.get("seed", 0))
        self.emulation: str = config.get("emulation", "userspace")
        self.peers: dict[str, tuple[str, int]] = {
            k: (v[0], int(v[1])) for k, v in config["peers"].items() if k != self.name}
        self.started_mono = time.monotonic()
        self.workload_state = "idle"
        self.drop_totals: dict[str, int] = {}
        self._drops: dict[tuple[str, str], int] = {}
        self._timers: list[asyncio.TimerHandle] = []
        self._workload_timers: list[asyncio.TimerHandle] = []
        self._done: asyncio.Future[int] | None = None
        self._shutting_down = False
        self._fatal = False
        self.listening = False  # both listeners bound: from here on an error is node_error
        self.evlog = EventLog(config["log_path"], self.name, config.get("log_flush_ms", 100))
        self.rejects = auth.RejectLog(self.evlog.log)
        # The egress link emulation draws from its own stream so that protocol
        # randomness (self.rng) does not shift when links change.
        self.egress = Egress(loop, random.Random(f"{config.get('seed', 0)}/links"), self._deliver,
                             self._on_drop, userspace=self.emulation == "userspace", early_s=early_s)
        for dst, d in (config.get("links") or {}).items():
            self.egress.set_link(dst, LinkSpec.from_dict(d))
        self.transport = Transport(loop, self.name, str(config["run_id"]), self.peers,
                                   on_message=self._on_message_unset, on_peer_up=self._peer_up,
                                   on_peer_down=self._peer_down, on_drop=self._on_drop,
                                   on_fatal=self.fatal, secret=self.secret, on_reject=self.reject,
                                   connections=int(config.get("connections") or 0))
        self.control = ControlServer(self)
        cls = api.resolve(config["protocol"], config["kind"], config["role"], config.get("node_class"))
        self.node: api.Node = cls(self)
        self.transport.on_message = self.node.on_message
        self.service: service.ServiceQueue | None = None
        svc = config.get("service")
        if svc:
            # a stream of its own, like the links': the protocol's draws do not shift with it
            self.service = service.ServiceQueue(
                svc["mean_s"], svc.get("distribution", "exponential"),
                random.Random(f"{config.get('seed', 0)}/service"), loop.time,
                lambda when, fn: loop.call_at(when, self._guard(fn)), self.node.on_message)
            self.transport.on_message = self.service.arrive
        self._last_periodic = time.monotonic()

    # --- api.Runtime -------------------------------------------------------------------
    def send(self, dst: str, msg: dict[str, Any], lane: str | None = None) -> None:
        frame = codec.frame(msg)
        if lane is not None and dst != self.name:
            frame = self.transport.lane_frame(frame, lane)
        if dst == self.name:
            payload = codec.decode(frame[4:])
            self.loop.call_soon(self._guard(self.node.on_message), self.name, payload)
            return
        if dst not in self.peers:
            self._on_drop(dst, "unknown-peer", 1)
            return
        self.egress.send(dst, frame)

    def open_lane(self, dst: str, lane: str) -> None:
        if dst in self.peers:
            self.transport.open_lane(dst, lane)

    def log(self, ev: str, **fields: Any) -> None:
        self.evlog.log(ev, fields)

    def wall_ns(self) -> int:
        return time.time_ns()

    def mono_ns(self) -> int:
        return time.monotonic_ns()

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> asyncio.TimerHandle:
        return self.loop.call_later(delay_s, self._guard(fn), *args)

    def spawn(self, coro: Any) -> asyncio.Task:
        task = self.loop.create_task(coro)
        task.add_done_callback(self._task_done)
        return task

    def flush(self) -> None:
        self.evlog.flush()

    # --- internals -----------------------------------------------------------------------
    def uptime_s(self) -> float:
        return time.monotonic() - self.started_mono

    def _on_message_unset(self, src: str, msg: dict[str, Any]) -> None:
        raise RuntimeError("message before the node was created")

    def _guard(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            try:
                return fn(*args)
            except BaseException as e:
                self.fatal(e)
        return run

    def _task_done(self, task: asyncio.Task) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.fatal(exc)

    def fatal(self, exc: BaseException, where: str = "protocol code") -> None:
        """An uncaught exception (in protocol code, or escaping the event loop): stderr,
        the refusal counts so far, ``node_error``, flush, exit 1."""
        if self._fatal:
            return
        self._fatal = True
        print(f"[{self.name}] uncaught exception in {where}:", file=sys.stderr)
        traceback.print_exception(exc, file=sys.stderr)
        sys.stderr.flush()
        try:
            try:
                self._flush_drops()
                self.rejects.flush()
            finally:
                self.evlog.log("node_error", {"error": f"{type(exc).__name__}: {exc}"[:2000], "where": where,
                                              "rejected": dict(self.rejects.totals)})
        finally:
            self.evlog.close()
            os._exit(1)

    def _deliver(self, peer: str, frames: list[bytes]) -> None:
        self.transport.send(peer, frames)

    def reject(self, channel: str, peer: str, reason: str, detail: str) -> None:
        """A refused or malformed connection or control request (counted; logged rate-limited)."""
        self.rejects.reject(channel, peer, reason, detail)

    def _on_drop(self, peer: str, reason: str, count: int) -> None:
        self.transport.counters.dropped += count
        key = (peer, reason)
        self._drops[key] = self._drops.get(key, 0) + count
        self.drop_totals[reason] = self.drop_totals.get(reason, 0) + count

    def _flush_drops(self) -> None:
        if self._drops:
            drops, self._drops = self._drops, {}
            for (peer, reason), n in drops.items():
                self.evlog.log("drop", {"peer": peer, "reason": reason, "count": n})

    def _peer_up(self, peer: str) -> None:
        self.evlog.log("peer_up", {"peer": peer})
        self._guard(self.node.on_peer_up)(peer)

    def _peer_down(self, peer: str) -> None:
        self.evlog.log("peer_down", {"peer": peer})
        self._guard(self.node.on_peer_down)(peer)

    def set_link(self, dst: str, spec: LinkSpec) -> None:
        was_down = self.egress.down.is_down(dst)
        self.egress.set_link(dst, spec)
        self.evlog.log("link_set", {"peer": dst, "spec": spec.to_dict()})
        if self.egress.down.is_down(dst) != was_down:
            self.evlog.log("link_state", {"peer": dst, "up": not was_down, "reason": "config"})
            if was_down:
                self.link_restored(dst)

    def link_restored(self, peer: str) -> None:
        """A down link to ``peer`` is up again: tell the node if the connection stayed up (a
        closed one comes back through ``on_peer_up`` when it reconnects)."""
        if peer in self.transport.connected():
            self._guard(self.node.on_link_up)(peer)

    def schedule_workload(self, t0_wall_ns: int, duration_s: float) -> float:
        for h in self._workload_timers:
            h.cancel()
        delay = max(0.0, (t0_wall_ns - time.time_ns()) / 1e9)
        self.workload_state = "scheduled"
        self._workload_timers = [self.loop.call_later(delay, self._begin_workload, t0_wall_ns, duration_s)]
        return delay

    def _begin_workload(self, t0: int, duration_s: float) -> None:
        self.workload_state = "running"
        self.evlog.log("workload", {"phase": "start", "t0": t0, "duration_s": duration_s})
        self.spawn(self.node.start_workload(t0, duration_s))
        self._workload_timers = [self.loop.call_later(duration_s, self._end_workload, t0, duration_s)]

    def _end_workload(self, t0: int, duration_s: float) -> None:
        self.workload_state = "done"
        self.evlog.log("workload", {"phase": "end", "t0": t0, "duration_s": duration_s})

    async def stop_workload(self) -> None:
        for h in self._workload_timers:
            h.cancel()
        self._workload_timers = []
        try:
            await self.node.stop_workload()
        except Exception as e:
            self.fatal(e)
        self.workload_state = "stopped"
        self.evlog.log("workload", {"phase": "stop", "t0": 0, "duration_s": 0.0})

    def _periodic(self) -> None:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.evlog.log("cpu", {"user_s": round(ru.ru_utime, 4), "sys_s": round(ru.ru_stime, 4),
                               "rss_kb": _rss_kb()})
        self.evlog.log("stats", self.transport.counters.as_dict())
        if self.transport.connections:
            self.evlog.log("conns", {"lanes_up": sum(ob.state == "up" for ob in self.transport.lanes.values()),
                                     "inbound": len(self.transport.inbound)})
        now = time.monotonic()
        if self.service is not None:
            self.evlog.log("service", self.service.sample(now - self._last_periodic))
        self._last_periodic = now
        self.rejects.flush()
        self._timers.append(self.loop.call_later(PERIODIC_S, self._periodic))
        if len(self._timers) > 8:
            self._timers = self._timers[-2:]

    def _drop_tick(self) -> None:
        self._flush_drops()
        self._timers.append(self.loop.call_later(DROP_FLUSH_S, self._drop_tick))

    def request_shutdown(self, reason: str) -> None:
        if self._shutting_down or self._done is None:
            return
        self._shutting_down = True
        self.loop.create_task(self._shutdown(reason))

    async def _shutdown(self, reason: str) -> None:
        try:
            await asyncio.wait_for(self.node.stop(), STOP_TIMEOUT_S)
        except asyncio.TimeoutError:
            print(f"[{self.name}] Node.stop() did not finish in {STOP_TIMEOUT_S}s", file=sys.stderr)
        except Exception as e:
            self.fatal(e)
        if self._done is not None and not self._done.done():
            self._done.set_result(0)
        self._stop_reason = reason

    async def run(self) -> int:
        """Start everything, run until shutdown; the exit status."""
        self._done = self.loop.create_future()
        self._stop_reason = "shutdown"
        self.evlog.start(self.loop)
        cfg = self.config
        await self.transport.listen(cfg["listen"][0], int(cfg["listen"][1]))
        await self.control.listen(cfg["control"][0], int(cfg["control"][1]))
        self.listening = True
        for sig, why in ((signal.SIGTERM, "sigterm"), (signal.SIGINT, "sigint")):
            self.loop.add_signal_handler(sig, self.request_shutdown, why)
        self.evlog.log("node_start", {"pid": os.getpid(), "restarted": self.evlog.existed,
                                      "role": cfg["role"], "kind": cfg["kind"], "emulation": self.emulation})
        try:
            await self.node.start()
        except Exception as e:
            self.fatal(e)
        eager = list(cfg.get("neighbors") or [])
        clients = cfg.get("clients") or {}
        if isinstance(clients, dict):
            att = clients.get("attach") or []
            eager += [att] if isinstance(att, str) else list(att)
        for p in eager:
            if p in self.peers:
                self.transport.connect(p)
        self._periodic()
        self._drop_tick()
        code = await self._done
        for h in self._timers + self._workload_timers:
            h.cancel()
        lost = self.egress.held()
        for peer, ln in sorted(self.egress.links.items()):
            s = ln.hist.summary()
            if s["n"]:
                self.evlog.log("sched", {"peer": peer, "n": s["n"], "p50_us": s["p50_us"],
                                         "p99_us": s["p99_us"], "max_us": s["max_us"]})
        self.egress.close()
        if lost:
            self._on_drop("*", "shutdown", lost)
        self._flush_drops()
        self.rejects.flush()
        self.evlog.log("stats", self.transport.counters.as_dict())
        if self.service is not None:  # the last interval's sample
            self.evlog.log("service", self.service.sample(time.monotonic() - self._last_periodic))
        self.evlog.log("node_stop", {"reason": self._stop_reason})
        self.evlog.flush()
        await self.control.close()
        await self.transport.close()
        self.evlog.close()
        return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m testbed.nodes CONFIG.json", file=sys.stderr)
        return 2
    try:
        cfg = load_config(argv[0])
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    peers = [p for p in cfg["peers"] if p != cfg["node"]]
    loop, early_s = make_loop(len(peers), int(cfg.get("connections") or 0))
    asyncio.set_event_loop(loop)
    try:
        try:
            rt = NodeRuntime(cfg, loop, early_s)
        except (KeyError, ImportError, ValueError, OSError) as e:
            print(f"error: {argv[0]}: node {cfg['node']}: {e}", file=sys.stderr)
            return 2
        try:
            return loop.run_until_complete(rt.run())
        except OSError as e:
            if rt.listening:
                rt.fatal(e, "the event loop")
            print(f"error: node {cfg['node']}: {e}", file=sys.stderr)  # e.g. the listen address is taken
            rt.evlog.close()
            return 2
        except (Exception, KeyboardInterrupt) as e:  # escaped the loop: never a silent exit
            rt.fatal(e, "the event loop")
            raise
    finally:
        _cancel_all(loop)
        loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what protocol code left running (workload tasks ...) so the exit is quiet."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
