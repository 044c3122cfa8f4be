"""CPU and memory limits of the local provider's processes: one cgroup per process.

The cgroups themselves (layout, limits, joining, removal, the kernel's counts) are
:mod:`testbed.providers.hostside.cgroups`, the one cgroup module, which the ansible provider also
ships to its hosts. This module adds what needs the plan and the run directory: which limits a
plan asks for, the topology key named when one cannot be enforced, and the counts and OOM kills
written to the manifest at ``down``.
"""

from __future__ import annotations

from testbed.errors import ProviderError
from testbed.providers.capacity import key_of, limited, spec
from testbed.providers.hostside import cgroups as core
from testbed.providers.hostside.cgroups import (  # noqa: F401 - the local provider's cgroup API
    ENTER, PARENT, PERIOD_US, CgroupError, Hierarchy, Refused, detect, node_dirs, oom_kills, root, run_dirs, stats,
    wrap,
)
from testbed.runs.oom import record_stats
from testbed.runs.rundir import RunDir
from testbed.topology.plan import Plan


def _refuse(plan: Plan, what: str, why: str) -> ProviderError:
    return ProviderError(f"{key_of(plan, what)}: the local provider limits {what} with cgroups, "
                         f"and {why}; remove the key or run where cgroups are writable (as root)")


def setup(plan: Plan, run_id: str) -> dict[str, list[str]]:
    """Create the run's cgroups with their limits. -> {process: [cgroup.procs files to join]}.

    Empty when the plan has no limit (no cgroup is made then). Raises ProviderError naming the
    key when a limit is asked for and cannot be enforced here."""
    if not limited(plan):
        return {}
    s = spec(plan)
    try:
        return core.make(run_id, s["hosts"], s["nodes"], s["cpu"], s["memory"])
    except Refused as e:
        raise _refuse(plan, e.what, e.why) from None


def set_cpu(run_id: str, host: str, node: str, cores: float | None) -> None:
    """Change a process's CPU share now (the throttle fault). ProviderError if it has no cgroup."""
    try:
        core.set_cpu(run_id, host, node, cores)
    except CgroupError as e:
        raise ProviderError(str(e), node=node) from None


def remove_run(run_id: str) -> list[str]:
    """Remove a run's cgroups (and kill anything still in them). -> the removed paths."""
    try:
        return core.remove_run(run_id)
    except CgroupError as e:
        raise ProviderError(str(e)) from None


def remove_all() -> list[str]:
    """Every run's cgroups (``testbed wipe``). The ``testbed`` parents stay (empty)."""
    try:
        return core.remove_all()
    except CgroupError as e:
        raise ProviderError(str(e)) from None


def record(run: RunDir) -> None:
    """Before the cgroups go: their counts into the manifest (``cgroup_stats``), and an OOM kill
    of a process as a crash in the timeline (``testbed.runs.oom``)."""
    if not any(d.is_dir() for d in run_dirs(detect(), run.run_id)):
        return
    try:
        plan = run.plan()
    except Exception:  # noqa: BLE001 - a killed `up` may not have written the plan: nothing to record
        return
    record_stats(run, plan, stats(run.run_id, {n: p.host for n, p in plan.nodes.items()}))
