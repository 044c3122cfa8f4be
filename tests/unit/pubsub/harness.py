"""A deterministic in-memory runtime for protocol nodes (a test aid, not the real path).

``Sim`` runs Node instances on a virtual clock with one event queue: ``send``
round-trips every message through msgpack (as on the wire) and delivers it after
a per-link delay, FIFO per link; ``call_later`` schedules on the same clock;
``log`` checks each event against the registry (declared name, exactly the
declared fields, JSON-serialisable) and records it. Crash and restart replace a
node by a fresh instance and fire ``on_peer_down``/``on_peer_up`` as the real
runtime does when connections break and come back.
"""

from __future__ import annotations

import heapq
import itertools
import json
import random
from typing import Any, Callable

import msgpack

from testbed.nodes.runtime.api import Node, Runtime, resolve
from testbed.nodes.runtime.events import COMMON_FIELDS, all_events

WALL0 = 1_700_000_000_000_000_000


class _Handle:
    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    def cancelled(self) -> bool:
        return self._cancelled


class FakeRuntime(Runtime):
    def __init__(self, sim: "Sim", name: str, config: dict[str, Any]) -> None:
        self.sim = sim
        self.name = name
        self.config = config
        self.rng = random.Random(config.get("seed", 0))
        self.loop = None  # type: ignore[assignment]
        self.alive = True

    def send(self, dst: str, msg: dict[str, Any]) -> None:
        if self.alive:
            self.sim._send(self.name, dst, msg)

    def log(self, ev: str, **fields: Any) -> None:
        et = self.sim.registry.get(ev)
        assert et is not None, f"undeclared event {ev}"
        assert set(fields) == set(et.fields), f"{ev}: fields {sorted(fields)} != {sorted(et.fields)}"
        rec = {"t": self.wall_ns(), "m": self.mono_ns(), "node": self.name, "ev": ev, **fields}
        json.dumps(rec)
        if self.alive:
            self.sim.logs.append(rec)

    def wall_ns(self) -> int:
        return WALL0 + self.sim.now

    def mono_ns(self) -> int:
        return self.sim.now

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> Any:
        h = _Handle()

        def run() -> None:
            if self.alive and not h.cancelled():
                fn(*args)

        self.sim.at(self.sim.now + max(0, int(delay_s * 1e9)), run)
        return h

    def spawn(self, coro: Any) -> Any:
        self.sim.drive(coro)
        return None

    def flush(self) -> None:
        pass


class Sim:
    def __init__(self, configs: dict[str, dict[str, Any]], delay_ms: float = 1.0,
                 delays: dict[tuple[str, str], float] | None = None) -> None:
        self.configs = configs
        self.now = 0
        self.q: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.delay_ns = int(delay_ms * 1e6)
        self.delays = {k: int(v * 1e6) for k, v in (delays or {}).items()}
        self.registry = all_events()
        self.logs: list[dict[str, Any]] = []
        self.nodes: dict[str, Node] = {}
        self.rts: dict[str, FakeRuntime] = {}
        self._last: dict[tuple[str, str], int] = {}
        self.dropped = 0
        self.sent = 0

    # -- clock --------------------------------------------------------------------
    def at(self, t_ns: int, fn: Callable[[], None]) -> None:
        heapq.heappush(self.q, (t_ns, next(self._seq), fn))

    def run_for(self, seconds: float) -> None:
        self.run_until(self.now + int(seconds * 1e9))

    def run_until(self, t_ns: int) -> None:
        while self.q and self.q[0][0] <= t_ns:
            t, _, fn = heapq.heappop(self.q)
            self.now = max(self.now, t)
            fn()
        self.now = max(self.now, t_ns)

    @staticmethod
    def drive(coro: Any) -> None:
        try:
            coro.send(None)
        except StopIteration:
            return
        raise AssertionError("the harness only runs coroutines that do not suspend")

    # -- nodes --------------------------------------------------------------------
    def _make(self, name: str) -> None:
        cfg = self.configs[name]
        rt = FakeRuntime(self, name, cfg)
        cls = resolve(cfg["protocol"], cfg["kind"], cfg["role"])
        node = cls(rt)
        self.rts[name], self.nodes[name] = rt, node
        self.drive(node.start())

    def _connect(self, name: str) -> None:
        """Connections of ``name`` (both directions) come up after one link delay."""
        for peer in self.configs:
            if peer == name or peer not in self.nodes:
                continue
            for a, b in ((name, peer), (peer, name)):
                def up(a: str = a, b: str = b) -> None:
                    if self.rts[a].alive and self.rts[b].alive:
                        self.nodes[a].on_peer_up(b)
                self.at(self.now + self._delay(a, b), up)

    def start(self) -> None:
        for name in self.configs:
            self._make(name)
        for name in self.configs:
            for peer in self.configs:
                if peer != name:
                    def up(a: str = name, b: str = peer) -> None:
                        self.nodes[a].on_peer_up(b)
                    self.at(self.now + self._delay(name, peer), up)

    def crash(self, name: str) -> None:
        self.rts[name].alive = False
        for peer, node in self.nodes.items():
            if peer != name and self.rts[peer].alive:
                node.on_peer_down(name)

    def restart(self, name: str) -> None:
        assert not self.rts[name].alive
        self._make(name)
        self._connect(name)

    def start_workload(self, after_s: float, duration_s: float) -> int:
        t0 = self.rts[next(iter(self.rts))].wall_ns() + int(after_s * 1e9)
        for name, node in self.nodes.items():
            if self.rts[name].alive:
                self.drive(node.start_workload(t0, duration_s))
        return t0

    def shutdown(self) -> None:
        for name, node in self.nodes.items():
            if self.rts[name].alive:
                self.drive(node.stop())

    # -- wire ---------------------------------------------------------------------
    def _delay(self, a: str, b: str) -> int:
        return self.delays.get((a, b), self.delay_ns)

    def _send(self, src: str, dst: str, msg: dict[str, Any]) -> None:
        assert dst in self.configs, f"{src} sent to unknown process {dst}"
        data = msgpack.packb(msg, use_bin_type=True)
        if not self.rts[dst].alive:
            self.dropped += 1
            return
        self.sent += 1
        rt_dst = self.rts[dst]
        t = max(self.now + self._delay(src, dst), self._last.get((src, dst), 0))
        self._last[(src, dst)] = t

        def deliver() -> None:
            if rt_dst.alive and self.rts[dst] is rt_dst:  # not crashed meanwhile
                self.nodes[dst].on_message(src, msgpack.unpackb(data, raw=False))
            else:
                self.dropped += 1
        self.at(t, deliver)

    # -- logs ---------------------------------------------------------------------
    def events(self, ev: str, **match: Any) -> list[dict[str, Any]]:
        return [r for r in self.logs if r["ev"] == ev and all(r.get(k) == v for k, v in match.items())]


def base_config(name: str, kind: str, role: str, **kw: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "run_id": "test", "node": name, "kind": kind, "role": role, "protocol": "pubsub",
        "site": "s", "cell": None, "neighbors": [], "listen": ["127.0.0.1", 0],
        "control": ["127.0.0.1", 0], "peers": {}, "links": {}, "emulation": "userspace",
        "clients": None, "directory": {}, "params": {"covering": "off", "settle": 0.5},
        "placement": {}, "seed": abs(hash(name)) % 1000, "duration_s": 5.0, "log_path": "",
        "state_dir": "", "log_flush_ms": 100,
    }
    cfg.update(kw)
    return cfg


def topology(brokers: dict[str, list[str]], groups: dict[str, dict[str, Any]],
             params: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Node configs for brokers {name: neighbours} and client groups {name: ClientGroupPlan dict}."""
    configs = {}
    p = {"covering": "off", "settle": 0.5, **(params or {})}
    for b, nb in brokers.items():
        configs[b] = base_config(b, "node", "broker", neighbors=list(nb), params=p)
    for g, spec in groups.items():
        cg = {"name": g, "role": spec["role"], "count": spec.get("count", 1),
              "attach": list(spec["attach"]), "rate_per_s": spec.get("rate_per_s"),
              "size_bytes": spec.get("size_bytes", 16), "filter": spec.get("filter"),
              "extra": spec.get("extra", {})}
        configs[g] = base_config(g, "clients", spec["role"], clients=cg, params=p)
    names = list(configs)
    for n in names:
        configs[n]["peers"] = {m: ["127.0.0.1", 0] for m in names if m != n}
        configs[n]["directory"] = {m: {"kind": configs[m]["kind"], "role": configs[m]["role"],
                                       "site": "s", "cell": None,
                                       "neighbors": configs[m]["neighbors"]} for m in names}
    return configs
