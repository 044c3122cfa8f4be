"""Ansible provider benchmark on three real SSH hosts (sshd containers, real Ansible).

    .venv/bin/python benchmarks/bench_ansible.py [--faults 30] [--duration 20] [--analyze] [--containers]

A pubsub topology of 15 processes (10 brokers over 3 sites + 5 client groups), one site
per host, cross-host delays 40 ms; a schedule of crash/restart plus ``--faults`` short
pauses spread over every host. Measures:

* ``up`` on 3 hosts with 15 nodes (prepare / deploy / start / ready, from state.json);
* fault timing across hosts: p50/p99 of ``actual - planned`` (the runner issued it) and
  ``done - planned`` (the host's agent had done it), per op;
* the clock-offset estimate per host and its uncertainty (half the minimum RTT);
* ``down`` (graceful stop, collect, teardown).

``--containers``: the hosts have Docker engines of their own (``testbed-sshhost-docker``) and
every node is a container there; two runs, the first ships the node image (docker save, copy,
docker load on each host), the second finds it in place. Results per run.

Needs a Docker engine and the host images (``bash .ci/ssh-setup.sh``). Prints the numbers
and writes benchmarks/results/ansible.json (ansible-containers.json with ``--containers``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import pct  # noqa: E402
from testbed import api  # noqa: E402
from testbed.testing.testhosts import HOSTS, USER, SSHHosts  # noqa: E402


def topology(faults: int, duration: float) -> str:
    sites = ("ny", "rome", "tokyo")
    hosts = "".join(f'  {h}: {{address: "{{{{ {h}_addr }}}}", user: {USER}, key: "{{{{ key }}}}", site: {s}}}\n'
                    for h, s in zip(HOSTS, sites))
    # b1 root in ny; b2..b10 in a tree over the three sites
    nodes = {"b1": ("ny", None), "b2": ("ny", "b1"), "b3": ("rome", "b1"), "b4": ("rome", "b3"),
             "b5": ("tokyo", "b1"), "b6": ("tokyo", "b5"), "b7": ("ny", "b2"), "b8": ("rome", "b4"),
             "b9": ("tokyo", "b6"), "b10": ("rome", "b3")}
    node_lines = "".join(f"  {n}: {{role: broker, site: {s}" + (f", neighbors: [{p}]" if p else "") + "}\n"
                         for n, (s, p) in nodes.items())
    brokers = [n for n in nodes if n not in ("b8",)]  # b8 crashes: no client attaches to it
    fault_lines = ["  - {at: 3s, crash: b8}", "  - {at: 6s, restart: b8}"]
    span = duration - 4.0
    for i in range(faults):
        at = 2.0 + span * i / max(1, faults)
        target = brokers[i % len(brokers)]
        fault_lines.append(f"  - {{at: {at:.3f}s, pause: {target}, for: 0.3s}}")
    return f"""version: 1
name: bench-ansible
protocol: pubsub
duration: {duration:g}s
seed: 3
sites: {{ny: {{}}, rome: {{}}, tokyo: {{}}}}
hosts:
{hosts}
nodes:
{node_lines}
clients:
  pub-a: {{role: publisher, count: 2, attach: b7, rate: 20/s, size: 100B, params: {{attrs: {{class: STOCK, price: "uniform(0,100)"}}}}}}
  pub-b: {{role: publisher, count: 2, attach: b9, rate: 10/s, size: 100B, params: {{attrs: {{class: BOND}}}}}}
  sub-a: {{role: subscriber, count: 3, attach: b10, filter: "[class,eq,'STOCK']"}}
  sub-b: {{role: subscriber, count: 2, attach: b2, filter: "[class,eq,'BOND']"}}
  sub-c: {{role: subscriber, count: 2, attach: b6, filter: "[class,eq,'STOCK'],[price,<,50]"}}
links:
  default: {{delay: 2ms}}
  rules:
    - {{sites: [ny, rome], delay: 40ms, jitter: 2ms}}
    - {{sites: [ny, tokyo], delay: 40ms, jitter: 2ms}}
    - {{sites: [rome, tokyo], delay: 40ms, jitter: 2ms}}
  clients: {{delay: 1ms}}
faults:
{chr(10).join(fault_lines)}
params: {{covering: off, settle: 1s}}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--faults", type=int, default=30)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--analyze", action="store_true", help="also run the Spark analysis and the checks")
    ap.add_argument("--containers", action="store_true",
                    help="hosts with their own Docker engine; a container per node; two runs")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a.out = a.out or str(HERE / "results" / ("ansible-containers.json" if a.containers else "ansible.json"))
    tmp = Path(tempfile.mkdtemp(prefix="bench-ansible-"))
    hosts = SSHHosts(tmp, docker=HOSTS if a.containers else ())
    t = time.monotonic()
    hosts.start()
    hosts_s = time.monotonic() - t
    os.environ["TESTBED_KNOWN_HOSTS"] = str(hosts.known_hosts)
    os.environ["TESTBED_ANSIBLE_REGISTRY"] = str(tmp / "registry.json")
    os.environ["TESTBED_CACHE"] = str(tmp / "cache")
    topo = tmp / "bench.yaml"
    topo.write_text(topology(a.faults, a.duration))
    set_vars = {**{f"{h}_addr": addr for h, addr in hosts.addresses.items()}, "key": str(hosts.key)}
    results = []
    try:
        for _ in range(2 if a.containers else 1):
            results.append(one_run(a, topo, set_vars, tmp, hosts_s))
    finally:
        hosts.stop()
    result = results[0] if len(results) == 1 else {"runs": results}
    print(json.dumps(result, indent=1))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    for r in results:
        print(f"up on {r['hosts']} hosts with {r['nodes']} nodes ({r['runtimes']}): {r['up_s']:.1f}s "
              f"(phases {', '.join(f'{k} {v:.1f}' for k, v in (r['up_phases_s'] or {}).items())}); "
              f"fault done-planned p50 {r['fault_done_minus_planned_ms']['p50']:.1f} ms, "
              f"p99 {r['fault_done_minus_planned_ms']['p99']:.1f} ms; clock uncertainty "
              + ", ".join(f"{h} {v['uncertainty']:.0f} us" for h, v in r["clock_offsets_us"].items()))
    return 0


def one_run(a: argparse.Namespace, topo: Path, set_vars: dict[str, str], tmp: Path, hosts_s: float) -> dict:
    (rd,) = api.run(str(topo), set_vars=set_vars, provider="ansible", runs_dir=str(tmp / "runs"),
                    analyze=a.analyze, progress=lambda s: print("  ", s, flush=True))
    m, st = rd.manifest, rd.state
    tl = m["timeline"]
    by_op: dict[str, dict[str, float]] = {}
    for op in sorted({e["op"] for e in tl}):
        es = [e for e in tl if e["op"] == op and e["status"] == "done"]
        if es:
            by_op[op] = {"n": len(es),
                         "issue_p50_ms": pct([(e["actual_s"] - e["planned_s"]) * 1e3 for e in es], 50),
                         "done_p50_ms": pct([(e["done_s"] - e["planned_s"]) * 1e3 for e in es], 50),
                         "done_p99_ms": pct([(e["done_s"] - e["planned_s"]) * 1e3 for e in es], 99)}
    done = [e for e in tl if e["status"] == "done"]
    issue = [(e["actual_s"] - e["planned_s"]) * 1e3 for e in done]
    finish = [(e["done_s"] - e["planned_s"]) * 1e3 for e in done]
    offsets = m.get("clock_offsets", {})
    result = {
        "hosts": len(HOSTS), "nodes": len(rd.plan().nodes), "actions": len(tl),
        "actions_done": len(done),
        "up_s": m.get("up_s"), "up_phases_s": st.get("timings"), "down_s": m.get("down_s"),
        "fault_issue_minus_planned_ms": {"p50": pct(issue, 50), "p99": pct(issue, 99),
                                         "max": max(issue)},
        "fault_done_minus_planned_ms": {"p50": pct(finish, 50), "p99": pct(finish, 99),
                                        "max": max(finish), "mean": statistics.mean(finish)},
        "by_op": by_op,
        "clock_offsets_us": {h: {"offset": o["offset_ns"] / 1e3, "uncertainty": o["uncertainty_ns"] / 1e3,
                                 "rtt": o["rtt_ns"] / 1e3} for h, o in offsets.items()},
        "host_containers_start_s": hosts_s,
        "runtimes": ",".join(sorted(set((m.get("hosts_runtime") or {}).values()))) or "process",
        "node_image": m.get("node_image"),
        "checks": ({c["name"]: c["passed"] for c in api.run_checks(rd)} if a.analyze else None),
        "machine": {"cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg(), "python": platform.python_version()},
    }
    return result


if __name__ == "__main__":
    sys.exit(main())
