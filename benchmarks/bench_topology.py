"""Benchmark the topology layer: render + validate + expand + describe of generated topologies.

    .venv/bin/python benchmarks/bench_topology.py [--brokers 200] [--groups 100] [--quick]

A tree of ``--brokers`` brokers over 4 sites, ``--groups`` client groups (half
publishers, half subscribers), 4 link rules, 20 faults, all generated with the
format's own Jinja2 loop. Reports the seconds of each stage (median of 3), the
number of processes and directed links, and the time to report every error of a
file with one error per broker. Results: benchmarks/results/topology.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testbed.errors import TopologyError  # noqa: E402
from testbed.topology import expand as E  # noqa: E402
from testbed.topology import loader as L  # noqa: E402
from testbed.topology.describe import describe  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "topology.json"

TEMPLATE = """\
version: 1
name: bench-topology
protocol: pubsub
duration: 60s
seed: 1
sites: {a: {}, b: {}, c: {}, d: {}}
nodes:
{% for i in range(brokers) %}
  b{{ i }}: {role: broker, site: {{ "abcd"[i % 4] }}{% if i > 0 %}, neighbors: [b{{ (i - 1) // 3 }}]{% endif %}{% if bad %}, colour: red{% endif %}}
{% endfor %}
clients:
{% for g in range(groups) %}
{% if g % 2 == 0 %}
  p{{ g }}: {role: publisher, count: 10, attach: b{{ g % brokers }}, rate: 5/s, size: 100B}
{% else %}
  s{{ g }}: {role: subscriber, count: 10, attach: [b{{ g % brokers }}], filter: "[class,eq,'STOCK'],[price,<,{{ g }}]"}
{% endif %}
{% endfor %}
links:
  default: {delay: 1ms}
  rules:
    - {sites: [a, b], delay: 40ms, jitter: 4ms}
    - {sites: [c, d], delay: 60ms, jitter: 6ms}
    - {sites: [a], delay: 5ms}
    - {nodes: [b0, b1], delay: 2ms}
  clients: {delay: 1ms, jitter: 0ms}
faults:
{% for k in range(10) %}
  - {at: {{ 2 + k * 5 }}s, stall: b{{ (k + 1) % brokers }}, for: 1s}
  - {at: {{ 3 + k * 5 }}s, set_link: {sites: [a, b], delay: {{ 40 + k }}ms}}
{% endfor %}
"""


def _median(fn, n=3):
    times, out = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def bench(brokers: int, groups: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.yaml"
        path.write_text(TEMPLATE)
        vars_ = {"brokers": brokers, "groups": groups, "bad": False}
        render_s, text = _median(lambda: L.render_text(path, vars_, {}))
        load_s, topo = _median(lambda: L.load_rendered(text, str(path)))
        expand_s, plan = _median(lambda: E.expand(topo))
        describe_s, _ = _median(lambda: describe(plan))
        total_s, _ = _median(lambda: E.plans(path, vars_))

        def bad():
            try:
                L.load(path, {**vars_, "bad": True})
            except TopologyError as e:
                return len(e.problems)
            raise AssertionError("the bad file validated")

        errors_s, n_errors = _median(bad)
    return {
        "brokers": brokers, "client_groups": groups, "processes": len(plan.nodes),
        "directed_links": len(plan.links), "actions": len(plan.actions),
        "render_s": round(render_s, 4), "validate_s": round(load_s, 4), "expand_s": round(expand_s, 4),
        "describe_s": round(describe_s, 4), "plans_total_s": round(total_s, 4),
        "all_errors_s": round(errors_s, 4), "errors_reported": n_errors,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", type=int, default=200)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    a = ap.parse_args()
    sizes = [(20, 10)] if a.quick else [(20, 10), (a.brokers, a.groups)]
    results = [bench(b, g) for b, g in sizes]
    for r in results:
        print(f"brokers {r['brokers']:>4} groups {r['groups'] if 'groups' in r else r['client_groups']:>4} "
              f"processes {r['processes']:>4} links {r['directed_links']:>6}  "
              f"render {r['render_s']:.3f}s validate {r['validate_s']:.3f}s expand {r['expand_s']:.3f}s "
              f"describe {r['describe_s']:.3f}s plans() {r['plans_total_s']:.3f}s  "
              f"{r['errors_reported']} errors in {r['all_errors_s']:.3f}s")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"topology": results}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
