"""What a plan asks of a provider's CPU/memory limits (docs/topology.md, *Capacity*), shared by
the backends: which processes have a limit, the topology key to name when one cannot be enforced,
the limits as plain data for the cgroup module (:mod:`testbed.providers.hostside.cgroups`), and
the refusal of a host's joint limit where each process is limited on its own (containers).
Pure: values in, values out."""

from __future__ import annotations

from testbed.errors import ProviderError
from testbed.topology.plan import Plan


def limited(plan: Plan, nodes: set[str] | None = None) -> bool:
    """Whether any process of the plan (of ``nodes``) has a limit (or a throttle fault will give it one)."""
    return any(needs(plan, nodes))


def needs(plan: Plan, nodes: set[str] | None = None) -> tuple[bool, bool]:
    """(cpu, memory): whether the plan's processes (those in ``nodes``, when given) use each controller."""
    ns = [p for n, p in plan.nodes.items() if nodes is None or n in nodes]
    cpu = (any(p.cpu is not None for p in ns)
           or any(a.op == "throttle" and (nodes is None or set(a.target) & nodes) for a in plan.actions))
    mem = any(p.memory_bytes is not None for p in ns)
    return cpu, mem


def key_of(plan: Plan, what: str, nodes: set[str] | None = None) -> str:
    """The topology key that asks for ``what`` (cpu|memory), for an error message (among the
    processes ``nodes`` and their hosts, when given)."""
    attr = "cpu" if what == "cpu" else "memory_bytes"
    hosts = None if nodes is None else {plan.nodes[n].host for n in nodes}
    for h, hp in plan.hosts.items():
        if getattr(hp, attr) is not None and (hosts is None or h in hosts):
            return f"hosts.{h}.{what}"
    for n, np in plan.nodes.items():
        if np.kind == "node" and getattr(np, attr) is not None and (nodes is None or n in nodes):
            return f"nodes.{n}.{what}"
    if what == "cpu":
        for a in plan.actions:
            if a.op == "throttle" and (nodes is None or set(a.target) & nodes):
                return f"faults[{a.fault}].throttle"
    return what


def spec(plan: Plan, nodes: set[str] | None = None) -> dict:
    """The limits of the plan's processes (those in ``nodes``) as plain (JSON) data:
    ``{"hosts": {host: [cores, bytes]}, "nodes": {process: [host, cores, bytes]}, "cpu": bool,
    "memory": bool}`` (None: no limit; ``cpu``/``memory``: whether the controller is used)."""
    cpu, mem = needs(plan, nodes)
    ns = {n: [p.host, p.cpu, p.memory_bytes] for n, p in plan.nodes.items() if nodes is None or n in nodes}
    hs = {h: [hp.cpu, hp.memory_bytes] for h, hp in plan.hosts.items() if any(v[0] == h for v in ns.values())}
    return {"hosts": hs, "nodes": ns, "cpu": cpu, "memory": mem}


def refuse_joint_limits(plan: Plan, hosts: set[str] | None, what_limits: str) -> None:
    """A host's ``cpu``/``memory`` is for its processes together; where each process is limited
    on its own (a container's NanoCpus/Memory), a limited host with more than one process is
    refused rather than run without its joint limit (give the limits per node). ``hosts``: the
    hosts this applies to (None: all); ``what_limits``: who limits each container, for the message."""
    for h, hp in plan.hosts.items():
        if hosts is not None and h not in hosts:
            continue
        procs_on = [n for n, p in plan.nodes.items() if p.host == h]
        for key, v in (("cpu", hp.cpu), ("memory", hp.memory_bytes)):
            if v is not None and len(procs_on) > 1:
                raise ProviderError(
                    f"hosts.{h}.{key}: {what_limits} limits each container, not a host's "
                    f"{len(procs_on)} processes together; give the limit per node (nodes.<n>.{key})")
