"""An OOM kill under a memory limit, as a crash in the run's timeline (docs/topology.md, Capacity).

The providers learn of an OOM kill from the kernel (the local provider and ansible process hosts:
the cgroup's ``oom_kill`` count; docker and ansible container hosts: the container's
``State.OOMKilled``) when the run comes down; these helpers turn it into timeline entries the
analysis treats like any crash. Pure but for reading a log's tail and :func:`record_stats`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from testbed.topology.units import format_memory

if TYPE_CHECKING:
    from testbed.runs.rundir import RunDir
    from testbed.topology.plan import Plan


def oom_timeline_entries(stats_: dict[str, dict[str, float]], last_t_s: dict[str, float | None],
                         memory: dict[str, int | None], duration_s: float) -> list[dict]:
    """Timeline entries (crashes) for the processes the kernel's OOM killer killed. Pure.

    The time of a kill is not observed: it is the node's last log line (the process logged
    until then; at most the log's flush interval before its death); ``planned_s`` is the same
    (nothing planned it). Fault indices from 2000 (the file's faults are < 1000, injected ones
    from 1000)."""
    out = []
    for i, node in enumerate(sorted(n for n, s in stats_.items() if s.get("oom_kill"))):
        t = last_t_s.get(node)
        t = 0.0 if t is None else max(0.0, t)
        out.append({"fault": 2000 + i, "op": "crash", "target": [node], "groups": [],
                    "planned_s": t, "actual_s": t, "done_s": t, "status": "done",
                    "error": None, "window": [t, duration_s], "oom": True,
                    "source": f"OOM kill under the memory limit {format_memory(memory.get(node))} "
                              f"({int(stats_[node]['oom_kill'])} kill(s))"})
    return out


def last_log_t_s(path: Path, t0_wall_ns: int | None) -> float | None:
    """Seconds from the workload start of the last complete line of a node's log."""
    if t0_wall_ns is None or not path.exists():
        return None
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 65536))
        tail = f.read().splitlines()
    for line in reversed(tail):
        try:
            return (int(json.loads(line)["t"]) - int(t0_wall_ns)) / 1e9
        except (ValueError, KeyError, TypeError):
            continue
    return None


def record_stats(run: "RunDir", plan: "Plan", st: dict[str, dict[str, float]]) -> None:
    """A run's cgroup counts (``{process: {nr_periods, nr_throttled, throttled_s, oom_kill}}``,
    read before its cgroups go) into the manifest's ``cgroup_stats`` (merged with what is there:
    the ansible provider records host by host), and each OOM kill as a crash in the timeline."""
    if not st:
        return
    t0 = run.manifest.get("t0_wall_ns")

    def update(m: dict) -> None:
        merged = {**(m.get("cgroup_stats") or {}), **st}
        m["cgroup_stats"] = merged
        last = {n: last_log_t_s(run.logs_dir / f"{n}.jsonl", t0) for n, s in merged.items() if s.get("oom_kill")}
        entries = oom_timeline_entries(merged, last, {n: p.memory_bytes for n, p in plan.nodes.items()},
                                       plan.duration_s)
        if entries:
            m["timeline"] = [e for e in m.get("timeline") or [] if not e.get("oom")] + entries
    run.modify_manifest(update)
