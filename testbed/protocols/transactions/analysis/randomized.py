"""Randomized transactions topologies (issue #27), as ordering has.

:func:`generate` draws a valid topology from a seed: a random tree of 4-9 brokers (each joins
one placed before it), 1-3 scenario instances x 1-3 TXC threads, each client group attached to
1-3 random brokers, the §3.3 conflict workload on (transactional variants), 3-6 transactions per TXC thread 0.4 s
apart, and optionally
(``crash=True``) a random broker crashed 1.5-3 s into the run and restarted 0.5-1.5 s later. The
same seed draws the same overlay, placement and crash for every variant, and gives the same
YAML text. :func:`describe` gives the drawn choices as one row of numbers.

Runs: ``testbed.protocols.transactions.sweep`` (real processes, Spark checks) and
``scripts/transactions_sweep.py``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

VARIANTS = ("dtx", "dtxni", "stx", "blwait")
THINK_S = 0.4  # a TXC thread's pause between transactions: the workload spans the crash


def draw(seed: int, crash: bool | None = None) -> dict[str, Any]:
    """The variant-independent choices of ``seed``: brokers {name: parent}, attach per group,
    instances, threads, transactions, and the crash (None or {victim, at_s, down_s})."""
    rng = random.Random(seed)
    n = rng.randint(4, 9)
    brokers = [f"b{i + 1}" for i in range(n)]
    parent = {b: rng.choice(brokers[:i]) for i, b in enumerate(brokers) if i}
    instances, threads = rng.randint(1, 3), rng.randint(1, 3)
    counts = {"e": instances, "d": instances, "a": 2 * instances}
    attach = {g: sorted(rng.sample(brokers, rng.randint(1, min(3, c, n))), key=brokers.index)
              for g, c in counts.items()}
    tx = instances * threads * rng.randint(3, 6)
    if crash is None:
        crash = rng.random() < 0.5
    fault = None
    victim, at, down = rng.choice(brokers), round(rng.uniform(1.5, 3), 1), round(rng.uniform(0.5, 1.5), 1)
    if crash:
        fault = {"victim": victim, "at_s": at, "down_s": down}
    return {"seed": seed, "parent": parent, "brokers": brokers, "instances": instances,
            "threads": threads, "attach": attach, "transactions": tx, "crash": fault}


def adjacency(d: dict[str, Any]) -> dict[str, list[str]]:
    adj: dict[str, list[str]] = {b: [] for b in d["brokers"]}
    for b, p in d["parent"].items():
        adj[b].append(p)
        adj[p].append(b)
    return adj


def generate(seed: int, variant: str, *, crash: bool | None = None, duration_s: int = 14) -> dict[str, Any]:
    """A transactions topology (a dict ready for YAML) drawn from ``seed`` for ``variant``."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    d = draw(seed, crash)
    nodes = {b: {"role": "broker", "site": "lab", **({"neighbors": [d["parent"][b]]} if b in d["parent"] else {})}
             for b in d["brokers"]}
    roles = {"e": "coordinator", "d": "dispatcher", "a": "agent"}
    counts = {"e": d["instances"], "d": d["instances"], "a": 2 * d["instances"]}
    clients = {g: {"role": roles[g], "count": counts[g], "attach": list(d["attach"][g])} for g in roles}
    params: dict[str, Any] = {"variant": variant, "transactions": d["transactions"], "threads": d["threads"],
                              "instances": d["instances"], "wait": "200ms", "timeout": "2s", "settle": "1s",
                              "think": f"{THINK_S}s"}
    if variant != "blwait":
        params["conflict"] = True
    topo: dict[str, Any] = {
        "version": 1, "name": f"tx-random-{seed}-{variant}{'-crash' if d['crash'] else ''}",
        "protocol": "transactions", "duration": f"{duration_s}s", "seed": seed,
        "sites": {"lab": {}}, "nodes": nodes, "clients": clients,
        "links": {"default": {"delay": "5ms", "jitter": "1ms"}, "clients": {"delay": "5ms", "jitter": "1ms"}},
        "params": params,
    }
    if d["crash"]:
        c = d["crash"]
        topo["faults"] = [{"at": f"{c['at_s']}s", "crash": c["victim"]},
                          {"at": f"{round(c['at_s'] + c['down_s'], 1)}s", "restart": c["victim"]}]
    return topo


def describe(seed: int, crash: bool | None = None) -> dict[str, Any]:
    """The drawn choices of ``seed`` in one row of numbers (for the sweep's table)."""
    d = draw(seed, crash)
    adj = adjacency(d)
    return {"brokers": len(d["brokers"]), "leaves": sum(1 for v in adj.values() if len(v) == 1),
            "max_degree": max(len(v) for v in adj.values()), "instances": d["instances"],
            "threads": d["threads"], "transactions": d["transactions"],
            "attach": {g: len(v) for g, v in d["attach"].items()},
            "crash": (f"{d['crash']['victim']}@{d['crash']['at_s']}s+{d['crash']['down_s']}s"
                      if d["crash"] else "none"),
            "crash_interior": bool(d["crash"]) and len(adj[d["crash"]["victim"]]) > 1}


def write(topo: dict[str, Any], path: str | Path) -> Path:
    from ruamel.yaml import YAML

    path = Path(path)
    y = YAML()
    y.default_flow_style = False
    with open(path, "w") as f:
        y.dump(topo, f)
    return path
