"""Plan -> Graphviz DOT source: the topology as a picture (``testbed graph``).

Pure: values in, text out (no Graphviz call here; ``testbed.api.graph`` lays the
text out with ``dot``). What the picture shows:

- every site as a box (a ``cluster``), the protocol nodes of that site inside it; where the
  protocol groups nodes (its ``graph_hints`` hook: e.g. replicas of one virtual broker), every
  group as a dashed box inside its site;
- every client group as one node (``name``, role and ``xcount``) in its site,
  with an edge to each broker it attaches to; clients a protocol hosts inside its nodes
  (its ``hosted_clients`` hook, e.g. mobile clients) as one dashed note per group
  with a dashed edge to each node where some start (``xN start``; with ``at_s``, where the
  hook places them then: ``xN at T``);
- every overlay edge (``neighbors``, undirected) labelled with its emulated
  link (delay, jitter, loss, rate; both directions when they differ);
- the protocol's ``graph_hints``: an extra label line on some nodes (e.g. the topics a server
  hosts), drawn highlighted; overlay edges inside one group labelled as peers, and several
  edges between two groups drawn as one bundle (one colour per group pair, ``bundle A-B``);
- with ``at_s``: the state at that point of the fault schedule, found by
  replaying the plan's actions with ``at_s <= t``: crashed nodes greyed,
  paused / stalled nodes shaded and marked, cut or partitioned links dashed
  red, links changed by ``set_link`` with their new values.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from testbed.topology.describe import link_text
from testbed.topology.plan import LinkSpec, Plan
from testbed.topology.protocols import graph_hints, hosted_clients
from testbed.topology.units import format_time

BUNDLE_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


@dataclass
class State:
    """The fault state of a plan at one instant (what ``at_s`` shows)."""

    at_s: float | None = None
    crashed: set[str] = field(default_factory=set)
    paused: set[str] = field(default_factory=set)
    stalled: set[str] = field(default_factory=set)
    cut: set[frozenset[str]] = field(default_factory=set)
    partitions: list[tuple[tuple[str, ...], ...]] = field(default_factory=list)
    links: dict[str, LinkSpec] = field(default_factory=dict)  # "src->dst" -> spec, with set_link applied

    def separated(self, a: str, b: str) -> bool:
        """The link a-b is cut, or a partition puts a and b on different sides."""
        if frozenset((a, b)) in self.cut:
            return True
        for groups in self.partitions:
            ga = next((i for i, g in enumerate(groups) if a in g), None)
            gb = next((i for i, g in enumerate(groups) if b in g), None)
            if ga is not None and gb is not None and ga != gb:
                return True
        return False


def state_at(plan: Plan, at_s: float | None) -> State:
    """Replay the plan's fault actions up to and including ``at_s`` (None: the state before any)."""
    st = State(at_s=at_s, links=dict(plan.links))
    if at_s is None:
        return st
    for a in sorted(plan.actions, key=lambda a: a.at_s):
        if a.at_s > at_s:
            break
        t = a.target
        if a.op == "crash":
            st.crashed.add(t[0])
            st.paused.discard(t[0])
            st.stalled.discard(t[0])
        elif a.op == "restart":
            st.crashed.discard(t[0])
        elif a.op == "pause":
            st.paused.add(t[0])
        elif a.op == "resume":
            st.paused.discard(t[0])
        elif a.op == "stall":
            st.stalled.add(t[0])
        elif a.op == "unstall":
            st.stalled.discard(t[0])
        elif a.op == "cut":
            st.cut.add(frozenset(t[:2]))
        elif a.op == "heal":
            st.cut.discard(frozenset(t[:2]))
        elif a.op == "partition":
            st.partitions.append(tuple(tuple(g) for g in a.groups))
        elif a.op == "heal_partition":
            groups = tuple(tuple(g) for g in a.groups)
            if groups in st.partitions:
                st.partitions.remove(groups)
            else:
                st.partitions.clear()
        elif a.op == "set_link":
            st.links.update(a.links)
    return st


def q(s: str) -> str:
    """A DOT string literal (IDs and labels are always quoted)."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(**kw: object) -> str:
    parts = [f"{k}={q(v) if isinstance(v, str) else v}" for k, v in kw.items() if v is not None]
    return " [" + ", ".join(parts) + "]" if parts else ""


def _edge_label(st: State, a: str, b: str) -> tuple[str, bool]:
    """(label, down): the emulated link a-b, both directions if they differ; down if either is down."""
    ab, ba = st.links.get(f"{a}->{b}"), st.links.get(f"{b}->{a}")
    if ab is None and ba is None:
        return "", False
    if ab is None or ba is None or ab == ba:
        spec = ab or ba
        assert spec is not None
        return link_text(spec), not spec.up
    return f"{a}\u2192{b}: {link_text(ab)}\n{b}\u2192{a}: {link_text(ba)}", not (ab.up and ba.up)


def plan_to_dot(plan: Plan, at_s: float | None = None) -> str:
    """The DOT source of the plan's picture; with ``at_s``, its state at that instant of the schedule."""
    st = state_at(plan, at_s)
    procs = [n for n in plan.nodes.values() if n.kind == "node"]
    groups = [n for n in plan.nodes.values() if n.kind == "clients"]
    hints = graph_hints(plan)
    extra_label = hints.labels
    grouped = bool(hints.groups)
    group_of = {n.name: hints.groups.get(n.name, n.name) for n in procs}

    title = f"{plan.name}  ({plan.protocol}, {plan.provider})"
    if at_s is not None:
        title += f"  at {format_time(at_s)} of {format_time(plan.duration_s)}"
        if st.crashed or st.paused or st.stalled or st.cut or st.partitions:
            title += ": " + ", ".join(
                [f"{x} crashed" for x in sorted(st.crashed)] + [f"{x} paused" for x in sorted(st.paused)]
                + [f"{x} stalled" for x in sorted(st.stalled)]
                + [f"{'-'.join(sorted(c))} cut" for c in sorted(st.cut, key=sorted)]
                + [" | ".join(",".join(g) for g in p) + " partitioned" for p in st.partitions])
        else:
            title += ": no fault in effect"

    L: list[str] = [f"graph {q(plan.name)} {{",
                     f"  graph [label={q(title)}, labelloc=t, fontname=Helvetica, fontsize=14, compound=true, "
                     f"newrank=true, nodesep=0.5, ranksep=0.9];",
                     '  node [fontname=Helvetica, fontsize=11, style=filled, fillcolor=white];',
                     '  edge [fontname=Helvetica, fontsize=9];']

    def node_line(n, indent: str) -> str:
        if n.kind == "clients":
            c = n.clients
            assert c is not None
            label = f"{n.name}\n{c.role} x{c.count}"
            if c.rate_per_s is not None:
                label += f"\n{c.rate_per_s:g}/s each"
            kw: dict[str, object] = {"label": label, "shape": "note", "fillcolor": "#f3f3f3"}
        else:
            label = f"{n.name}\n{n.role}"
            if n.name in extra_label:
                label += f"\n{extra_label[n.name]}"
            shape = "box3d" if n.name in extra_label else "ellipse"
            kw = {"label": label, "shape": shape, "fillcolor": "#dbe9f6" if n.name in extra_label else "white"}
        if n.name in st.crashed:
            kw.update(label=kw["label"] + "\n(crashed)", fillcolor="#d0d0d0", color="#909090",
                      fontcolor="#808080", style="filled,dashed")
        elif n.name in st.paused:
            kw.update(label=kw["label"] + "\n(paused)", fillcolor="#fff2b3", color="#b08800")
        elif n.name in st.stalled:
            kw.update(label=kw["label"] + "\n(stalled)", fillcolor="#ffd9b3", color="#c05800")
        return f"{indent}{q(n.name)}{_attrs(**kw)};"

    hosted = hosted_clients(plan, at_s)  # clients living inside nodes (the protocol's hook)
    hosted_site = {h.name: plan.nodes[next(iter(h.at))].site for h in hosted if h.at}

    def hosted_line(h, indent: str) -> str:
        label = f"{h.name}\n{h.role} x{h.count}\n(in brokers)"
        return f"{indent}{q('hosted:' + h.name)}{_attrs(label=label, shape='note', fillcolor='#eef7ee', style='filled,dashed')};"

    for si, site in enumerate(plan.sites):
        members = [n for n in procs if n.site == site]
        clients = [g for g in groups if g.site == site]
        L.append(f"  subgraph {q(f'cluster_site_{site}')} {{")
        L.append(f"    graph [label={q(f'site {site}')}, style=rounded, color=\"#555555\", bgcolor=\"#fafafa\"];")
        if grouped:
            boxes: dict[str, list] = defaultdict(list)
            for n in members:
                boxes[group_of[n.name]].append(n)
            for box, ns in boxes.items():
                if len(ns) > 1 or ns[0].name in hints.groups:
                    L.append(f"    subgraph {q(f'cluster_{hints.group_word}_{box}')} {{")
                    L.append(f"      graph [label={q(f'{hints.group_word} {box}')}, style=\"rounded,dashed\", "
                             f"color=\"#8a5a00\", bgcolor=\"#fff8e8\"];")
                    L += [node_line(n, "      ") for n in ns]
                    L.append("    }")
                else:
                    L += [node_line(n, "    ") for n in ns]
        else:
            L += [node_line(n, "    ") for n in members]
        L += [node_line(g, "    ") for g in clients]
        L += [hosted_line(h, "    ") for h in hosted if hosted_site.get(h.name) == site]
        L.append("  }")

    # overlay edges (undirected, once per pair, in a stable order)
    overlay = sorted({tuple(sorted((n.name, nb))) for n in procs for nb in n.neighbors if nb in plan.nodes})
    bundle_colour: dict[tuple[str, str], str] = {}
    if grouped:
        pairs: dict[tuple[str, str], int] = defaultdict(int)
        for a, b in overlay:
            ca, cb = group_of[a], group_of[b]
            if ca != cb:
                pairs[tuple(sorted((ca, cb)))] += 1  # type: ignore[index]
        for i, pair in enumerate(sorted(p for p, k in pairs.items() if k > 1)):
            bundle_colour[pair] = BUNDLE_COLOURS[i % len(BUNDLE_COLOURS)]
    for a, b in overlay:
        label, down = _edge_label(st, a, b)
        kw: dict[str, object] = {"label": label, "penwidth": 1.6}
        if grouped:
            ca, cb = group_of[a], group_of[b]
            if ca == cb:
                kw.update(style="dotted", label=f"{hints.peer_word}  {label}", penwidth=1.0)
            elif tuple(sorted((ca, cb))) in bundle_colour:
                x, y = sorted((ca, cb))
                kw.update(color=bundle_colour[(x, y)], fontcolor=bundle_colour[(x, y)],
                          label=f"{hints.bundle_word} {x}-{y}\n{label}")
        if st.separated(a, b):
            kw.update(style="dashed", color="#d62728", fontcolor="#d62728", label=f"CUT  {label}")
        elif down:
            kw.update(style="dashed", color="#d62728", fontcolor="#d62728", label=f"DOWN  {label}")
        L.append(f"  {q(a)} -- {q(b)}{_attrs(**kw)};")

    # client attachments
    for g in groups:
        c = g.clients
        assert c is not None
        for br in dict.fromkeys(c.attach):
            if br not in plan.nodes:
                continue
            label, down = _edge_label(st, g.name, br)
            kw = {"label": label, "color": "#888888", "fontcolor": "#666666", "arrowhead": "none", "penwidth": 1.0}
            if st.separated(g.name, br):
                kw.update(style="dashed", color="#d62728", fontcolor="#d62728", label=f"CUT  {label}")
            elif down:
                kw.update(style="dashed", color="#d62728", fontcolor="#d62728", label=f"DOWN  {label}")
            L.append(f"  {q(g.name)} -- {q(br)}{_attrs(**kw)};")
    for h in hosted:  # where they start (or are, at at_s): a dashed edge per node, labelled with how many
        for node, k in h.at.items():
            where = "start" if h.at_s is None else f"at {format_time(h.at_s)}"
            kw = {"label": f"x{k} {where}", "color": "#4a9a4a", "fontcolor": "#3a7a3a", "style": "dashed",
                  "penwidth": 1.0}
            L.append(f"  {q('hosted:' + h.name)} -- {q(node)}{_attrs(**kw)};")
    L.append("}")
    return "\n".join(L) + "\n"


__all__ = ["State", "state_at", "plan_to_dot", "q"]
