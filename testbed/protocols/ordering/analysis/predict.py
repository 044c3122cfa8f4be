"""Predict an ordering plan's forwarding shares and timestamp latencies without running nodes.

From a :class:`~testbed.topology.plan.Plan` (topology + seed) alone, in seconds:

* **subscriptions**: every client's, drawn exactly as its client host draws them (same
  law code, ``testbed.protocols.ordering.nodes.workload``, same process seeds:
  :func:`testbed.protocols.ordering.analysis.tssize.plan_subscriptions`);
* **sequencing groups**: ``SG_T`` for every topic by the topic managers' own rule
  (:func:`testbed.protocols.ordering.nodes.core.sg_from_counts`) over the co-occurrence counts;
* **chains**: an event published in T is timestamped by ``TM_T`` and then by every topic of
  ``SG_T`` ranked before T, in decreasing rank (``next_topic`` with the processes' rank table);
* **forwarding share** of a TM server (Figs 11-12's "% outgoing bandwidth"): timestamp bytes it
  forwards to a TM on another server / timestamp bytes of every publication step it handles,
  as :class:`testbed.protocols.ordering.nodes.core.TMHost` counts them (``ts_bytes_remote`` /
  ``ts_bytes_handled``), expected over the publication law of each client group (rate x
  ``Popularity.weights``); sequence numbers are taken at their mid-run value;
* **chain latency** (Figs 9 and 13, without queueing): client -> ``TM_T``'s server, each server
  hop along the pipeline (a chain for a server further down is relayed by every server in
  between), last server -> client, each link at its mean delay from the plan's links.

What it leaves out: queueing and processing (so it is the latency at low load), ENS
subscription traffic, faults.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from testbed.protocols.ordering.nodes.core import next_topic, sg_from_counts, ts_bytes
from testbed.protocols.ordering.nodes.placement import placement_table, rank_table
from testbed.protocols.ordering.nodes.workload import FOREIGN_EPS, Popularity, own_topics
from testbed.protocols.ordering.analysis.tssize import plan_subscriptions


def sequencing_groups(subs: dict[str, list[int]], n_topics: int, causal: bool = False) -> list[set[int]]:
    """``SG_T`` for every topic T, from every client's subscription."""
    a = np.zeros((len(subs), n_topics), dtype=np.float32)
    for i, s in enumerate(subs.values()):
        a[i, s] = 1.0
    c = (a.T @ a).astype(np.int64)
    out = []
    for t in range(n_topics):
        row = c[t]
        out.append(sg_from_counts(t, {int(u): int(row[u]) for u in np.nonzero(row)[0] if u != t}, causal))
    return out


def chain(topic: int, sg: set[int], rank: list[int]) -> list[int]:
    """The topics whose TMs timestamp an event of ``topic``, in the order they do."""
    ts = dict.fromkeys(sg, 0)
    out, t = [topic], topic
    while (t := next_topic(ts, t, rank)) is not None:
        out.append(t)
    return out


def _mean_delay_s(plan: Any, a: str, b: str) -> float:
    sp = plan.links.get(f"{a}->{b}")
    return (sp.delay_ms if sp is not None else 0.0) / 1e3


def pipeline_path(servers: list[str], src: str, dst: str) -> list[str]:
    """The servers a chain message from ``src`` to ``dst`` passes (relays included), ``src`` first."""
    i, j = servers.index(src), servers.index(dst)
    if j >= i - 1:
        return [src, dst]
    return servers[j:i + 1][::-1]


def publication_rates(plan: Any) -> dict[str, tuple[float, Popularity]]:
    """Client process -> (its total publication rate, its site's law)."""
    tm = plan.placement["topic_managers"]
    n = int(tm["topics"])
    eps = float((plan.params or {}).get("foreign_eps", FOREIGN_EPS))
    directory = {name: {"site": nd.site} for name, nd in plan.nodes.items()}
    out = {}
    for name, nd in plan.nodes.items():
        g = nd.clients
        if nd.kind != "clients" or g is None or g.role not in ("client", "publisher"):
            continue
        pop = Popularity(n, float((g.extra or {}).get("shape", 0.901)), own_topics(tm, directory, nd.site), eps)
        out[name] = (float(g.rate_per_s or 0.0) * g.count, pop)
    return out


def predict(plan: Any) -> dict[str, Any]:
    """Expected per-server forwarding shares and chain latencies of an ordering plan."""
    if plan.protocol != "ordering":
        raise ValueError(f"{plan.name}: predict covers the ordering protocol, not {plan.protocol}")
    params = plan.params or {}
    tm = plan.placement["topic_managers"]
    n = int(tm["topics"])
    servers = list(tm["servers"])
    where = placement_table(tm)
    pipeline = bool(params.get("pipeline", True))
    rank = rank_table(tm) if pipeline else list(range(n))
    subs, _ = plan_subscriptions(plan)
    sgs = sequencing_groups(subs, n, params.get("order") == "causal")
    pubs = publication_rates(plan)
    topic_rate = [0.0] * n
    for rate, pop in pubs.values():
        for t, w in enumerate(pop.weights):
            topic_rate[t] += rate * w
    half = plan.duration_s / 2
    chains, nbytes = {}, {}
    handled: dict[str, float] = defaultdict(float)
    remote: dict[str, float] = defaultdict(float)
    for t in range(n):
        if topic_rate[t] <= 0:
            continue
        ch = chains[t] = chain(t, sgs[t], rank)
        flat: list[int] = []
        for u in sorted(sgs[t]):
            flat += [u, max(1, round(topic_rate[u] * half))]
        b = nbytes[t] = ts_bytes(flat)
        for i, u in enumerate(ch):
            s = where[u]
            handled[s] += topic_rate[t] * b
            if i + 1 < len(ch) and where[ch[i + 1]] != s:
                remote[s] += topic_rate[t] * b
    # latency of each client process's chains, weighted by its publication law
    lat: dict[str, dict[str, float]] = {}
    for proc, (rate, pop) in pubs.items():
        total = mean = 0.0
        per_topic_max = 0.0
        for t, w in enumerate(pop.weights):
            if w <= 0 or t not in chains:
                continue
            hops = [where[u] for u in chains[t]]
            d = _mean_delay_s(plan, proc, hops[0])
            for a, b in zip(hops, hops[1:]):
                if a != b:
                    path = pipeline_path(servers, a, b) if pipeline else [a, b]
                    d += sum(_mean_delay_s(plan, x, y) for x, y in zip(path, path[1:]))
            d += _mean_delay_s(plan, hops[-1], proc)
            mean += w * d
            total += w
            per_topic_max = max(per_topic_max, d)
        lat[proc] = {"rate_per_s": rate, "latency_mean_ms": 1e3 * mean / total if total else 0.0,
                     "latency_max_ms": 1e3 * per_topic_max}
    all_rate = sum(r for r, _ in pubs.values())
    return {
        "name": plan.name, "point": dict(getattr(plan, "point", {}) or {}), "seed": plan.seed,
        "clients": len(subs),
        "clients_with_foreign_topic": _foreign_clients(plan, subs),
        "forwarding_pct": {s: (100.0 * remote[s] / handled[s] if handled[s] else 0.0) for s in servers},
        "latency_mean_ms": (sum(v["rate_per_s"] * v["latency_mean_ms"] for v in lat.values()) / all_rate
                            if all_rate else 0.0),
        "latency_by_client_group": lat,
        "sg_size_mean": float(np.mean([len(sg) for sg in sgs])),
        "chain_servers_mean": (sum(topic_rate[t] * len({where[u] for u in ch}) for t, ch in chains.items())
                               / sum(topic_rate) if sum(topic_rate) else 0.0),
    }


def _foreign_clients(plan: Any, subs: dict[str, list[int]]) -> float:
    """Fraction of clients holding a topic whose TM is not at their site."""
    tm = plan.placement["topic_managers"]
    directory = {name: {"site": nd.site} for name, nd in plan.nodes.items()}
    own_of: dict[str, set[int] | None] = {}
    for name, nd in plan.nodes.items():
        if nd.kind == "clients" and nd.clients is not None:
            own = own_topics(tm, directory, nd.site)
            own_of[nd.clients.name] = set(own) if own is not None else None
    n = hits = 0
    for cid, s in subs.items():
        own = own_of.get(cid.rsplit("-", 1)[0])
        n += 1
        hits += own is not None and any(t not in own for t in s)
    return hits / n if n else 0.0


def format_prediction(p: dict[str, Any]) -> str:
    point = " ".join(f"{k}={v}" for k, v in p["point"].items())
    fwd = "  ".join(f"{s} {v:5.1f}%" for s, v in p["forwarding_pct"].items())
    return (f"{p['name']} {point} seed={p['seed']}: forwarding {fwd} | latency mean "
            f"{p['latency_mean_ms']:.1f} ms | SG mean {p['sg_size_mean']:.1f} | servers/chain "
            f"{p['chain_servers_mean']:.2f} | clients with a foreign topic "
            f"{100 * p['clients_with_foreign_topic']:.1f}%")
