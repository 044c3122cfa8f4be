"""Timestamp size as a pure function of the subscriptions (Figs 7-8).

The subscriptions are the ones the client hosts draw
(:func:`testbed.protocols.ordering.nodes.workload.client_subscriptions`, same seed), the
co-occurrence counts ``C[T, T'] = |{s : T, T' in s}|`` come from one matrix
product, and each topic's sequencing group is decided by the topic managers' own
rule (:func:`testbed.protocols.ordering.nodes.core.sg_from_counts`). The size of a
timestamp of an event published in T is ``|SG_T|``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from testbed.protocols.ordering.nodes.core import sg_from_counts
from testbed.protocols.ordering.nodes.workload import FOREIGN_EPS, Popularity, client_subscriptions, own_topics


def sg_sizes(subs: dict[str, list[int]], n_topics: int, causal: bool = False) -> np.ndarray:
    """``sizes[T] = |SG_T|`` for every topic, given every client's subscription."""
    a = np.zeros((len(subs), n_topics), dtype=np.float32)
    for i, s in enumerate(subs.values()):
        a[i, s] = 1.0
    c = (a.T @ a).astype(np.int64)  # exact: counts < 2**24
    sizes = np.empty(n_topics, dtype=np.int64)
    for t in range(n_topics):
        row = c[t]
        nz = np.nonzero(row)[0]
        counts = {int(u): int(row[u]) for u in nz if u != t}
        sizes[t] = len(sg_from_counts(t, counts, causal))
    return sizes


def plan_subscriptions(plan: Any) -> tuple[dict[str, list[int]], Popularity]:
    """Every client's subscription in an ordering plan, as its client hosts draw them."""
    tm = plan.placement["topic_managers"]
    n = int(tm["topics"])
    directory = {name: {"site": nd.site} for name, nd in plan.nodes.items()}
    subs: dict[str, list[int]] = {}
    pop = None
    eps = float((plan.params or {}).get("foreign_eps", FOREIGN_EPS))
    for name, nd in plan.nodes.items():
        g = nd.clients
        if nd.kind != "clients" or g is None or g.role not in ("client", "subscriber"):
            continue
        extra = g.extra or {}
        pop = Popularity(n, float(extra.get("shape", 0.901)), own_topics(tm, directory, nd.site), eps)
        clients = [f"{g.name}-{i}" for i in range(g.count)]
        subs.update(client_subscriptions(random.Random(plan.node_seed(name)), pop, clients,
                                         int(extra.get("topics_per_client", 10))))
    if pop is None:
        raise ValueError(f"{plan.name}: no subscribing client group")
    return subs, pop


def size_stats(plan: Any) -> dict[str, Any]:
    """Mean and std dev of the timestamp size over topics, and weighted by publication popularity."""
    subs, pop = plan_subscriptions(plan)
    n = int(plan.placement["topic_managers"]["topics"])
    sizes = sg_sizes(subs, n, (plan.params or {}).get("order") == "causal").astype(float)
    w = np.asarray(pop.weights)
    mean_pub = float((sizes * w).sum())
    return {
        "clients": len(subs), "topics": n,
        "total_subscribed": int(sum(len(s) for s in subs.values())),
        "size_mean": float(sizes.mean()), "size_std": float(sizes.std()),
        "size_mean_pub": mean_pub, "size_std_pub": float(np.sqrt((w * (sizes - mean_pub) ** 2).sum())),
        "size_max": int(sizes.max()),
    }
