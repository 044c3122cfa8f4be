"""The broker hop's parts, one at a time, in one process: CPU microseconds per message.

    .venv/bin/python benchmarks/bench_hop_parts.py [--n 200000] [--base DIR] [--rounds 5]

``bench_hop.py`` measures the hop end to end with three processes on a shared machine: its
wall-clock numbers move with the load, and its CPU seconds come from /proc in 10 ms ticks.
This one runs the real runtime and broker code paths with no sockets and no other process,
timed by ``time.process_time`` (best of ``--rounds``), so a change to a part shows even on a
busy machine:

* ``receive``: ``_InProtocol.data_received`` of chunks of 100 publication frames (framing and
  msgpack decode; ``on_message`` does nothing) -- every node, per frame received;
* ``send``: what ``NodeRuntime.send`` does for a publication (``codec.frame``), then
  ``Egress.send`` on a link that emulates nothing and ``Transport.send`` to a connection that is
  up (its socket write replaced by nothing) -- every node, per frame sent;
* ``log``: ``EventLog.log`` of a ``deliver`` line (and its share of the flushes to a file on
  /dev/shm) -- the subscriber per delivery; ``log_publish``: the publisher's ``publish`` line;
* ``broker``: ``Broker.on_message`` of a publication matching one subscription of a local
  client process (match, hop count, the frame for the client process: ``send`` above is part of it).

``--base DIR`` (a checkout of the code before a change) runs the same in a fresh process
importing ``testbed`` from DIR, alternated with this checkout: before and after in one command.
Prints the numbers and writes benchmarks/results/hop_parts.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(n: int, rounds: int) -> dict:
    import random

    from testbed.nodes.runtime import codec
    from testbed.nodes.runtime.eventlog import EventLog
    from testbed.nodes.runtime.linkemu import Egress
    from testbed.nodes.runtime import transport as T
    from testbed.protocols.pubsub.nodes.broker import Broker

    class Loop:
        def call_soon(self, fn, *a):
            return None

        def time(self):
            return time.monotonic()

    class Sock:
        def write(self, data):
            pass

    loop = Loop()
    tr = T.Transport(loop, "b1", "run", {"subs": ("127.0.0.1", 1), "pubs": ("127.0.0.1", 2)},
                     on_message=lambda s, m: None, on_peer_up=lambda p: None, on_peer_down=lambda p: None,
                     on_drop=lambda p, r, c: None, on_fatal=lambda e: None, secret=b"x" * 32)
    ob = tr.outbound("subs")
    ob.state, ob.transport = "up", Sock()
    ob.flush_scheduled = True  # the flush is never run: the buffer is cleared by the loop below
    eg = Egress(loop, random.Random(0), tr.send, lambda p, r, c: None)

    def rt_send(dst, msg):  # NodeRuntime.send for a peer
        eg.send(dst, codec.frame(msg))

    pub = {"k": "pub", "id": "pubs-0:1000000001", "c": "pubs-0", "s": 1000000001,
           "a": {"class": "STOCK", "price": 42.4242424242, "sym": "IBM"}, "p": b"\0" * 16,
           "t": time.time_ns(), "h": 0}
    chunk = codec.frame(pub) * 100
    inp = T._InProtocol(tr)
    inp.src = "pubs"
    inp.decoder.max_frame = tr.max_frame

    def best(fn, count):
        ts = []
        for _ in range(rounds):
            t = time.process_time()
            fn()
            ts.append(time.process_time() - t)
        return round(min(ts) / count * 1e6, 3)

    out = {}

    def receive():
        for _ in range(n // 100):
            inp.data_received(chunk)
    out["receive"] = best(receive, n // 100 * 100)

    def send():
        for i in range(n):
            rt_send("subs", pub)
            if i % 64 == 0:
                ob.buf.clear()
        ob.buf.clear()
    out["send"] = best(send, n)

    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=shm) as d:
        log = EventLog(os.path.join(d, "n.jsonl"), "subs")
        fields = {"client": "subs-0", "pub_id": "pubs-0:1000000001", "publisher": "pubs-0", "seq": 1000000001,
                  "pub_t": time.time_ns(), "hops": 1}

        def deliver():
            for i in range(n):
                log.log("deliver", fields)
                if i % 5000 == 0:
                    log.flush()
            log.flush()
        out["log"] = best(deliver, n)
        pfields = {"client": "pubs-0", "pub_id": "pubs-0:1000000001", "seq": 1000000001, "attrs": pub["a"],
                   "size": 16, "broker": "b1"}

        def publish():
            for i in range(n):
                log.log("publish", pfields)
                if i % 5000 == 0:
                    log.flush()
            log.flush()
        out["log_publish"] = best(publish, n)
        log.close()

    class RT:
        name = "b1"
        config = {"node": "b1", "neighbors": [], "params": {"covering": "off"}}
        send = staticmethod(rt_send)

        def log(self, ev, **f):
            pass

        def call_later(self, *a):
            return None

    b = Broker(RT())
    b.on_message("subs", {"k": "sub", "id": "subs-0:s1", "f": "[class,eq,'STOCK']", "c": "subs-0"})

    def broker():
        for i in range(n):
            m = dict(pub)
            b.on_message("pubs", m)
            if i % 64 == 0:
                ob.buf.clear()
        ob.buf.clear()
    out["broker"] = best(broker, n)
    assert b._deliver_out >= n, b._deliver_out
    return out


def run_child(code: str, n: int, rounds: int) -> dict:
    env = dict(os.environ, PYTHONPATH=code)
    r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", "--n", str(n),
                        "--rounds", str(rounds)], env=env, capture_output=True, text=True, check=True,
                       cwd=tempfile.gettempdir())
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if Path(res["code"]).resolve() != Path(code).resolve():
        raise SystemExit(f"measured {res['code']}, meant {code}")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000, help="messages per part and round")
    ap.add_argument("--rounds", type=int, default=5, help="best of this many (inside one process)")
    ap.add_argument("--pairs", type=int, default=3, help="with --base: processes per code, alternated")
    ap.add_argument("--base", metavar="DIR")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(HERE / "results" / "hop_parts.json"))
    a = ap.parse_args()
    if a.child:
        import testbed
        res = measure(a.n, a.rounds)
        res["code"] = str(Path(testbed.__file__).resolve().parent.parent)
        print(json.dumps(res))
        return 0
    codes = {"this": str(HERE.parent)}
    if a.base:
        codes = {"base": str(Path(a.base).resolve()), **codes}
    runs: dict = {c: [] for c in codes}
    for i in range(a.pairs if a.base else 1):
        for c, path in (list(codes.items()) if i % 2 == 0 else list(reversed(codes.items()))):
            r = run_child(path, a.n, a.rounds)
            r["load_avg_1m"] = round(os.getloadavg()[0], 2)
            runs[c].append(r)
            print(f"{c}: " + ", ".join(f"{k} {v}" for k, v in r.items() if k != "code") + " (us per message)",
                  flush=True)
    parts = ("receive", "send", "log", "log_publish", "broker")
    res: dict = {"n": a.n, "runs": runs}
    for c in codes:
        res[c] = {p: statistics.median(r[p] for r in runs[c]) for p in parts}
        # one delivery through the hop, per process: the broker receives and forwards (its
        # send is inside "broker"), the publisher sends and logs, the subscriber receives and logs
        m = res[c]
        res[c]["hop_total"] = round(m["send"] + m["log_publish"] + m["receive"] + m["broker"]
                                    + m["receive"] + m["log"], 3)
    if a.base:
        res["after_over_before"] = {p: round(res["this"][p] / res["base"][p], 3) for p in res["this"]}
    for c in codes:
        print(f"median {c}: {res[c]}")
    if a.base:
        print(f"after / before: {res['after_over_before']}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
