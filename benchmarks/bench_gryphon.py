"""Gryphon broker benchmark: in-process, one core, real protocol code, real msgpack encoding.

    .venv/bin/python benchmarks/bench_gryphon.py [--messages 20000] [--subscribers 16000]

1. PHB: CPU seconds per published message through a PHB with one downstream SHB,
   GD (tick, stable log with fsync group commit, knowledge streams) vs best-effort.
2. SHB fan-out: an SHB with N subscribers each matching 1/1000 of the input (the Fig 4
   workload, 2 msgs/s each at 2000 msgs/s input): deliveries/s one process sustains
   (every delivery encoded with msgpack as the transport would), GD vs best-effort.

The runtime is a stand-in that encodes each frame and counts it (no sockets): these are
upper bounds of the protocol's own cost, not of the whole node. Prints the numbers and
writes benchmarks/results/gryphon.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import msgpack

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from testbed.protocols.gryphon.nodes.broker import GryphonBroker  # noqa: E402

EPOCH_NS = 1_800_000_000_000_000_000


class BenchRT:
    """A Runtime stand-in: a manual clock, timers run on ``advance``, frames encoded and counted."""

    def __init__(self, config):
        self.name = config["node"]
        self.config = config
        self.now = 0.0
        self.timers = []
        self.frames = 0
        self.bytes = 0
        self.loop = None

    def send(self, dst, msg):
        self.bytes += len(msgpack.packb(msg, use_bin_type=True))
        self.frames += 1

    def log(self, ev, **fields):
        pass

    def wall_ns(self):
        return EPOCH_NS + int(self.now * 1e9)

    def mono_ns(self):
        return int(self.now * 1e9)

    def call_later(self, d, fn, *args):
        self.timers.append((self.now + d, fn, args))

    def advance(self, dt):
        self.now += dt
        due = [t for t in self.timers if t[0] <= self.now]
        self.timers = [t for t in self.timers if t[0] > self.now]
        for _, fn, args in due:
            fn(*args)

    def flush(self):
        pass

    def spawn(self, coro):
        raise NotImplementedError


def config(node, mode, state_dir):
    directory = {"p1": {"kind": "node", "cell": None, "neighbors": []},
                 "s1": {"kind": "node", "cell": None, "neighbors": ["p1"]}}
    return {"node": node, "directory": directory, "params": {"mode": mode}, "state_dir": state_dir}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_sync(node):
    import asyncio

    asyncio.run(node.start())


def bench_phb(mode: str, n: int, rate: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        rt = BenchRT(config("p1", mode, d))
        b = GryphonBroker(rt)
        run_sync(b)
        payload = b"x" * 190
        c0, w0 = cpu(), time.perf_counter()
        for i in range(n):
            b.on_message("pubs", {"k": "pub", "pe": "p1/pubs-0", "c": "pubs-0", "seq": i,
                                  "a": {"k": i % 1000}, "pt": rt.wall_ns(), "pl": payload})
            if i % 10 == 9:
                rt.advance(10 / rate)
            if i % 200 == 199:  # the SHB acks what it got
                b.on_message("s1", {"k": "ack", "pe": "p1/pubs-0", "T": b.now_ms() - 5})
        rt.advance(1.0)
        c1, w1 = cpu(), time.perf_counter()
    return {"mode": mode, "messages": n, "cpu_us_per_msg": 1e6 * (c1 - c0) / n, "wall_s": w1 - w0,
            "frames": rt.frames}


def bench_shb(mode: str, n_msgs: int, subscribers: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        rt = BenchRT(config("s1", mode, d))
        b = GryphonBroker(rt)
        run_sync(b)
        for i in range(subscribers):
            b.on_message("subs", {"k": "sub", "c": f"subs-{i}", "f": [["k", "eq", i % 1000]]})
        payload = b"x" * 190
        base = b.now_ms()
        c0, w0 = cpu(), time.perf_counter()
        frames0 = rt.frames
        for i in range(n_msgs):
            t = base + i + 1
            m = {"seq": i, "c": "pubs-0", "a": {"k": i % 1000}, "pt": rt.wall_ns(), "pl": payload}
            km = {"k": "km", "pe": "p1/pubs-0", "f": [[0, base + 1]], "d": [[t, m]],
                  "rt": False}
            if mode == "best-effort":
                km = {"k": "km", "pe": "p1/pubs-0", "d": [[t, m]]}
            b.on_message("p1", km)
            if i % 100 == 99:
                rt.advance(0.05)
        c1, w1 = cpu(), time.perf_counter()
        deliveries = b.counters["delivered"]
    return {"mode": mode, "input_messages": n_msgs, "subscribers": subscribers, "deliveries": deliveries,
            "cpu_s": c1 - c0, "deliveries_per_cpu_s": deliveries / max(1e-9, c1 - c0),
            "frames": rt.frames - frames0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--subscribers", type=int, default=16000)
    a = ap.parse_args()
    out = {"phb": [bench_phb(m, a.messages, 2000.0) for m in ("gd", "best-effort")],
           "shb": [bench_shb(m, a.messages, a.subscribers) for m in ("gd", "best-effort")]}
    g, be = out["phb"]
    out["phb_gd_overhead_us_per_msg"] = g["cpu_us_per_msg"] - be["cpu_us_per_msg"]
    out["phb_gd_overhead_pct_of_core_at_2000_msgs_s"] = out["phb_gd_overhead_us_per_msg"] * 2000 / 1e4
    sg, sb = out["shb"]
    out["shb_gd_overhead_pct_of_core_at_32000_deliveries_s"] = 100 * (
        32000 / sg["deliveries_per_cpu_s"] - 32000 / sb["deliveries_per_cpu_s"])
    for r in out["phb"]:
        print(f"PHB {r['mode']:12s} {r['cpu_us_per_msg']:8.1f} us CPU / published message")
    for r in out["shb"]:
        print(f"SHB {r['mode']:12s} {r['deliveries_per_cpu_s']:10.0f} deliveries / CPU s "
              f"({r['subscribers']} subscribers, {r['deliveries']} deliveries)")
    print(f"GD overhead: PHB {out['phb_gd_overhead_pct_of_core_at_2000_msgs_s']:.1f}% of a core at 2000 msgs/s; "
          f"SHB {out['shb_gd_overhead_pct_of_core_at_32000_deliveries_s']:.1f}% of a core at 32000 deliveries/s")
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    (res / "gryphon.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
