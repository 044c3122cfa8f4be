"""Cross-reference checks of a (possibly partial) topology: names, roles, overlay shape, faults.

Unknown sites, hosts, nodes and client groups (with a close-match suggestion), roles the
protocol does not have, a broker overlay that must be a forest or acyclic over cells, and a
fault schedule that cannot happen (restart without crash, a fault inside a pause window,
after the end of the run, ...). Only the parts of the file that passed the schema are
looked at, so one mistake is reported once.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Iterable

from testbed.errors import Problem
from testbed.topology import schema as S
from testbed.topology.positions import Key, dotted, is_seq, locate


def check_references(topo: S.Topology, proto_mod: Any) -> list[Problem]:
    """Names, roles, overlay shape and the fault schedule."""
    P: list[Problem] = []

    def problem(keys: tuple[Key, ...], message: str, key_pos: bool = False) -> None:
        line, col = locate(topo._data, keys, key_pos=key_pos)
        P.append(Problem(topo._path, line, col, dotted(keys), message))

    sites = topo.sites or {}
    hosts = topo.hosts or {}
    nodes = topo.nodes or {}
    clients = topo.clients or {}
    # Names declared in the file, valid entries or not: an entry with a schema error
    # is still a name that exists (its own error is reported by the schema).
    declared = _declared(topo._data)
    site_names = declared["sites"] | set(sites)
    host_names = declared["hosts"] | set(hosts)
    node_names = declared["nodes"] | set(nodes)
    client_names = declared["clients"] | set(clients)
    processes = node_names | client_names

    def suggest(name: str, pool: Iterable[str]) -> str:
        close = difflib.get_close_matches(name, sorted(pool), n=1, cutoff=0.6)
        return f" (did you mean '{close[0]}'?)" if close else ""

    # hosts
    for h, host in hosts.items():
        if host.site is not None and host.site not in site_names:
            problem(("hosts", h, "site"), f"unknown site '{host.site}'{suggest(host.site, site_names)}")

    # nodes
    node_roles = getattr(proto_mod, "NODE_ROLES", None)
    client_roles = getattr(proto_mod, "CLIENT_ROLES", None)
    for n, node in nodes.items():
        if node.site not in site_names:
            problem(("nodes", n, "site"), f"unknown site '{node.site}'{suggest(node.site, site_names)}")
        if node.host is not None and node.host not in host_names:
            problem(("nodes", n, "host"), f"unknown host '{node.host}'{suggest(node.host, host_names)}"
                    if host_names else f"unknown host '{node.host}' (the file has no hosts section)")
        if node_roles is not None and node.role not in node_roles:
            problem(("nodes", n, "role"), f"unknown role '{node.role}' for protocol {topo.protocol}; "
                                          f"one of: {', '.join(sorted(node_roles))}")
        for i, nb in enumerate(node.neighbors):
            if nb == n:
                problem(("nodes", n, "neighbors", i), "a node cannot be its own neighbor")
            elif nb in client_names and nb not in node_names:
                problem(("nodes", n, "neighbors", i), f"'{nb}' is a client group, not a node")
            elif nb not in node_names:
                problem(("nodes", n, "neighbors", i), f"unknown node '{nb}'{suggest(nb, node_names)}")
            elif nb in node.neighbors[:i]:
                problem(("nodes", n, "neighbors", i), f"'{nb}' is listed twice")

    _check_capacity(topo, hosts, nodes, problem)

    # clients
    for c in sorted(client_names & node_names):
        problem(("clients", c), f"'{c}' is already the name of a node (nodes and client groups "
                                "share one namespace)", key_pos=True)
    for c, g in clients.items():
        if client_roles is not None and g.role not in client_roles:
            problem(("clients", c, "role"), f"unknown client role '{g.role}' for protocol {topo.protocol}; "
                                            f"one of: {', '.join(sorted(client_roles))}")
        attach = g.attach_list
        for i, a in enumerate(attach):
            keys = ("clients", c, "attach", i) if len(attach) > 1 or is_seq(topo._data, ("clients", c, "attach")) \
                else ("clients", c, "attach")
            if a in client_names and a not in node_names:
                problem(keys, f"'{a}' is a client group; clients attach to nodes")
            elif a not in node_names:
                problem(keys, f"unknown node '{a}'{suggest(a, node_names)}")
            elif a in attach[:i]:
                problem(keys, f"'{a}' is listed twice")
        if g.site is not None and g.site not in site_names:
            problem(("clients", c, "site"), f"unknown site '{g.site}'{suggest(g.site, site_names)}")
        if g.host is not None and g.host not in host_names:
            problem(("clients", c, "host"), f"unknown host '{g.host}'")

    # links
    links = getattr(topo, "links", None)
    for i, rule in enumerate(links.rules if links else []):
        if rule is None:
            continue
        _check_selector(rule, ("links", "rules", i), site_names, processes, problem, suggest)

    # overlay shape
    acyclic = getattr(proto_mod, "ACYCLIC", None)
    if acyclic in ("forest", "cells"):
        _check_acyclic(nodes, acyclic, problem)

    # faults
    _check_faults(topo, site_names, processes, problem, suggest)
    return P


def _declared(data: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key in ("sites", "hosts", "nodes", "clients"):
        raw = data.get(key) if isinstance(data, dict) else None
        out[key] = {k for k in raw if isinstance(k, str)} if isinstance(raw, dict) else set()
    return out


def _check_selector(sel: S.LinkSelector, keys: tuple[Key, ...], sites, processes, problem, suggest) -> None:
    if sel.sites is not None:
        for j, s in enumerate(sel.sites):
            if s not in sites:
                problem(keys + ("sites", j), f"unknown site '{s}'{suggest(s, sites)}")
    if sel.nodes is not None:
        for j, n in enumerate(sel.nodes):
            if n not in processes:
                problem(keys + ("nodes", j), f"unknown node or client group '{n}'{suggest(n, processes)}")


def _check_acyclic(nodes: dict[str, S.Node], mode: str, problem) -> None:
    """Union-find over the neighbor edges in file order; the edge that closes a cycle is reported."""
    def vertex(n: str) -> str:
        cell = nodes[n].cell if mode == "cells" else None
        return f"cell {cell}" if cell else n

    parent: dict[str, str] = {}
    adj: dict[str, set[str]] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    seen_edges: set[frozenset[str]] = set()
    for n, node in nodes.items():
        for i, nb in enumerate(node.neighbors):
            if nb not in nodes or nb == n:
                continue
            a, b = vertex(n), vertex(nb)
            edge = frozenset((a, b))
            if a == b or edge in seen_edges:
                continue  # inside one cell, or the same (bundled) link listed again
            seen_edges.add(edge)
            ra, rb = find(a), find(b)
            if ra == rb:
                cycle = _path(adj, b, a) + [a]
                what = "cells" if mode == "cells" else "forest"
                need = ("the broker graph must be acyclic after collapsing each cell"
                        if what == "cells" else "the broker overlay must be a tree (no cycles)")
                problem(("nodes", n, "neighbors", i), f"'{nb}' closes a cycle {' - '.join(cycle)}: {need}")
                continue
            parent[ra] = rb
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)


def _path(adj: dict[str, set[str]], src: str, dst: str) -> list[str]:
    prev: dict[str, str | None] = {src: None}
    queue = [src]
    while queue:
        x = queue.pop(0)
        if x == dst:
            break
        for y in sorted(adj.get(x, ())):
            if y not in prev:
                prev[y] = x
                queue.append(y)
    out: list[str] = []
    x: str | None = dst
    while x is not None:
        out.append(x)
        x = prev.get(x)
    return out


def _host_of(node: S.Node, hosts: dict[str, S.Host]) -> str | None:
    """The host a node runs on, as ``expand`` resolves it (None: the default host, no limits)."""
    if node.host is not None:
        return node.host
    for name, h in hosts.items():
        if h.site == node.site:
            return name
    return next(iter(hosts), None)


def _check_capacity(topo, hosts: dict[str, S.Host], nodes: dict[str, S.Node], problem) -> None:
    """A host's nodes may not ask for more CPU or memory than the host declares: each node's own
    value at most the host's, and their sum (of the nodes that give one) at most the host's."""
    from testbed.topology.units import format_cpu, format_memory

    for key, fmt in (("cpu", format_cpu), ("memory", format_memory)):
        used: dict[str, float] = {}
        for n, node in nodes.items():
            mine = getattr(node, key)
            h = _host_of(node, hosts)
            if mine is None or h not in hosts:
                continue
            cap = getattr(hosts[h], key)
            if cap is None:
                continue
            if mine > cap + 1e-9:
                problem(("nodes", n, key), f"{key} {fmt(mine)} is more than its host '{h}' has "
                                           f"(hosts.{h}.{key}: {fmt(cap)})")
                continue
            used[h] = used.get(h, 0) + mine
            if used[h] > cap + 1e-9:
                problem(("nodes", n, key), f"the nodes on host '{h}' ask for {fmt(used[h])} of {key} "
                                           f"in all, more than the host has (hosts.{h}.{key}: {fmt(cap)})")


def _check_faults(topo, sites, processes, problem, suggest) -> None:
    faults = getattr(topo, "faults", None) or []
    duration = getattr(topo, "duration", None)
    order = sorted((f.at, i) for i, f in enumerate(faults) if f is not None)
    crashed: dict[str, tuple[float, int]] = {}  # node -> (crash time, fault index)
    windows: dict[str, list[tuple[float, float, str, int]]] = {}  # node -> stall/pause windows
    throttled: dict[str, list[tuple[float, float, int]]] = {}  # node -> throttle windows
    end = duration if duration is not None else math.inf

    for at, i in order:
        f = faults[i]
        kind = f.kind
        base = ("faults", i)
        if duration is not None:
            if at >= duration:
                problem(base + ("at",), f"at {at:g}s is not before the end of the run (duration {duration:g}s)")
            elif f.for_ is not None and at + f.for_ > duration + 1e-9:
                problem(base + ("for",), f"the fault ends at {at + f.for_:g}s, after the end of the run "
                                         f"(duration {duration:g}s)")
        if kind in ("stall", "crash", "restart", "pause"):
            target = getattr(f, kind)
            if target not in processes:
                problem(base + (kind,), f"unknown node '{target}'{suggest(target, processes)}")
                continue
            if kind == "restart":
                if target not in crashed:
                    problem(base + (kind,), f"'{target}' is not crashed at {at:g}s (restart needs an earlier crash)")
                else:
                    del crashed[target]
                continue
            if target in crashed:
                problem(base + (kind,), f"'{target}' is crashed since {crashed[target][0]:g}s "
                                        f"(faults[{crashed[target][1]}]); restart it first")
                continue
            hit = next((j for j, (s, e, _, _) in enumerate(windows.get(target, [])) if s <= at < e), None)
            if hit is not None and kind != "crash":
                s, e, wkind, wi = windows[target][hit]
                problem(base + (kind,), f"'{target}' is {wkind}ed from {s:g}s to {e:g}s (faults[{wi}]); "
                                        f"a {kind} cannot start inside that window")
            else:
                if kind == "crash":
                    if hit is not None:  # the crash ends the stall/pause (what a stall held is lost)
                        s, e, wkind, wi = windows[target][hit]
                        windows[target][hit] = (s, at, wkind, wi)
                    crashed[target] = (at, i)
                else:
                    stop = at + f.for_ if f.for_ is not None else end
                    windows.setdefault(target, []).append((at, stop, "stall" if kind == "stall" else "paus", i))
        elif kind == "cut":
            for j, n in enumerate(f.cut):
                if n not in processes:
                    problem(base + ("cut", j), f"unknown node '{n}'{suggest(n, processes)}")
        elif kind == "partition":
            owner: dict[str, int] = {}
            for gi, group in enumerate(f.partition):
                for j, name in enumerate(group):
                    keys = base + ("partition", gi, j)
                    if name in sites and name in processes:
                        problem(keys, f"'{name}' is both a site and a node; partition by one of them "
                                      "only when names differ")
                        continue
                    if name in sites:
                        members = [p for p in processes if topo.site_of(p) == name] or [f"site:{name}"]
                    elif name in processes:
                        members = [name]
                    else:
                        problem(keys, f"unknown site or node '{name}'{suggest(name, set(sites) | processes)}")
                        continue
                    for m in members:
                        if m in owner and owner[m] != gi:
                            problem(keys, f"'{m}' is in two partition groups")
                            break
                        owner[m] = gi
        elif kind == "throttle":
            target = f.throttle
            if target not in processes:
                problem(base + ("throttle",), f"unknown node '{target}'{suggest(target, processes)}")
                continue
            stop = at + f.for_ if f.for_ is not None else end
            prev = [(s, e, j) for s, e, j in throttled.get(target, []) if s < stop and at < e]
            if prev:
                s, e, j = prev[0]
                problem(base + ("throttle",), f"'{target}' is throttled from {s:g}s to {e:g}s (faults[{j}]); "
                                              "throttle windows of one node may not overlap")
                continue
            throttled.setdefault(target, []).append((at, stop, i))
            node = (topo.nodes or {}).get(target)
            host = _host_of(node, topo.hosts or {}) if node is not None else None
            cap = getattr((topo.hosts or {}).get(host), "cpu", None) if host else None
            if cap is not None and f.cpu is not None and f.cpu > cap + 1e-9:
                problem(base + ("cpu",), f"cpu {f.cpu:g} is more than the host '{host}' of '{target}' has "
                                         f"(hosts.{host}.cpu: {cap:g})")
        elif kind == "set_link":
            _check_selector(f.set_link, base + ("set_link",), sites, processes, problem, suggest)
            if not f.set_link.overrides():
                problem(base + ("set_link",), "set_link changes nothing: give at least one of "
                                              "delay, jitter, distribution, loss, rate, reorder")
