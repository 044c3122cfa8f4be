"""Lanes (a TCP connection of its own per lane, Gryphon's dedicated connection per subscriber):
what they cost, between two real transports on loopback in one process (both ends' work counted).

    .venv/bin/python benchmarks/bench_lanes.py [--lanes 2000] [--frames 200000]

1. Opening: lanes connected (handshake included) per second, 8 at a time (LANE_CONNECTS).
2. Sending: CPU seconds per frame when ``--frames`` frames of the Gryphon delivery's size go
   round-robin over the lanes, one frame per lane per loop turn (a write each), against the same
   frames on one shared connection (joined into one write per loop turn).

Prints the numbers and writes benchmarks/results/lanes.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from testbed.nodes.runtime import codec  # noqa: E402
from testbed.nodes.runtime.transport import LANE_CONNECTS, Transport  # noqa: E402

SECRET = b"b" * 32


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def bench(n_lanes: int, n_frames: int) -> dict:
    loop = asyncio.get_running_loop()
    got = [0]
    port = _port()

    def on_msg(src, msg):
        got[0] += 1

    def fatal(e: BaseException) -> None:
        raise e

    kw = dict(on_peer_up=lambda p: None, on_peer_down=lambda p: None, on_drop=lambda p, r, n: None,
              on_fatal=fatal, secret=SECRET)
    a = Transport(loop, "a", "r", {"b": ("127.0.0.1", port)}, on_message=lambda s, m: None, **kw)
    b = Transport(loop, "b", "r", {"a": ("127.0.0.1", _port())}, on_message=on_msg, connections=n_lanes, **kw)
    await b.listen("127.0.0.1", port)

    async def until(cond):
        while not cond():
            await asyncio.sleep(0.005)

    t = time.perf_counter()
    for i in range(n_lanes):
        a.open_lane("b", f"c{i}")
    a.send("b", [codec.frame({"k": "hi"})])
    await until(lambda: sum(ob.state == "up" for ob in a.lanes.values()) == n_lanes and got[0] == 1)
    open_s = time.perf_counter() - t
    msg = {"k": "dlv", "c": "subs-1234", "pe": "p1/pubs-0", "t": 1795838271525, "s": 1234,
           "pt": 1795838271525658862, "pl": b"x" * 190}

    async def send(lanes: bool) -> float:
        got[0] = 0
        c0 = time.process_time()
        batch = n_lanes
        for start in range(0, n_frames, batch):
            for i in range(start, min(n_frames, start + batch)):
                f = codec.frame(msg)
                a.send("b", [a.lane_frame(f, f"c{i % n_lanes}")] if lanes else [f])
            await asyncio.sleep(0)  # one loop turn: the flushes
            while got[0] < start - 4 * batch:  # bounded in flight
                await asyncio.sleep(0)
        await until(lambda: got[0] == n_frames)
        return (time.process_time() - c0) / n_frames

    shared = await send(False)
    lanes = await send(True)
    await a.close()
    await b.close()
    return {"lanes": n_lanes, "lane_connects": LANE_CONNECTS, "open_s": round(open_s, 3),
            "opened_per_s": round(n_lanes / open_s), "frames": n_frames,
            "cpu_us_per_frame_shared": round(shared * 1e6, 2), "cpu_us_per_frame_lanes": round(lanes * 1e6, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lanes", type=int, default=2000)
    ap.add_argument("--frames", type=int, default=200_000)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * args.lanes + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    out = asyncio.run(bench(args.lanes, args.frames))
    out["load_1m"] = os.getloadavg()[0]
    print(f"{out['lanes']} lanes opened in {out['open_s']} s ({out['opened_per_s']}/s, {LANE_CONNECTS} at a time)")
    print(f"CPU per frame, both ends: one shared connection {out['cpu_us_per_frame_shared']} us, "
          f"a connection per lane {out['cpu_us_per_frame_lanes']} us (load {out['load_1m']:.1f})")
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    (res / "lanes.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
