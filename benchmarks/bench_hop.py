"""One broker hop: publisher process -> broker process -> subscriber process on loopback.

    .venv/bin/python benchmarks/bench_hop.py [--seconds 3] [--rate 200000] [--size 16]
    .venv/bin/python benchmarks/bench_hop.py --bare --rounds 5      # the hop against the bare transport
    .venv/bin/python benchmarks/bench_hop.py --profile /tmp/hopprof  # py-spy on the three processes
    .venv/bin/python benchmarks/bench_hop.py --bare --rounds 5 --base /tmp/base   # before/after, paired

No link emulation (delay 0). The publisher publishes as fast as it can (a rate it
cannot reach); the number that counts is publications *delivered* through the broker
per second, from the subscriber's ``deliver`` log lines (count / time between first and
last delivery). Also reported: the broker's CPU seconds over the run (/proc/<pid>/stat),
so msgs per broker-CPU-second is the one-core throughput of the broker's hot path
(frame decode, match, encode, send) even when three processes share two cores.

``--bare``: each round also measures the bare transport (``bench_link.py``'s throughput
section: one echo node sending to another as fast as it can, no logging, no broker) right
after the hop, and reports the hop's delivered/s as a fraction of it; ``--rounds N`` repeats
the pair N times (alternated, so the ratio is paired against the machine's drift) and reports
each round and the median. ``--base DIR`` (a checkout of the code before a change, e.g.
``git archive main | tar -x -C DIR``) runs the same measurements with the node processes
importing ``testbed`` from DIR (``PYTHONPATH``), alternated with this checkout's in every
round: before and after in one command. ``--profile DIR`` samples each node process with py-spy
(``pip install py-spy``) during the workload and prints each one's top functions by own
time and by inclusive time (raw stacks in DIR/<this|base>/<node>.txt, the last round's).
Prints the numbers and writes benchmarks/results/hop.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

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


def start_profilers(procs: dict, seconds: float, profile_dir: str | None) -> list[subprocess.Popen]:
    """py-spy record (raw collapsed stacks, non-blocking) on every node for the workload."""
    if not profile_dir:
        return []
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    os.makedirs(profile_dir, exist_ok=True)
    return [subprocess.Popen([spy, "record", "--pid", str(p.proc.pid), "--duration", str(max(1, int(seconds))),
                              "--rate", "250", "--format", "raw", "--nonblocking",
                              "--output", os.path.join(profile_dir, f"{n}.txt")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for n, p in procs.items()]


def summarize_profile(path: str, top: int = 15) -> dict:
    """Own and inclusive sample shares per function from py-spy's raw (collapsed) output."""
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            count = int(n)
            total += count
            frames = [fr.rsplit(":", 1)[0] if fr.count(":") > 1 else fr for fr in stack.split(";")]
            # a frame is "func (file:line)": drop the line so a function is one entry
            frames = [fr.split(":")[0] + ")" if "(" in fr and ":" in fr else fr for fr in frames]
            own[frames[-1]] = own.get(frames[-1], 0) + count
            for fr in set(frames):
                incl[fr] = incl.get(fr, 0) + count

    def table(d: dict[str, int]) -> list[list]:
        return [[k, round(100 * v / total, 1)] for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]]
    return {"samples": total, "own_pct": table(own), "inclusive_pct": table(incl)} if total else {"samples": 0}


def run(seconds: float, rate: float, size: int, subs: int, profile_dir: str | None = None,
        env: dict | None = None) -> dict:
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # logs off the disk: measure the hop, not fsync-less disk writes
    with tempfile.TemporaryDirectory(prefix="bench-hop-", dir=shm) as wd:
        cfgs = configs(wd, rate, size, seconds, "[class,eq,'STOCK']", subs)
        procs = {n: NodeProc(c, env=env) for n, c in cfgs.items()}
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
            time.sleep(0.3)
            spies = start_profilers(procs, seconds, profile_dir)
            time.sleep(seconds)
            for sp in spies:
                sp.wait(30)
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
        "cpu_us_per_delivery": round(1e6 * sum(cpu.values()) / len(dl), 2) if dl else None,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "lost": len(pubs) - len(dl),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rate", type=float, default=200_000.0, help="publisher target rate (msgs/s)")
    ap.add_argument("--size", type=int, default=16, help="payload bytes")
    ap.add_argument("--subs", type=int, default=1, help="subscriber clients (all match)")
    ap.add_argument("--rounds", type=int, default=1, help="repeat the measurement (with --bare: pairs)")
    ap.add_argument("--bare", action="store_true", help="also measure the bare transport in each round")
    ap.add_argument("--base", metavar="DIR", help="also run the nodes from the code in DIR, alternated (before/after)")
    ap.add_argument("--profile", metavar="DIR", help="py-spy each node during the workload (raw stacks in DIR)")
    ap.add_argument("--out", default=str(HERE / "results" / "hop.json"))
    a = ap.parse_args()
    codes = {"this": None}
    # the node processes run `python -m testbed.nodes`, which imports from the working directory
    # first: away from any checkout, so PYTHONPATH decides which code they run
    a.out = os.path.abspath(a.out)
    a.profile = os.path.abspath(a.profile) if a.profile else None
    os.chdir(tempfile.gettempdir())
    if a.base:
        base = str(Path(a.base).resolve())
        if not (Path(base) / "testbed" / "__init__.py").exists():
            ap.error(f"--base {a.base}: no testbed/__init__.py there")
        codes = {"base": {"PYTHONPATH": base}, "this": {"PYTHONPATH": str(HERE.parent)}}
    rounds = []
    for i in range(a.rounds):
        r: dict = {}
        for code, env in (codes.items() if i % 2 == 0 else reversed(codes.items())):
            prof = os.path.join(a.profile, code) if a.profile else None
            c = r[code] = {"hop": run(a.seconds, a.rate, a.size, a.subs, prof, env)}
            if a.bare:
                import bench_link  # the transport section of the link benchmark, unchanged
                with tempfile.TemporaryDirectory(prefix="bench-hop-bare-") as wd:
                    c["bare"] = bench_link.bench_throughput(wd, a.seconds, env=env)
                c["hop_over_bare"] = round(c["hop"]["delivered_per_s"] / c["bare"]["msgs_per_s"], 3)
                # the same ratio in CPU: the bare transport's CPU (both processes) per message over
                # the hop's (all three) per delivery -- what the load cannot move much
                c["cpu_bare_over_hop"] = round(c["bare"]["cpu_us_per_msg"] / c["hop"]["cpu_us_per_delivery"], 3)
            print(f"round {i + 1} {code}: hop {c['hop']['delivered_per_s']}/s delivered "
                  f"({c['hop']['delivered_per_broker_cpu_s']} per broker CPU-s, load {c['hop']['load_avg_1m']})"
                  + (f"; bare transport {c['bare']['msgs_per_s']}/s; hop/bare {c['hop_over_bare']}; CPU us per msg "
                     f"hop {c['hop']['cpu_us_per_delivery']} bare {c['bare']['cpu_us_per_msg']}" if a.bare else ""),
                  flush=True)
        rounds.append(r)
    res = dict(rounds[-1]["this"]["hop"])
    res["rounds"] = rounds
    for code in codes:
        pre = "" if code == "this" else "base_"
        res[pre + "median_delivered_per_s"] = statistics.median(r[code]["hop"]["delivered_per_s"] for r in rounds)
        res[pre + "median_delivered_per_broker_cpu_s"] = statistics.median(
            r[code]["hop"]["delivered_per_broker_cpu_s"] or 0 for r in rounds)
        if a.bare:
            res[pre + "median_bare_msgs_per_s"] = statistics.median(r[code]["bare"]["msgs_per_s"] for r in rounds)
            res[pre + "median_hop_over_bare"] = statistics.median(r[code]["hop_over_bare"] for r in rounds)
            res[pre + "median_cpu_bare_over_hop"] = statistics.median(r[code]["cpu_bare_over_hop"] for r in rounds)
        res[pre + "median_cpu_us_per_delivery"] = statistics.median(r[code]["hop"]["cpu_us_per_delivery"]
                                                                   for r in rounds)
    res["cpus"] = os.cpu_count()
    res["python"] = sys.version.split()[0]
    if a.profile:
        res["profile"] = {f"{n} ({code})": summarize_profile(os.path.join(a.profile, code, f"{n}.txt"))
                          for code in codes for n in ("b1", "pubs", "subs")
                          if os.path.exists(os.path.join(a.profile, code, f"{n}.txt"))}
    for k, v in res.items():
        if k not in ("rounds", "profile"):
            print(f"{k:28s} {v}")
    for n, prof in (res.get("profile") or {}).items():
        print(f"profile {n}: {prof['samples']} samples")
        for title in ("own_pct", "inclusive_pct"):
            print(f"  {title}:")
            for fn, pc in prof.get(title, []):
                print(f"    {pc:5.1f}%  {fn}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
