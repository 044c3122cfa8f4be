"""Ordering benchmarks: how many timestamps/s one TM server sustains.

    .venv/bin/python benchmarks/bench_ordering.py [--requests 50000] [--no-real]

1. In-process: one ``TMHost`` holding all 1000 topic managers, subscriptions of 100
   clients x 10 topics (shape 0.349, as topologies/ordering/bench-tm.yaml), then
   CREATE_PUB_TS requests with topics from the same law; each answer is msgpack-encoded
   as the transport would. CPU-bound upper bound of the protocol's own cost.
2. Real processes (unless --no-real): ``topologies/ordering/bench-tm.yaml`` (one TM server,
   one broker, subscriber and publisher processes on loopback) at offered rates of
   2000..20000 requests/s; completed timestamps/s and latency from the client logs.
   The machine is shared (other processes run), so these numbers are noisy lower bounds.

Prints the numbers and writes benchmarks/results/ordering.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import msgpack

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from testbed.protocols.ordering.nodes.core import CREATE_PUB_TS, FILL_IN_SUB_TS, TMHost  # noqa: E402
from testbed.protocols.ordering.nodes.workload import Popularity, client_subscriptions  # noqa: E402


def in_process(requests: int) -> dict:
    host = TMHost("tm1", lambda t: "tm1")
    pop = Popularity(1000, 0.349)
    subs = client_subscriptions(random.Random(1), pop, [f"c-{i}" for i in range(100)], 10)
    for cid, s in subs.items():  # the subscription chains, as FILL_IN_SUB_TS would run them
        host.handle({"k": FILL_IN_SUB_TS, "ts": [x for t in s for x in (t, 0)], "sub": s,
                     "cid": cid, "host": "h", "rid": cid, "to": max(s)})
    rng = random.Random(2)
    topics = [pop.pick(rng) for _ in range(requests)]
    pack = msgpack.Packer(use_bin_type=True).pack
    t0 = time.process_time()
    sizes = 0
    for i, t in enumerate(topics):
        for dst, out in host.handle({"k": CREATE_PUB_TS, "eid": f"p:{i}", "cid": "p", "host": "h",
                                     "T": t, "to": t}):
            sizes += len(pack(out))
    cpu = time.process_time() - t0
    sg = [len(tm.sg) for tm in host.tms.values()]
    return {"requests": requests, "cpu_s": round(cpu, 3), "timestamps_per_cpu_s": round(requests / cpu),
            "mean_answer_bytes": round(sizes / requests, 1), "mean_sg_size_over_tms": round(statistics.mean(sg), 2),
            "local_hops": host.c["local_hops"]}


def real(rates: list[int]) -> list[dict]:
    from testbed import api

    topo = HERE.parent / "topologies" / "ordering" / "bench-tm.yaml"
    rows = []
    for rate in rates:
        [rd] = api.run(str(topo), set_vars={"rate": rate}, runs_dir=str(HERE / "results" / "runs"),
                       analyze=False)
        lat, ts, t0s = [], [], []
        for p in (Path(rd.path) / "logs").glob("p*.jsonl"):
            for line in p.read_text().splitlines():
                if '"o_timestamp"' in line:
                    e = json.loads(line)
                    lat.append(e["latency_ms"])
                    ts.append(e["t"])
                    t0s.append(e["t0"])
        span = (max(ts) - min(t0s)) / 1e9 if len(ts) > 1 else 0  # first request -> last completion
        cpu = None
        for line in (Path(rd.path) / "logs" / "tm1.jsonl").read_text().splitlines():
            if '"ev":"cpu"' in line:
                e = json.loads(line)
                cpu = e["user_s"] + e["sys_s"]
        rows.append({"offered_per_s": rate, "timestamps": len(ts),
                     "throughput_per_s": round(len(ts) / span, 1) if span else None,
                     "latency_mean_ms": round(statistics.mean(lat), 2) if lat else None,
                     "latency_p99_ms": round(sorted(lat)[int(0.99 * (len(lat) - 1))], 2) if lat else None,
                     "tm_cpu_s": cpu, "run": Path(rd.path).name})
        print(f"  offered {rate}/s: {rows[-1]['throughput_per_s']} timestamps/s, "
              f"mean latency {rows[-1]['latency_mean_ms']} ms", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=50000)
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--rates", default="2000,5000,10000,20000")
    a = ap.parse_args()
    res = {"in_process": in_process(a.requests)}
    print("in-process TMHost:", res["in_process"], flush=True)
    if not a.no_real:
        res["real"] = real([int(x) for x in a.rates.split(",")])
        best = max((r["throughput_per_s"] or 0) for r in res["real"])
        res["real_peak_timestamps_per_s"] = best
        print("real TM server process, peak completed timestamps/s:", best)
    out = HERE / "results" / "ordering.json"
    out.write_text(json.dumps(res, indent=1))
    print("wrote", out)


if __name__ == "__main__":
    main()
