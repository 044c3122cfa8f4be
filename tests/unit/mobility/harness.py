"""Mobility nodes on the pub/sub core's in-memory runtime (virtual clock, msgpack on every
frame, FIFO links): configs for brokers with mobile groups and stationary client groups,
and plain-Python history predicates used by the unit tests (the Spark checks are tested in
tests/unit/mobility/test_checks.py on the same kind of histories)."""

from __future__ import annotations

import collections
from typing import Any

import math
import zlib

from pubsub.harness import FakeRuntime, Sim as _Sim, _Handle, base_config

#: A 3-broker line with one stationary publisher, up to ``params:`` (the tests add their groups).
TOPOLOGY_HEAD = """\
version: 1
name: t
protocol: mobility
duration: 20s
sites: {lab: {}}
nodes:
  b1: {role: broker, site: lab}
  b2: {role: broker, site: lab, neighbors: [b1]}
  b3: {role: broker, site: lab, neighbors: [b2]}
clients:
  pubs: {role: publisher, count: 1, attach: b2, rate: 10/s, params: {attrs: {w: "choice(cov,tree)", x: "uniform(0,100)"}}}
params:
"""

from testbed.nodes.runtime.api import resolve

from testbed.protocols.pubsub.nodes.filters import matches, parse

CHAIN = {"b1": [], "b2": ["b1"], "b3": ["b2"], "b4": ["b3"], "b5": ["b4"], "b6": ["b5"], "b7": ["b3"]}
ATTRS = {"w": "choice(cov,tree,chain,dist)", "x": "uniform(0,100)"}


class _Runtime(FakeRuntime):
    def call_later(self, delay_s, fn, *args):
        """As the pub/sub harness, but a positive delay below 1 ns still advances the clock (a
        publisher whose period is not a whole number of ns would otherwise spin at one instant)."""
        h = _Handle()

        def run() -> None:
            if self.alive and not h.cancelled():
                fn(*args)

        self.sim.at(self.sim.now + max(0, math.ceil(delay_s * 1e9)), run)
        return h


class Sim(_Sim):
    def _make(self, name: str) -> None:
        cfg = self.configs[name]
        rt = _Runtime(self, name, cfg)
        node = resolve(cfg["protocol"], cfg["kind"], cfg["role"])(rt)
        self.rts[name], self.nodes[name] = rt, node
        self.drive(node.start())


def configs(brokers: dict[str, list[str]], mobile: dict[str, dict[str, Any]],
            groups: dict[str, dict[str, Any]] | None = None, **params: Any) -> dict[str, dict[str, Any]]:
    nb: dict[str, set[str]] = {b: set() for b in brokers}
    for b, ns in brokers.items():
        for n in ns:
            nb[b].add(n)
            nb[n].add(b)
    p = {"movement": "reconfiguration", "covering": None, "move_timeout": 2.0, "quiesce": 1.0,
         "settle": 0.5, "tables_interval": 1.0, "mobile": mobile, **params}
    if p["covering"] is None:
        p["covering"] = "off" if p["movement"] == "reconfiguration" else "retract"
    out = {}
    for b in brokers:
        out[b] = base_config(b, "node", "broker", protocol="mobility", neighbors=sorted(nb[b]), params=p)
    for g, spec in (groups or {}).items():
        cg = {"name": g, "role": spec["role"], "count": spec.get("count", 1), "attach": list(spec["attach"]),
              "rate_per_s": spec.get("rate_per_s"), "size_bytes": 8, "filter": spec.get("filter"),
              "extra": spec.get("extra", {})}
        out[g] = base_config(g, "clients", spec["role"], protocol="mobility", clients=cg, params=p)
    names = list(out)
    for n in names:
        out[n]["seed"] = zlib.crc32(n.encode()) % 1000  # not hash(): stable across interpreter runs
        out[n]["peers"] = {m: ["127.0.0.1", 0] for m in names if m != n}
        out[n]["directory"] = {m: {"kind": out[m]["kind"], "role": out[m]["role"], "site": "s", "cell": None,
                                   "neighbors": out[m]["neighbors"]} for m in names}
    return out


def publishers(attach: list[str], rate: float = 20.0) -> dict[str, dict[str, Any]]:
    return {"pubs": {"role": "publisher", "count": len(attach), "attach": attach, "rate_per_s": rate,
                     "extra": {"attrs": ATTRS}}}


def run(cfgs: dict[str, dict[str, Any]], duration: float, after: float = 0.5, tail: float = 1.0,
        delays: dict[tuple[str, str], float] | None = None, actions=None) -> Sim:
    sim = Sim(cfgs, delay_ms=1.0, delays=delays)
    sim.start()
    sim.run_for(after)
    sim.start_workload(0.0, duration)
    for at, fn in sorted(actions or [], key=lambda a: a[0]):
        sim.run_until(int((after + at) * 1e9))  # at: seconds from the workload start
        fn(sim)
    sim.run_until(int((after + duration + tail) * 1e9))
    for name, node in sim.nodes.items():
        if sim.rts[name].alive:
            sim.drive(node.stop_workload())
    sim.run_for(0.5)
    sim.shutdown()
    return sim


# ------------------------------------------------------------------ plain history predicates
def duplicates(sim: Sim) -> list[tuple[str, str]]:
    c = collections.Counter((d["client"], d["pub_id"]) for d in sim.events("deliver"))
    return [k for k, v in c.items() if v > 1]


def missing(sim: Sim, margin_s: float = 0.3, settle_s: float = 0.3) -> list[tuple[str, str, int]]:
    """(client, pub_id, t) of matching publications never delivered, for every client subscribed
    (first subscribe of the client) at least settle_s before the publication."""
    first_sub: dict[str, tuple[int, str]] = {}
    for s in sim.events("subscribe"):
        first_sub.setdefault(s["client"], (s["t"], s["filter"]))
    got = {(d["client"], d["pub_id"]) for d in sim.events("deliver")}
    end = max(r["t"] for r in sim.logs if r["ev"] == "publish") - int(margin_s * 1e9)
    out = []
    for p in sim.events("publish"):
        if p["t"] > end:
            continue
        for c, (ts, f) in first_sub.items():
            if ts + int(settle_s * 1e9) <= p["t"] and matches(parse(f), p["attrs"]) and (c, p["pub_id"]) not in got:
                out.append((c, p["pub_id"], p["t"]))
    return out


def final_copies(sim: Sim) -> dict[str, list[str]]:
    """client -> nodes whose last client_state for it is 'started'."""
    last: dict[tuple[str, str], str] = {}
    for r in sim.events("client_state"):
        last[(r["client"], r["node"])] = r["state"]
    out: dict[str, list[str]] = collections.defaultdict(list)
    for (c, n), st in last.items():
        if st == "started":
            out[c].append(n)
    return dict(out)


def egress_dies_with_sender(sim) -> None:
    """As the link emulation does on real processes: a frame waits out its link delay in the sender's
    egress, so a crash of the sender loses what it had sent and not yet released (the in-memory
    runtime's own wire only drops frames whose receiver is down)."""
    import msgpack

    def send(src, dst, msg):
        data = msgpack.packb(msg, use_bin_type=True)
        rt_src, rt_dst = sim.rts[src], sim.rts[dst]
        if not rt_dst.alive:
            return
        t = max(sim.now + sim._delay(src, dst), sim._last.get((src, dst), 0))
        sim._last[(src, dst)] = t

        def deliver() -> None:
            if rt_dst.alive and sim.rts[dst] is rt_dst and rt_src.alive and sim.rts[src] is rt_src:
                sim.nodes[dst].on_message(src, msgpack.unpackb(data, raw=False))
        sim.at(t, deliver)
    sim._send = send
