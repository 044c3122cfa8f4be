"""A broker's delivered msgs/s against its CPU share: does the share scale capacity as expected?

    .venv/bin/python benchmarks/bench_capacity.py [--shares 0.05,0.1,0.2,0.4,0.7,1.0,none] [--seconds 6]
                                                  [--rate 4000] [--provider local]

Each point is a real run (``testbed run``, no analysis) of one broker ``b1`` with ``cpu: <share>``
(``none``: no limit), two publisher processes (4 logical publishers at ``--rate`` each) and four
subscriber processes, each matching every publication, all attached to ``b1`` (one hop, a fan-out
of 4: the broker's work per publication is the matching and four sends). Measured:

* delivered msgs/s: the subscribers' ``deliver`` lines between 1 s after the workload start and
  its end (count / seconds; 4 per publication forwarded);
* the broker's CPU use: from its own ``cpu`` lines over the same span (cores);
* the kernel's count of CFS periods in which the broker's cgroup was throttled (local provider);
* msgs per broker-CPU-second: delivered msgs/s / cores used.

Prints one line per share and writes benchmarks/results/capacity.json. The machine is shared:
write down its load average (printed) beside the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from testbed import api  # noqa: E402

TOPOLOGY = """\
version: 1
name: bench-capacity
protocol: pubsub
duration: {seconds}s
seed: 1
sites:
  s1: {{}}
nodes:
  b1: {{role: broker, site: s1{cpu}}}
clients:
  pub1: {{role: publisher, count: 4, attach: b1, rate: {rate}/s, size: 100B}}
  pub2: {{role: publisher, count: 4, attach: b1, rate: {rate}/s, size: 100B}}
  sub1: {{role: subscriber, count: 1, attach: b1, filter: "[class,eq,'STOCK']"}}
  sub2: {{role: subscriber, count: 1, attach: b1, filter: "[class,eq,'STOCK']"}}
  sub3: {{role: subscriber, count: 1, attach: b1, filter: "[class,eq,'STOCK']"}}
  sub4: {{role: subscriber, count: 1, attach: b1, filter: "[class,eq,'STOCK']"}}
links:
  default: {{delay: 0ms}}
"""


PUBS = ("pub1", "pub2")
SUBS = ("sub1", "sub2", "sub3", "sub4")


def measure(run_dir: Path, seconds: float) -> dict:
    m = json.loads((run_dir / "manifest.json").read_text())
    t0 = m["t0_wall_ns"]
    lo, hi = t0 + 1_000_000_000, t0 + int(seconds * 1e9)
    delivered = 0
    for sub in SUBS:
        for line in (run_dir / "logs" / f"{sub}.jsonl").open():
            if '"ev":"deliver"' in line:
                t = json.loads(line)["t"]
                delivered += lo <= t < hi
    published = sum(1 for pub in PUBS for line in (run_dir / "logs" / f"{pub}.jsonl").open()
                    if '"ev":"publish"' in line and lo <= json.loads(line)["t"] < hi)
    cpu = [json.loads(line) for line in (run_dir / "logs" / "b1.jsonl").open() if '"ev":"cpu"' in line]
    inside = [e for e in cpu if lo - 500_000_000 <= e["t"] <= hi + 500_000_000]
    cores = None
    if len(inside) >= 2:
        a, b = inside[0], inside[-1]
        cores = ((b["user_s"] + b["sys_s"]) - (a["user_s"] + a["sys_s"])) / ((b["m"] - a["m"]) / 1e9)
    span = (hi - lo) / 1e9
    st = (m.get("cgroup_stats") or {}).get("b1") or {}
    return {"delivered_per_s": delivered / span, "published_per_s": published / span, "broker_cores": cores,
            "nr_periods": st.get("nr_periods"), "nr_throttled": st.get("nr_throttled"),
            "throttled_s": st.get("throttled_s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shares", default="0.05,0.1,0.2,0.4,0.7,1.0,none")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--rate", type=float, default=4000.0, help="per logical publisher (4 of them)")
    ap.add_argument("--provider", default="local")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp:
        for share in args.shares.split(","):
            cpu = "" if share == "none" else f", cpu: {float(share)}"
            topo = Path(tmp) / f"cap-{share}.yaml"
            topo.write_text(TOPOLOGY.format(seconds=int(args.seconds), cpu=cpu, rate=int(args.rate)))
            load_before = os.getloadavg()[0]
            (rd,) = api.run(str(topo), runs_dir=str(Path(tmp) / "runs"), provider=args.provider, analyze=False)
            r = {"share": None if share == "none" else float(share), "load_1m_before": load_before,
                 **measure(rd.path, args.seconds)}
            results.append(r)
            per_cpu = (r["delivered_per_s"] / r["broker_cores"]) if r["broker_cores"] else float("nan")
            print(f"share {share:>5}  delivered {r['delivered_per_s']:8.0f} msgs/s  published {r['published_per_s']:8.0f}/s  "
                  f"broker {r['broker_cores'] or 0:5.3f} cores  {per_cpu:7.0f} msgs/CPU-s  "
                  f"throttled {r['nr_throttled']}/{r['nr_periods']} periods  load {load_before:.1f}", flush=True)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "capacity.json").write_text(json.dumps({"provider": args.provider, "seconds": args.seconds,
                                                   "rate": args.rate, "cpus": os.cpu_count(), "results": results},
                                                  indent=1))
    print(f"wrote {out / 'capacity.json'}")


if __name__ == "__main__":
    main()
