"""A fixed-width, plain-text summary of a Plan (what ``testbed validate`` prints)."""

from __future__ import annotations

from collections import defaultdict

from testbed.topology.plan import Action, LinkSpec, Plan
from testbed.topology.protocols import hosted_clients
from testbed.topology.units import format_cpu, format_link_rate, format_memory, format_ms, format_size, format_time


def link_text(spec: LinkSpec) -> str:
    """``100ms ±10ms normal loss 0.1% 100mbit`` (only what is set)."""
    parts = [format_ms(spec.delay_ms)]
    if spec.jitter_ms:
        parts.append(f"±{format_ms(spec.jitter_ms)} {spec.distribution}")
    if spec.loss:
        parts.append(f"loss {spec.loss * 100:g}%")
    if spec.rate_bps is not None:
        parts.append(format_link_rate(spec.rate_bps))
    if spec.reorder:
        parts.append("reorder")
    if not spec.up:
        parts.append("DOWN")
    return " ".join(parts)


def _endpoint(plan: Plan, name: str) -> str:
    return plan.nodes[name].site  # client processes count in their group's site


def link_classes(plan: Plan) -> list[tuple[str, str, LinkSpec, int]]:
    """Directed links grouped by (site, site, spec); symmetric classes merged.

    Returns (a, b, spec, pairs) with a <= b; ``pairs`` counts unordered pairs when the
    class is symmetric (both directions equal) and directed pairs otherwise (``a -> b``).
    """
    counts: dict[tuple[str, str, LinkSpec], int] = defaultdict(int)
    for k, spec in plan.links.items():
        src, dst = k.split("->")
        counts[(_endpoint(plan, src), _endpoint(plan, dst), spec)] += 1
    out: list[tuple[str, str, LinkSpec, int]] = []
    done: set[tuple[str, str, LinkSpec]] = set()
    for (a, b, spec), n in sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1], link_text(kv[0][2]))):
        if (a, b, spec) in done:
            continue
        rev = counts.get((b, a, spec))
        if a == b:
            out.append((a, b, spec, n // 2 if n % 2 == 0 else n))
            done.add((a, b, spec))
        elif rev == n:
            x, y = sorted((a, b))
            out.append((x, y, spec, n))
            done.update({(a, b, spec), (b, a, spec)})
        else:
            out.append((a, "->" + b, spec, n))
            done.add((a, b, spec))
    return out


def _action_text(a: Action) -> str:
    if a.call:  # a protocol's own action
        what = a.call.get("text") or " ".join(a.target)
    elif a.target:
        what = " ".join(a.target) if a.op not in ("cut", "heal") else f"{a.target[0]} <-> {a.target[1]}"
        if a.close:
            what += " (connection closed)"
    elif a.groups:
        what = " | ".join(",".join(g) for g in a.groups)
    elif a.links:
        specs = {s for s in a.links.values()}
        what = f"{len(a.links)} directed links"
        if len(specs) == 1:
            what += f" -> {link_text(next(iter(specs)))}"
    else:
        what = ""
    if a.op in ("throttle", "unthrottle"):
        what += f" to {format_cpu(a.cpu)}" if a.cpu is not None else " (no CPU limit)"
    return f"{a.op:<15} {what}"


def _capacity(cpu: float | None, memory: int | None) -> str:
    """``cpu 0.2, mem 64M`` (empty when neither is limited)."""
    parts = ([f"cpu {cpu:g}"] if cpu is not None else []) + ([f"mem {format_memory(memory)}"] if memory is not None else [])
    return ", ".join(parts)


def describe(plan: Plan) -> str:
    """Nodes per site and host, link classes, client groups and the fault timeline."""
    lines: list[str] = []
    w = lines.append
    procs = [n for n in plan.nodes.values() if n.kind == "node"]
    groups = [n for n in plan.nodes.values() if n.kind == "clients"]
    clients_total = sum(g.clients.count for g in groups if g.clients)
    head = f"{plan.name}  protocol {plan.protocol}  provider {plan.provider}  duration {format_time(plan.duration_s)}  seed {plan.seed}"
    if plan.point:
        head += "  point " + " ".join(f"{k}={v}" for k, v in plan.point.items())
    if plan.repeat_index:
        head += f"  repeat {plan.repeat_index}"
    w(head)
    w(f"{len(procs)} nodes, {len(groups)} client processes ({clients_total} logical clients), "
      f"{len(plan.links)} directed links, {len(plan.actions)} fault actions")
    if plan.params:
        w("params: " + ", ".join(f"{k}={_short(v)}" + (" (derived)" if k in plan.derived else "")
                                 for k, v in plan.params.items()))
        for k, why in plan.derived.items():
            w(f"  {k}={_short(plan.params[k])} derived from the topology: {why}")
    if plan.placement:
        w("placement: " + ", ".join(f"{k}={_short(v)}" for k, v in plan.placement.items()))

    w("")
    w("nodes")
    for site in plan.sites:
        by_host: dict[str, list[str]] = defaultdict(list)
        for n in procs:
            if n.site == site:
                cap = _capacity(n.cpu, n.memory_bytes)
                if n.service:
                    svc = f"service {format_time(n.service['mean_s'])} {n.service['distribution'][:3]}"
                    cap = f"{cap}, {svc}" if cap else svc
                label = (f"{n.name}({n.role}" + (f", cell {n.cell}" if n.cell else "")
                         + (f", {cap}" if cap else "") + ")")
                by_host[n.host].append(label)
        if not by_host:
            w(f"  {site:<12} (no nodes)")
            continue
        for host, names in by_host.items():
            hp = plan.hosts.get(host)
            addr = hp.address if hp else None
            cap = _capacity(hp.cpu, hp.memory_bytes) if hp else ""
            label = host + (f" [{addr}]" if addr else "") + (f" [{cap}]" if cap else "")
            w(f"  {site:<12} {label:<22} {' '.join(names)}")
    overlay = sorted({tuple(sorted((n.name, nb))) for n in procs for nb in n.neighbors})
    if overlay:
        w("  overlay: " + " ".join(f"{a}-{b}" for a, b in overlay))

    w("")
    w("links")
    for a, b, spec, n in link_classes(plan):
        arrow = f"{a} {b}" if b.startswith("->") else f"{a} <-> {b}"
        unit = "directed" if b.startswith("->") else "pairs"
        w(f"  {arrow:<34} {link_text(spec):<40} ({n} {unit if n != 1 else unit.rstrip('s')})")

    if groups:
        w("")
        w("clients")
        for g in groups:
            c = g.clients
            assert c is not None
            desc = f"{c.role:<10} x{c.count:<5} at {','.join(c.attach):<16} site {g.site:<8} host {g.host}"
            if c.rate_per_s is not None:
                desc += f"  rate {c.rate_per_s:g}/s"
            if c.size_bytes is not None:
                desc += f"  size {format_size(c.size_bytes)}"
            if c.filter:
                desc += f"  filter {c.filter}"
            w(f"  {g.name:<12} {desc}")
            for k, v in c.extra.items():
                if v is not None:
                    w(f"  {'':<12}   {k}: {_short(v)}")

    hosted = hosted_clients(plan)
    if hosted:
        w("")
        w("clients hosted in nodes")
        for h in hosted:
            at = " ".join(f"{n}:{k}" for n, k in h.at.items())
            w(f"  {h.name:<12} {h.role:<10} x{h.count:<5} at {at}")
            if h.text:
                w(f"  {'':<12}   {h.text}")

    w("")
    w("faults")
    if not plan.actions:
        w("  (none)")
    for a in plan.actions:
        w(f"  {format_time(a.at_s):>8}  {_action_text(a):<60} [{a.fault}] {a.source}")
    return "\n".join(lines) + "\n"


def _short(v: object) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    text = str(v)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["describe", "link_text", "link_classes"]
