"""One broker hop: publisher process -> broker process -> subscriber process on loopback.

    .venv/bin/python benchmarks/bench_hop.py [--seconds 3] [--rate 200000] [--size 16]

No link emulation (delay 0). The publisher publishes as fast as it can (a rate it
cannot reach); the number that counts is publications *delivered* through the broker
per second, from the subscriber's ``deliver`` log lines (count / time between first and
last delivery). Also reported: the broker's CPU seconds over the run (/proc/<pid>/stat),
so msgs per broker-CPU-second is the one-core throughput of the broker's hot path
(frame decode, match, encode, send) even when three processes share two cores.
Prints the numbers and writes benchmarks/results/hop.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from testbed.testing.harness import NodeProc, free_ports, read_log, wait_for, write_config  # noqa: E402


def configs(workdir: str, rate: float, size: int, duration: float, sub_filter: str, subs_in_prt: int) -> dict:
    names = ["b1", "pubs", "subs"]
    ports = free_ports(6)
    data = {n: ["127.0.0.1", ports[2 * i]] for i, n in enumerate(names)}
    ctl = {n: ["127.0.0.1", ports[2 * i + 1]] for i, n in enumerate(names)}
    groups = {
        "pubs": {"name": "pubs", "role": "publisher", "count": 1, "attach": ["b1"], "rate_per_s": rate,
                 "size_bytes": size, "filter": None,
                 "extra": {"attrs": {"class": "STOCK", "price": "uniform(0,100)", "sym": "choice(IBM,MSFT,ORCL)"}}},
        "subs": {"name": "subs", "role": "subscriber", "count": subs_in_prt, "attach": ["b1"], "rate_per_s": None,
                 "size_bytes": None, "filter": sub_filter, "extra": {}},
    }
    directory = {n: {"kind": "node" if n == "b1" else "clients", "role": "broker" if n == "b1" else groups[n]["role"],
                     "site": "s", "cell": None, "neighbors": []} for n in names}
    out = {}
    for i, n in enumerate(names):
        cfg = {
            "run_id": "bench-hop", "node": n, "kind": "node" if n == "b1" else "clients",
            "role": directory[n]["role"], "protocol": "pubsub", "site": "s", "cell": None, "neighbors": [],
            "listen": data[n], "control": ctl[n], "peers": {m: data[m] for m in names if m != n},
            "links": {}, "emulation": "userspace", "clients": groups.get(n), "directory": directory,
            "params": {"covering": "off", "settle": 0.5}, "placement": {}, "seed": i,
            "duration_s": duration, "log_path": os.path.join(workdir, "logs", f"{n}.jsonl"),
            "state_dir": os.path.join(workdir, "state", n), "log_flush_ms": 100,
        }
        out[n] = write_config(workdir, n, cfg)
    return out


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a live process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(seconds: float, rate: float, size: int, subs: int) -> dict:
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # logs off the disk: measure the hop, not fsync-less disk writes
    with tempfile.TemporaryDirectory(prefix="bench-hop-", dir=shm) as wd:
        cfgs = configs(wd, rate, size, seconds, "[class,eq,'STOCK']", subs)
        procs = {n: NodeProc(c) for n, c in cfgs.items()}
        try:
            for p in procs.values():
                p.start()
            for p in procs.values():
                p.wait_ready()
            wait_for(lambda: procs["b1"].call("status")["node_status"]["prt"] >= subs, timeout=10)
            cpu0 = {n: proc_cpu_s(p.proc.pid) for n, p in procs.items()}
            t0 = time.time_ns() + int(0.3e9)
            for p in procs.values():
                p.call("start", t0_wall_ns=t0, duration_s=seconds)
            time.sleep(0.3 + seconds)
            # let the queues drain: stop when the broker's counters stop moving
            last = -1
            while True:
                st = procs["b1"].call("status")["node_status"]
                if st["pub_in"] == last:
                    break
                last = st["pub_in"]
                time.sleep(0.3)
            cpu = {n: proc_cpu_s(p.proc.pid) - cpu0[n] for n, p in procs.items()}
            for p in procs.values():
                p.stop()
        finally:
            for p in procs.values():
                p.kill()
        logs = {n: read_log(c["log_path"]) for n, c in cfgs.items()}
    dl = [e["t"] for e in logs["subs"] if e["ev"] == "deliver" and e["client"] == "subs-0"]
    pubs = [e["t"] for e in logs["pubs"] if e["ev"] == "publish"]
    span = (max(dl) - min(dl)) / 1e9 if len(dl) > 1 else float("nan")
    pspan = (max(pubs) - min(pubs)) / 1e9 if len(pubs) > 1 else float("nan")
    bcpu = cpu["b1"]
    return {
        "seconds": seconds, "size_bytes": size, "subscriptions": subs,
        "published": len(pubs), "delivered": len(dl),
        "publish_rate_per_s": round(len(pubs) / pspan) if pubs else 0,
        "delivered_per_s": round(len(dl) / span) if dl else 0,
        "broker_cpu_s": round(bcpu, 3),
        "delivered_per_broker_cpu_s": round(len(dl) / bcpu) if bcpu == bcpu and bcpu > 0 else None,
        "publisher_cpu_s": round(cpu["pubs"], 3), "subscriber_cpu_s": round(cpu["subs"], 3),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "lost": len(pubs) - len(dl),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rate", type=float, default=200_000.0, help="publisher target rate (msgs/s)")
    ap.add_argument("--size", type=int, default=16, help="payload bytes")
    ap.add_argument("--subs", type=int, default=1, help="subscriber clients (all match)")
    ap.add_argument("--out", default=str(HERE / "results" / "hop.json"))
    a = ap.parse_args()
    res = run(a.seconds, a.rate, a.size, a.subs)
    res["cpus"] = os.cpu_count()
    res["python"] = sys.version.split()[0]
    for k, v in res.items():
        print(f"{k:28s} {v}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
