"""Randomized ordering topologies, and one run of each checked for TNO, completeness, liveness.

:func:`generate` draws a valid topology from a seed: 2-5 sites, 1-5 TM servers on random
sites, ``range`` or ``hash`` placement, 1-3 brokers per site joined into one random tree,
2-4 client groups each attached to one broker or to several, cross-site delays 1-120 ms
with or without jitter, and optionally a TM server paused (``fault="pause"``) or crashed
and restarted (``fault="crash"``). The same seed gives the same YAML text.

:func:`run_and_check` runs one on real processes (local provider) and checks the history
the nodes logged, without Spark (the Spark checks are the same functions); used by the
randomized tests (tests/integration/test_ordering_randomized.py) and by
``scripts/ordering_sweep.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

FAULTS = ("none", "pause", "crash")


def _ms(x: float) -> str:
    return f"{round(x, 1)}ms"


def generate(seed: int, *, fault: str | None = None, duration_s: int = 8) -> dict[str, Any]:
    """A topology (as a dict ready for YAML) drawn from ``seed``; ``fault`` None = drawn too."""
    rng = random.Random(seed)
    n_sites = rng.randint(2, 5)
    sites = [f"s{i}" for i in range(n_sites)]
    nodes: dict[str, dict[str, Any]] = {}
    brokers: list[str] = []
    for s in sites:
        for _ in range(rng.randint(1, 3)):
            b = f"b{len(brokers) + 1}"
            node: dict[str, Any] = {"role": "broker", "site": s}
            if brokers:  # a random tree: every broker joins one already placed
                node["neighbors"] = [rng.choice(brokers)]
            nodes[b] = node
            brokers.append(b)
    n_servers = rng.randint(1, 5)
    servers = [f"t{i + 1}" for i in range(n_servers)]
    for t in servers:
        nodes[t] = {"role": "tm-server", "site": rng.choice(sites)}
    by_site = {s: [b for b in brokers if nodes[b]["site"] == s] for s in sites}
    clients: dict[str, Any] = {}
    for g in range(rng.randint(2, 4)):
        site = rng.choice(sites)
        if rng.random() < 0.4 and len(brokers) > 1:  # several brokers, any site
            attach: Any = sorted(rng.sample(brokers, rng.randint(2, min(3, len(brokers)))))
        else:
            attach = rng.choice(by_site[site])
        clients[f"g{g}"] = {
            "role": "client", "count": rng.randint(2, 8), "attach": attach, "site": site,
            "rate": f"{rng.randint(2, 6)}/s",
            "params": {"topics_per_client": rng.randint(1, 5), "shape": rng.choice([0.349, 0.901])}}
    jitter = rng.random() < 0.5
    rules = []
    wan: dict[frozenset, float] = {}
    for i, a in enumerate(sites):
        for b in sites[i + 1:]:
            d = round(rng.uniform(1, 120), 1)
            rule: dict[str, Any] = {"sites": [a, b], "delay": _ms(d)}
            worst = d
            if jitter:
                j = round(rng.uniform(0, d / 10), 1)
                rule["jitter"] = _ms(j)
                worst += 4 * j
            wan[frozenset((a, b))] = worst
            rules.append(rule)
    lan = round(rng.uniform(1, 5), 1)
    if fault is None:
        fault = rng.choice(FAULTS)
    faults: list[dict[str, Any]] = []
    victim = rng.choice(servers)
    if fault == "pause":
        faults.append({"at": f"{rng.uniform(2, 4):.1f}s", "pause": victim,
                       "for": f"{rng.uniform(0.5, 2):.1f}s"})
    elif fault == "crash":
        at = rng.uniform(2, 4)
        faults += [{"at": f"{at:.1f}s", "crash": victim},
                   {"at": f"{at + rng.uniform(0.5, 2):.1f}s", "restart": victim}]
    elif fault != "none":
        raise ValueError(f"fault must be one of {FAULTS}, not {fault!r}")
    topo: dict[str, Any] = {
        "version": 1, "name": f"ordering-random-{seed}", "protocol": "ordering",
        "duration": f"{duration_s}s", "seed": seed,
        "sites": {s: {} for s in sites}, "nodes": nodes, "clients": clients,
        "placement": {"topic_managers": {"topics": rng.randint(10, 40),
                                         "strategy": rng.choice(["range", "hash"]),
                                         "servers": servers}},
        "params": {"ens": "reliable", "warmup": "1s",
                   "ens_settle": f"{_ens_settle(nodes, brokers, wan, lan):.1f}s"},
        "links": {"default": {"delay": _ms(lan)}, "rules": rules,
                  "clients": {"delay": "1ms"}},
    }
    if faults:
        topo["faults"] = faults
    if fault == "crash":  # the TM server keeps its state and its chains; clients re-send
        topo["params"].update(tm_recovery=True, retry="500ms")
    return topo


def _ens_settle(nodes: dict[str, Any], brokers: list[str], wan: dict[frozenset, float],
                lan: float) -> float:
    """What the topology check asks (testbed.protocols.ordering.topology.ens_propagation_s):
    twice the broker tree's longest path at its worst delays, plus the margin, rounded up."""
    adj: dict[str, list[str]] = {b: [] for b in brokers}
    for b in brokers:
        for n in nodes[b].get("neighbors", []):
            adj[b].append(n)
            adj[n].append(b)

    def hop(a: str, b: str) -> float:
        sa, sb = nodes[a]["site"], nodes[b]["site"]
        return lan if sa == sb else wan[frozenset((sa, sb))]

    best = 0.0
    for src in brokers:
        dist, todo = {src: 0.0}, [src]
        while todo:
            b = todo.pop()
            for n in adj[b]:
                if n not in dist:
                    dist[n] = dist[b] + hop(b, n)
                    todo.append(n)
        best = max(best, max(dist.values()))
    return max(0.3, -(-(2 * best / 1e3 + 0.2) * 10 // 1) / 10)


def describe(topo: dict[str, Any]) -> dict[str, Any]:
    """The generated choices in one line of numbers (for the sweep's table)."""
    tm = topo["placement"]["topic_managers"]
    groups = topo["clients"].values()
    return {"sites": len(topo["sites"]), "servers": len(tm["servers"]), "strategy": tm["strategy"],
            "topics": tm["topics"],
            "brokers": sum(1 for n in topo["nodes"].values() if n["role"] == "broker"),
            "groups": len(topo["clients"]),
            "multi_attach": sum(1 for g in groups if isinstance(g["attach"], list)),
            "max_delay_ms": max((float(r["delay"][:-2]) for r in topo["links"]["rules"]), default=0.0),
            "jitter": any("jitter" in r for r in topo["links"]["rules"]),
            "fault": next((k for f in topo.get("faults", []) for k in ("pause", "crash") if k in f),
                          "none")}


def write(topo: dict[str, Any], path: str | Path) -> Path:
    from ruamel.yaml import YAML

    path = Path(path)
    y = YAML()  # round-trip dumper: keys in the order written
    y.default_flow_style = False
    with open(path, "w") as f:
        y.dump(topo, f)
    return path


def check_run(run_dir: str | Path) -> dict[str, Any]:
    """TNO, completeness and liveness of one finished run, from its logs (no Spark)."""
    from testbed.protocols.ordering.analysis.history import check_completeness, check_tno
    from testbed.protocols.ordering.analysis.liveness import check_liveness, liveness_bound
    from testbed.protocols.ordering.analysis.logs import load_history

    run_dir = Path(run_dir)
    plan = json.loads((run_dir / "plan.json").read_text())
    hist = load_history(run_dir)
    notes = [h["t"] for h in hist if h["ev"] == "o_notify"]
    last = max(notes, default=0.0)
    bound = liveness_bound(plan)
    out = {"tno": check_tno(hist), "completeness": check_completeness(hist, until=last - 1.0),
           "liveness": check_liveness(hist, bound["bound_s"]), "notified": len(notes)}
    out["passed"] = all(out[k]["passed"] for k in ("tno", "completeness", "liveness"))
    return out
