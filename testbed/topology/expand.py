"""Topology -> Plan: every process, every directed link, every primitive fault action.

Pure: values in, values out. ``plans(path)`` is the stable entry point for the
CLI (``testbed validate`` / ``up`` / ``run``): one Plan per sweep point x repeat.

Link resolution for a directed pair ``src->dst`` (see docs/topology.md):

1. ``LinkSpec()`` (no delay, no loss, unlimited) with ``links.default`` on top;
2. every ``links.rules`` entry that covers the pair, in file order, each
   overriding only the keys it gives;
3. for a client process and one of its attach nodes (both directions), when
   ``links.clients`` is given: ``links.default`` + ``links.clients``, then the
   ``nodes:`` rules naming exactly that pair. Client processes and nodes they
   are not attached to use step 1-2 (the client process is in its group's site).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from testbed.topology.plan import Action, ClientGroupPlan, HostPlan, LinkSpec, NodePlan, Plan
from testbed.topology.schema import Fault, LinkSelector, Topology

DEFAULT_HOST = "localhost"


def expand(topo: Topology, *, provider_override: str | None = None,
           point: dict[str, Any] | None = None, repeat_index: int = 0) -> Plan:
    """The resolved Plan of one validated topology."""
    hosts = resolve_hosts(topo)
    nodes = resolve_processes(topo, hosts)
    links = resolve_links(topo, nodes)
    actions = fault_actions(topo, nodes, links)
    params = topo.protocol_params.model_dump() if topo.protocol_params is not None else {}
    params, derived = derive_params(topo, params)
    placement = (topo.protocol_placement.model_dump(exclude_none=True)
                 if topo.protocol_placement is not None else {})
    return Plan(
        name=topo.name,
        protocol=topo.protocol,
        provider=provider_override or topo.provider or "local",
        duration_s=topo.duration,
        seed=topo.seed,
        sites=tuple(topo.sites),
        hosts=hosts,
        nodes=nodes,
        links=links,
        actions=tuple(actions),
        params=params,
        derived=derived,
        placement=placement,
        point=dict(point if point is not None else topo.point),
        repeat_index=repeat_index,
        source_path=topo.path,
        source_text=topo.source_text,
        rendered_text=topo.rendered_text,
    )


def derive_params(topo: Topology, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The protocol's ``derive(topology)`` hook applied to the params the file leaves out:
    (params, {param: why}). A value the user wrote is never replaced."""
    from testbed.topology.protocols import PROTOCOLS

    mod = PROTOCOLS.get(topo.protocol)
    hook = getattr(mod, "derive", None)
    if hook is None or topo.protocol_params is None:
        return params, {}
    given = set(topo.protocol_params.model_fields_set)
    out, why = dict(params), {}
    for key, (value, reason) in hook(topo).items():
        if key in out and key not in given:
            out[key], why[key] = value, reason
    return out, why


# --------------------------------------------------------------------------- processes


def resolve_hosts(topo: Topology) -> dict[str, HostPlan]:
    if not topo.hosts:
        return {DEFAULT_HOST: HostPlan(name=DEFAULT_HOST)}
    return {n: HostPlan(name=n, address=h.address, user=h.user, site=h.site, port=h.port,
                        key=h.key, docker=h.docker, become=h.become,
                        runtime=h.runtime, cpu=h.cpu, memory_bytes=h.memory)
            for n, h in topo.hosts.items()}


def _default_host(hosts: dict[str, HostPlan], site: str) -> str:
    for name, h in hosts.items():
        if h.site == site:
            return name
    return next(iter(hosts))


def resolve_processes(topo: Topology, hosts: dict[str, HostPlan]) -> dict[str, NodePlan]:
    adj: dict[str, list[str]] = {n: list(node.neighbors) for n, node in topo.nodes.items()}
    for n, node in topo.nodes.items():
        for nb in node.neighbors:
            if n not in adj[nb]:
                adj[nb].append(n)
    out: dict[str, NodePlan] = {}
    for n, node in topo.nodes.items():
        host = node.host or _default_host(hosts, node.site)
        h = hosts.get(host)
        out[n] = NodePlan(name=n, kind="node", role=node.role, site=node.site, host=host,
                          neighbors=tuple(adj[n]), cell=node.cell,
                          cpu=node.cpu if node.cpu is not None else (h.cpu if h else None),
                          memory_bytes=node.memory if node.memory is not None else (h.memory_bytes if h else None),
                          service=({"mean_s": node.service.mean, "distribution": node.service.distribution}
                                   if node.service is not None else None))
    for c, g in topo.clients.items():
        first = out[g.attach_list[0]]
        cp = topo.client_params(c)
        group = ClientGroupPlan(
            name=c, role=g.role, count=g.count, attach=tuple(g.attach_list),
            rate_per_s=g.rate, size_bytes=g.size, filter=g.filter,
            extra=cp.model_dump() if cp is not None else {},
        )
        site = g.site or first.site
        host = g.host or (first.host if g.site in (None, first.site) else _default_host(hosts, site))
        h = hosts.get(host)
        out[c] = NodePlan(name=c, kind="clients", role=g.role, site=site, host=host, clients=group,
                          cpu=h.cpu if h else None, memory_bytes=h.memory_bytes if h else None)
    return out


# --------------------------------------------------------------------------- links


def key(src: str, dst: str) -> str:
    return f"{src}->{dst}"


class _Merger:
    """``spec.merged(**over)`` memoised: many pairs share one spec object (LinkSpec is frozen)."""

    def __init__(self) -> None:
        # keyed by id(spec): the cache keeps every spec it saw alive, so ids stay unique
        self._cache: dict[tuple[int, tuple], tuple[LinkSpec, LinkSpec]] = {}

    def __call__(self, spec: LinkSpec, over: dict[str, Any]) -> LinkSpec:
        k = (id(spec), tuple(over.items()))
        hit = self._cache.get(k)
        if hit is None:
            hit = self._cache[k] = (spec, spec.merged(**over))
        return hit[1]


def selector_pairs(sel: LinkSelector, nodes: dict[str, NodePlan]) -> list[tuple[str, str]]:
    """Directed pairs a ``sites:``/``nodes:`` selector covers (both directions)."""
    if sel.nodes is not None:
        a, b = sel.nodes
        return [(a, b), (b, a)]
    a = sel.sites[0]
    b = sel.sites[-1]
    names = list(nodes)
    if a == b:
        inside = [n for n in names if nodes[n].site == a]
        return [(x, y) for x in inside for y in inside if x != y]
    left = [n for n in names if nodes[n].site == a]
    right = [n for n in names if nodes[n].site == b]
    return [(x, y) for x in left for y in right] + [(y, x) for x in left for y in right]


def resolve_links(topo: Topology, nodes: dict[str, NodePlan]) -> dict[str, LinkSpec]:
    merge = _Merger()
    base = LinkSpec().merged(**topo.links.default.overrides())
    specs: dict[str, LinkSpec] = {key(a, b): base for a in nodes for b in nodes if a != b}
    for rule in topo.links.rules:
        over = rule.overrides()
        for a, b in selector_pairs(rule, nodes):
            k = key(a, b)
            specs[k] = merge(specs[k], over)
    if topo.links.clients is not None:
        client_base = base.merged(**topo.links.clients.overrides())
        for c, g in topo.clients.items():
            for a in g.attach_list:
                for pair in ((c, a), (a, c)):
                    spec = client_base
                    for rule in topo.links.rules:
                        if rule.nodes is not None and set(rule.nodes) == {c, a}:
                            spec = merge(spec, rule.overrides())
                    specs[key(*pair)] = spec
    return specs


# --------------------------------------------------------------------------- faults


def _source(raw: Any) -> str:
    if isinstance(raw, dict):
        return "{" + ", ".join(f"{k}: {_source(v)}" for k, v in raw.items()) + "}"
    if isinstance(raw, list):
        return "[" + ", ".join(_source(v) for v in raw) + "]"
    return str(raw)


def resolve_group(names: Iterable[str], topo: Topology, nodes: dict[str, NodePlan]) -> tuple[str, ...]:
    """Sites and process names -> processes (a site means every process in it, clients included)."""
    out: list[str] = []
    for name in names:
        members = [n for n in nodes if nodes[n].site == name] if name in topo.sites else [name]
        for m in members:
            if m not in out:
                out.append(m)
    return tuple(out)


def fault_actions(topo: Topology, nodes: dict[str, NodePlan], links: dict[str, LinkSpec]) -> list[Action]:
    """Every ``faults`` entry as primitive Actions, sorted stably by time."""
    duration = topo.duration
    raw_faults = topo._data.get("faults", []) if topo._data is not None else []
    current = dict(links)  # link specs as changed by earlier set_links
    merge = _Merger()
    order = sorted(range(len(topo.faults)), key=lambda i: topo.faults[i].at)
    # crash windows end at the matching restart (or the end of the run)
    crash_end: dict[int, float] = {}
    open_crash: dict[str, int] = {}
    for i in order:
        f = topo.faults[i]
        if f.crash is not None:
            open_crash[f.crash] = i
        elif f.restart is not None and f.restart in open_crash:
            crash_end[open_crash.pop(f.restart)] = f.at
    crash_times: dict[str, list[float]] = {}
    for f in topo.faults:
        if f.crash is not None:
            crash_times.setdefault(f.crash, []).append(f.at)

    def crash_within(node: str, start: float, stop: float) -> float | None:
        """The first crash of ``node`` in (start, stop]: it ends a stall or pause early."""
        hits = [t for t in crash_times.get(node, []) if start < t <= stop]
        return min(hits) if hits else None

    actions: list[Action] = []
    for i in order:  # set_links accumulate in time order
        f: Fault = topo.faults[i]
        src = _source(raw_faults[i]) if i < len(raw_faults) else ""
        at = f.at
        end = min(at + f.for_, duration) if f.for_ is not None else duration
        kind = f.kind

        def act(t: float, op: str, window: tuple[float, float], **kw: Any) -> None:
            actions.append(Action(at_s=t, op=op, fault=i, window=window, source=src, **kw))

        if kind in ("stall", "pause"):
            target = (getattr(f, kind),)
            undo = "unstall" if kind == "stall" else "resume"
            crash = crash_within(target[0], at, end)
            if crash is not None:
                # a crash during (or at the end of) the window ends it: no unstall/resume, and
                # what a stall held is lost with the process (the Gryphon paper's stall-then-fail)
                act(at, kind, (at, crash), target=target)
            else:
                act(at, kind, (at, end), target=target)
                if f.for_ is not None:
                    act(at + f.for_, undo, (at, end), target=target)
        elif kind == "crash":
            act(at, "crash", (at, crash_end.get(i, duration)), target=(f.crash,))
        elif kind == "restart":
            act(at, "restart", (at, at), target=(f.restart,))
        elif kind == "cut":
            target = tuple(f.cut)
            act(at, "cut", (at, end), target=target, close=bool(f.close))
            if f.for_ is not None:
                act(at + f.for_, "heal", (at, end), target=target)
        elif kind == "partition":
            groups = tuple(resolve_group(g, topo, nodes) for g in f.partition)
            act(at, "partition", (at, end), groups=groups)
            if f.for_ is not None:
                act(at + f.for_, "heal_partition", (at, end), groups=groups)
        elif kind == "throttle":
            target = (f.throttle,)
            act(at, "throttle", (at, end), target=target, cpu=f.cpu)
            if f.for_ is not None:
                act(at + f.for_, "unthrottle", (at, end), target=target, cpu=nodes[f.throttle].cpu)
        elif kind == "set_link":
            over = f.set_link.overrides()
            changed: dict[str, LinkSpec] = {}
            for a, b in selector_pairs(f.set_link, nodes):
                k = key(a, b)
                current[k] = merge(current[k], over)
                changed[k] = current[k]
            act(at, "set_link", (at, at), links=changed)
        elif f.protocol_action:
            pc = f._call  # the protocol's ProtocolCall, made by the loader (or testbed inject)
            act(at, kind, (at, end if f.for_ is not None else at), target=tuple(pc.targets),
                call={"op": pc.op, "args": dict(pc.args), "any": pc.any_ok, "text": pc.text})
    # At equal times: the ends of windows first (unstall, resume, heal, heal_partition),
    # then everything else in file order of the faults.
    actions.sort(key=lambda a: (a.at_s, 0 if a.op in UNDO_OPS else 1, a.fault))
    return actions


UNDO_OPS = ("unstall", "resume", "heal", "heal_partition", "unthrottle")


def crash_windows(plan: Plan) -> dict[str, list[tuple[float, float]]]:
    """node -> [(crash, restart-or-end)] (handy for analysis and display)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for a in plan.actions:
        if a.op == "crash":
            out.setdefault(a.target[0], []).append(a.window)
    return out


__all__ = ["expand", "resolve_hosts", "resolve_processes", "resolve_links", "selector_pairs", "fault_actions", "resolve_group",
           "crash_windows", "DEFAULT_HOST"]
