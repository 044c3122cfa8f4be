"""Docker provider benchmarks on a real engine.

    .venv/bin/python benchmarks/bench_docker.py [--sizes 20 50] [--faults 40] [--fault-gap 0.25]

* bring-up (``up`` until every container answers ping) and teardown (``down``) of N
  echo containers;
* process-fault timing under Docker: crash / restart / pause / resume fired by the
  schedule runner (testbed.faults.schedule.ScheduleRunner) at planned times; p50/p99 of
  ``actual - planned`` (when the runner issued it) and ``done - planned`` (when the engine
  had done it);
* the node image size.

Prints the numbers and writes benchmarks/results/docker.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import pct  # noqa: E402
from testbed.providers.control import Controls, run_secret  # noqa: E402
from testbed.providers.engine import connect  # noqa: E402
from testbed.providers.image import DEFAULT_TAG, ensure_image, image_size  # noqa: E402
from testbed.providers.docker.provider import DockerProvider  # noqa: E402
from testbed.runs.rundir import RunDir  # noqa: E402
from testbed.topology.plan import Action, HostPlan, LinkSpec, NodePlan, Plan  # noqa: E402


def ring_plan(n: int, actions: tuple[Action, ...] = (), name: str = "bench") -> Plan:
    names = [f"b{i}" for i in range(n)]
    nodes = {x: NodePlan(x, "node", "broker", "s1", "h1",
                         neighbors=tuple({names[(i - 1) % n], names[(i + 1) % n]} - {x}))
             for i, x in enumerate(names)}
    links = {f"{a}->{b}": LinkSpec(delay_ms=1.0) for a in names for b in names if a != b}
    return Plan(name=name, protocol="echo", provider="docker", duration_s=60.0, seed=1, sites=("s1",),
                hosts={"h1": HostPlan("h1")}, nodes=nodes, links=links, actions=actions,
                params={"rate_per_s": 5, "log_each": False})


def new_run(root: Path, plan: Plan, tag: str) -> RunDir:
    run = RunDir.create(root, f"{plan.name}-{tag}-{time.strftime('%H%M%S')}")
    run.write("plan.json", plan.to_dict())
    return run


def bench_up_down(n: int, root: Path, image: str) -> dict:
    plan = ring_plan(n)
    run = new_run(root, plan, f"n{n}")
    p = DockerProvider(image)
    t = time.monotonic()
    try:
        p.up(plan, run, lambda m: None)
        up_s = time.monotonic() - t
    finally:
        t = time.monotonic()
        p.down(run, lambda m: None)
        down_s = time.monotonic() - t
    return {"containers": n, "up_s": round(up_s, 3), "down_s": round(down_s, 3)}


def fault_actions(count: int, nodes: int, gap: float, start: float = 1.0) -> tuple[Action, ...]:
    """Cycles of crash -> restart and pause -> resume on rotating nodes, ``gap`` apart."""
    acts = []
    t = start
    i = 0
    while len(acts) < count:
        node = f"b{i % nodes}"
        ops = ("crash", "restart") if i % 2 == 0 else ("pause", "resume")
        for op in ops:
            acts.append(Action(at_s=round(t, 3), op=op, fault=len(acts), target=(node,)))
            t += gap
        i += 1
    return tuple(acts[:count])


def bench_faults(count: int, gap: float, root: Path, image: str) -> dict:
    from testbed.faults.schedule import ScheduleRunner

    nodes = 6
    actions = fault_actions(count, nodes, gap)
    plan = ring_plan(nodes, actions, name="faults")
    run = new_run(root, plan, "faults")
    p = DockerProvider(image)
    dep = p.up(plan, run, lambda m: None)
    controls = Controls(dep, secret=run_secret(run), origin="schedule")
    try:
        runner = ScheduleRunner(run, p, dep, controls)
        runner.start_workload(duration_s=actions[-1].at_s + 2.0)
        timeline = runner.run_actions(list(actions), until_s=actions[-1].at_s + 0.5)
    finally:
        controls.close()
        p.down(run, lambda m: None)
    out: dict = {"actions": len(timeline), "gap_s": gap,
                 "status": {s: sum(1 for e in timeline if e["status"] == s) for s in {e["status"] for e in timeline}}}
    for op in ("crash", "restart", "pause", "resume", "all"):
        es = [e for e in timeline if (op == "all" or e["op"] == op) and e["status"] == "done"]
        if not es:
            continue
        issue = [(e["actual_s"] - e["planned_s"]) * 1e3 for e in es]
        done = [(e["done_s"] - e["planned_s"]) * 1e3 for e in es]
        out[op] = {"n": len(es),
                   "issue_ms_p50": round(pct(issue, 50), 3), "issue_ms_p99": round(pct(issue, 99), 3),
                   "done_ms_p50": round(pct(done, 50), 3), "done_ms_p99": round(pct(done, 99), 3),
                   "done_ms_mean": round(statistics.fmean(done), 3)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 50])
    ap.add_argument("--faults", type=int, default=40)
    ap.add_argument("--fault-gap", type=float, default=1.0)
    ap.add_argument("--image", default=DEFAULT_TAG)
    a = ap.parse_args()
    client = connect()
    image = ensure_image(client, a.image, print, offline_base=True)
    res: dict = {"engine": client.version().get("Version"), "cpus": __import__("os").cpu_count(),
                 "python": platform.python_version(), "image": image,
                 "image_size_mb": round(image_size(client, image) / 1e6, 1), "up_down": [], "faults": None}
    print(f"node image {image}: {res['image_size_mb']} MB")
    with tempfile.TemporaryDirectory(prefix="bench-docker-") as tmp:
        root = Path(tmp)
        for n in a.sizes:
            r = bench_up_down(n, root, image)
            res["up_down"].append(r)
            print(f"{n:4d} containers: up {r['up_s']:.2f} s, down {r['down_s']:.2f} s")
        if a.faults:
            f = bench_faults(a.faults, a.fault_gap, root, image)
            res["faults"] = f
            print(f"process faults ({f['actions']} actions, {f['gap_s']} s apart, status {f['status']}):")
            for op in ("crash", "restart", "pause", "resume", "all"):
                if op in f:
                    x = f[op]
                    print(f"  {op:8s} n={x['n']:3d} actual-planned p50 {x['issue_ms_p50']:.2f} ms "
                          f"p99 {x['issue_ms_p99']:.2f} ms | done-planned p50 {x['done_ms_p50']:.1f} ms "
                          f"p99 {x['done_ms_p99']:.1f} ms")
    out = HERE / "results" / "docker.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
