"""An in-memory discrete-event harness for Gryphon nodes (simulated clock, no sockets).

Implements the node Runtime contract with a simulated clock: frames go through
msgpack (so anything not wire-safe fails here too), a per-hop delay, and the
fault semantics of the real runtime: ``stall`` holds a node's egress (lost if it
crashes while stalled), ``cut`` drops at egress both ways, ``crash`` kills a node
(its peers see ``on_peer_down``), ``restart`` builds a fresh instance from the
same config (same ``state_dir``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import random
from typing import Any, Callable

import msgpack

from testbed.protocols.gryphon.nodes import events as _gryphon_events  # noqa: F401  (declares)
from testbed.nodes.runtime import events as evreg
from testbed.nodes.runtime.api import Runtime, resolve

EPOCH_NS = 1_700_000_000_000_000_000


class _Handle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def _run(coro) -> None:
    try:
        coro.send(None)
    except StopIteration:
        return
    raise RuntimeError("node coroutine awaited something; the harness cannot run it")


class SimRuntime(Runtime):
    def __init__(self, sim: "Sim", config: dict[str, Any]) -> None:
        self.sim = sim
        self.name = config["node"]
        self.config = config
        self.rng = random.Random(config.get("seed", 0))
        self.loop = None  # type: ignore[assignment]
        self.dead = False

    def send(self, dst: str, msg: dict[str, Any], lane: str | None = None) -> None:
        if not self.dead:  # lanes: the simulated network keeps one ordered channel per pair
            self.sim._send(self.name, dst, msgpack.packb(msg, use_bin_type=True))

    def log(self, ev: str, **fields: Any) -> None:
        et = evreg.get(ev)
        assert et is not None, f"undeclared event {ev}"
        assert set(fields) == set(et.fields), f"{ev}: fields {sorted(fields)} != {sorted(et.fields)}"
        if not self.dead:
            self.sim.events.append({"t": self.wall_ns(), "node": self.name, "ev": ev, **fields})

    def wall_ns(self) -> int:
        return EPOCH_NS + int(self.sim.now * 1e9)

    def mono_ns(self) -> int:
        return int(self.sim.now * 1e9)

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any):
        h = _Handle()

        def run() -> None:
            if not h.cancelled and not self.dead:
                fn(*args)

        self.sim.at(self.sim.now + max(0.0, delay_s), run)
        return h

    def spawn(self, coro: Any) -> asyncio.Task:
        raise NotImplementedError

    def flush(self) -> None:
        pass


class Sim:
    def __init__(self, configs: dict[str, dict[str, Any]], *, delay: float = 0.001) -> None:
        self.now = 0.0
        self.configs = configs
        self.delay = delay
        self._q: list = []
        self._seq = itertools.count()
        self.events: list[dict[str, Any]] = []
        self.nodes: dict[str, Any] = {}
        self.rts: dict[str, SimRuntime] = {}
        self.stalled: dict[str, list] = {}
        self.cuts: set[frozenset] = set()
        self.link_delay: dict[tuple[str, str], float] = {}
        self.frames = 0

    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._q, (t, next(self._seq), fn))

    def start_node(self, name: str, restarted: bool = False) -> None:
        cfg = self.configs[name]
        rt = SimRuntime(self, cfg)
        cls = resolve(cfg["protocol"], cfg["kind"], cfg["role"])
        node = cls(rt)
        self.rts[name] = rt
        self.nodes[name] = node
        _run(node.start())
        if restarted:
            for other, n in self.nodes.items():
                if other != name and not self.rts[other].dead:
                    n.on_peer_up(name)
                    node.on_peer_up(other)

    def start(self) -> None:
        for name in self.configs:
            self.start_node(name)
        for name, n in self.nodes.items():
            for other in self.configs:
                if other != name:
                    n.on_peer_up(other)

    def workload(self, duration: float) -> None:
        for name, n in self.nodes.items():
            if not self.rts[name].dead:
                _run(n.start_workload(self.rts[name].wall_ns(), duration))

    # -- transport -------------------------------------------------------------
    def _send(self, src: str, dst: str, frame: bytes) -> None:
        if src in self.stalled:
            self.stalled[src].append((dst, frame))
            return
        self._transmit(src, dst, frame)

    def _transmit(self, src: str, dst: str, frame: bytes) -> None:
        if frozenset((src, dst)) in self.cuts:
            return
        d = self.link_delay.get((src, dst), self.delay)
        self.frames += 1

        def deliver() -> None:
            rt = self.rts.get(dst)
            if rt is None or rt.dead or frozenset((src, dst)) in self.cuts:
                return
            self.nodes[dst].on_message(src, msgpack.unpackb(frame, raw=False, strict_map_key=False))

        self.at(self.now + d, deliver)

    # -- faults ----------------------------------------------------------------
    def stall(self, name: str) -> None:
        self.stalled.setdefault(name, [])

    def unstall(self, name: str) -> None:
        for dst, frame in self.stalled.pop(name, []):
            self._transmit(name, dst, frame)

    def cut(self, a: str, b: str) -> None:
        self.cuts.add(frozenset((a, b)))

    def heal(self, a: str, b: str) -> None:
        self.cuts.discard(frozenset((a, b)))

    def crash(self, name: str) -> None:
        self.rts[name].dead = True
        self.stalled.pop(name, None)
        for other, n in self.nodes.items():
            if other != name and not self.rts[other].dead:
                n.on_peer_down(name)

    def restart(self, name: str) -> None:
        self.start_node(name, restarted=True)

    # -- running ---------------------------------------------------------------
    def run_until(self, t: float) -> None:
        while self._q and self._q[0][0] <= t:
            tt, _, fn = heapq.heappop(self._q)
            self.now = tt
            fn()
        self.now = t

    def schedule(self, t: float, fn: Callable[[], None]) -> None:
        self.at(t, fn)

    def ev(self, name: str, **match: Any) -> list[dict[str, Any]]:
        return [e for e in self.events if e["ev"] == name and all(e.get(k) == v for k, v in match.items())]


def make_configs(nodes: dict[str, dict[str, Any]], clients: dict[str, dict[str, Any]], *,
                 params: dict[str, Any] | None = None, state_root: str = "/tmp") -> dict[str, dict]:
    """Node configs as the renderer makes them. nodes: name -> {cell, neighbors};
    clients: group -> {role, count, attach, rate_per_s, size_bytes, filter, extra}."""
    directory: dict[str, dict[str, Any]] = {}
    for n, d in nodes.items():
        directory[n] = {"kind": "node", "role": "broker", "site": "s", "cell": d.get("cell"),
                        "neighbors": list(d.get("neighbors", ()))}
    for g, d in clients.items():
        directory[g] = {"kind": "clients", "role": d["role"], "site": "s", "cell": None, "neighbors": []}
    cfgs = {}
    for i, (n, d) in enumerate({**nodes, **clients}.items()):
        is_client = n in clients
        cfg = {"run_id": "sim", "node": n, "kind": "clients" if is_client else "node",
               "role": d["role"] if is_client else "broker", "protocol": "gryphon", "site": "s",
               "cell": None if is_client else d.get("cell"),
               "neighbors": [] if is_client else list(d.get("neighbors", ())),
               "directory": directory, "params": dict(params or {}), "seed": i,
               "duration_s": 10.0, "state_dir": f"{state_root}/{n}", "clients": None}
        if is_client:
            cfg["clients"] = {"name": n, "role": d["role"], "count": d.get("count", 1),
                              "attach": list(d["attach"]), "rate_per_s": d.get("rate_per_s"),
                              "size_bytes": d.get("size_bytes", 100), "filter": d.get("filter"),
                              "extra": d.get("extra", {})}
        cfgs[n] = cfg
    return cfgs


def fig3(state_root: str, params: dict[str, Any] | None = None, *, rate: float = 25.0,
         subs_per_shb: int = 1) -> dict[str, dict]:
    """The Fig 3 topology: p1; IB1 = {b1, b2}; IB2 = {b3, b4}; s1, s2 under IB1; s3-s5 under IB2."""
    nodes = {"p1": {"neighbors": []},
             "b1": {"cell": "ib1", "neighbors": ["p1", "b2"]}, "b2": {"cell": "ib1", "neighbors": ["p1"]},
             "b3": {"cell": "ib2", "neighbors": ["p1", "b4"]}, "b4": {"cell": "ib2", "neighbors": ["p1"]},
             "s1": {"neighbors": ["b1", "b2"]}, "s2": {"neighbors": ["b1", "b2"]},
             "s3": {"neighbors": ["b3", "b4"]}, "s4": {"neighbors": ["b3", "b4"]},
             "s5": {"neighbors": ["b3", "b4"]}}
    clients = {"pubs": {"role": "publisher", "count": 4, "attach": ["p1"], "rate_per_s": rate},
               "subs": {"role": "subscriber", "count": 5 * subs_per_shb,
                        "attach": ["s1", "s2", "s3", "s4", "s5"]}}
    p = {"gct": 0.2, "nrt": 0.6, "aet": 10.0, "dct": None, "link_timeout": 1.0}
    p.update(params or {})
    return make_configs(nodes, clients, params=p, state_root=state_root)


def history_violations(events: list[dict[str, Any]], *, exclude_brokers: set[str] = frozenset()) -> dict:
    """Exactly-once, gapless and tick order per (subscriber, pubend), for pass-all or
    ``[k,eq,v]`` subscriptions (pure Python; the Spark checks do the same on run logs)."""
    logged: dict[str, dict[int, int]] = {}
    for e in events:
        if e["ev"] == "g_logged":
            d = logged.setdefault(e["pubend"], {})
            for t, k in zip(e["ticks"], e["keys"]):
                d[t] = k
    spec: dict[str, tuple] = {}
    home: dict[str, str] = {}
    for e in events:
        if e["ev"] == "g_subscribe":
            spec[e["client"]] = json.loads(e["filter"])  # a JSON list of [attr, op, value]
            home[e["client"]] = e["broker"]
    got: dict[tuple[str, str], list[int]] = {}
    unpublished = 0
    for e in events:
        if e["ev"] == "g_deliver":
            got.setdefault((e["client"], e["pubend"]), []).append(e["tick"])
            if e["tick"] not in logged.get(e["pubend"], {}):
                unpublished += 1
    dup = order = gaps = 0
    for (c, pe), ticks in got.items():
        if home.get(c) in exclude_brokers:
            continue
        dup += len(ticks) - len(set(ticks))
        order += sum(1 for a, b in zip(ticks, ticks[1:]) if b <= a)
        s = spec.get(c) or []
        want = [t for t, k in logged.get(pe, {}).items()
                if t <= max(ticks) and (not s or all(p[1] == "eq" and k == p[2] for p in s))]
        gaps += len(set(want) - set(ticks))
    missing_streams = 0
    for c in spec:
        if home.get(c) in exclude_brokers:
            continue
        s = spec.get(c) or []
        for pe, ticks in logged.items():
            wanted = any(not s or all(p[1] == "eq" and k == p[2] for p in s) for k in ticks.values())
            if wanted and (c, pe) not in got:
                missing_streams += 1
    return {"duplicates": dup, "order": order, "gaps": gaps, "unpublished": unpublished,
            "missing_streams": missing_streams}


def skip_gaps(self):
    """A broken ``SubendStream._advance`` for the tests that must see the checker fail: it delivers
    whatever is known, ignoring Q ticks (no doubt horizon)."""
    end = self.k.end()
    out = [(t, self.k.data[t]) for t in self.k.d_in(self.td, end)]
    self.td = max(self.td, end)
    self.k.ack(self.td)
    return out
