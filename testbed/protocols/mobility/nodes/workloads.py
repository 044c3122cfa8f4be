"""Subscription workloads of the mobility paper (Hu et al., Fig 7), and who starts where.

Every filter is ``[w,eq,'<workload>']`` plus an interval on ``x`` (the proposed
defaults of the spec, section 2; publishers carry ``w: choice(cov,tree,chain,dist)``
and ``x: uniform(0,100)``). Ten templates per workload, numbered 1..10:

* ``covered``   s1 = [0,100); s2..s10 disjoint 10-wide bins inside it (the root covers 9)
* ``tree``      heap-shaped: s_i covers s_2i and s_2i+1 (s1 = [0,100), s2 = [0,50), ...)
* ``chained``   nested: s_k = [10(k-1),100) (each covers the next one only, directly)
* ``distinct``  disjoint: s_k = [10(k-1),10k)
* ``random``    each client draws one of the four workloads uniformly, then a template

Stdlib only: brokers (node side) and ``testbed validate`` (controller side) share it.
"""

from __future__ import annotations

import random
from typing import Any

WORKLOADS = ("covered", "chained", "tree", "distinct", "random")
TAG = {"covered": "cov", "tree": "tree", "chained": "chain", "distinct": "dist"}
TEMPLATES = 10


def _iv(tag: str, lo: float, hi: float) -> str:
    def num(v: float) -> str:
        return str(int(v)) if float(v).is_integer() else repr(float(v))
    return f"[w,eq,'{tag}'],[x,>=,{num(lo)}],[x,<,{num(hi)}]"


def _tree_interval(i: int) -> tuple[float, float]:
    depth = i.bit_length() - 1  # heap node i at depth d covers a 100/2^d slice
    width = 100.0 / (1 << depth)
    k = i - (1 << depth)
    return k * width, (k + 1) * width


def template(workload: str, k: int) -> str:
    """The filter text of template ``k`` (1..10) of a concrete workload."""
    if workload not in TAG:
        raise ValueError(f"unknown workload {workload!r}")
    if not 1 <= k <= TEMPLATES:
        raise ValueError(f"template {k} is not in 1..{TEMPLATES}")
    tag = TAG[workload]
    if workload == "covered":
        return _iv(tag, 0, 100) if k == 1 else _iv(tag, 10 * (k - 2), 10 * (k - 1))
    if workload == "tree":
        return _iv(tag, *_tree_interval(k))
    if workload == "chained":
        return _iv(tag, 10 * (k - 1), 100)
    return _iv(tag, 10 * (k - 1), 10 * k)


def covered_count(workload: str, k: int) -> int:
    """How many other templates of the workload template k covers (directly or not)."""
    if workload == "covered":
        return 9 if k == 1 else 0
    if workload == "chained":
        return TEMPLATES - k
    if workload == "tree":
        n, stack = 0, [2 * k, 2 * k + 1]
        while stack:
            j = stack.pop()
            if j <= TEMPLATES:
                n += 1
                stack += [2 * j, 2 * j + 1]
        return n
    return 0


def broker_order(names: list[str]) -> list[str]:
    """Brokers in the order every assignment uses: numeric suffix (b2 before b10), then the name."""
    def key(name: str) -> tuple[int, str]:
        digits = "".join(ch for ch in name if ch.isdigit())
        return (int(digits) if digits else 0, name)
    return sorted(names, key=key)


def assign(group: dict[str, Any], brokers: list[str], repeat: int = 0) -> list[dict[str, Any]]:
    """Every client of a mobile group: name, workload, template, filter, start broker, route, moves,
    ``offset`` (its first move, after it joined) and ``join_at`` (seconds after t0 at which it
    connects and subscribes: uniform in [0, ``join``) when the group has a join window, else 0:
    it joins at start-up, before t0).

    ``group`` is the validated group (``params.mobile.<name>`` plus ``name``); ``brokers`` every
    broker of the topology in file order. Deterministic: seeded by the group's name, ``seed`` and
    the run's ``repeat`` (its repeat index: every repeat of a grid point draws its own clients),
    so every broker, the validation and the analysis of one run compute the same assignment.
    """
    name = group["name"]
    count = int(group["count"])
    rng = random.Random(f"{name}:{group.get('seed', 0)}" + (f":r{repeat}" if repeat else ""))
    wl = group.get("workload", "random")
    starts = group.get("start") or "random"
    routes = [tuple(r) for r in group.get("routes") or []]
    moving = group.get("moving", "all")
    join = float(group.get("join") or 0.0)
    # join times from a stream of their own, so a group without ``join`` draws what it always drew
    jrng = random.Random(f"{name}:{group.get('seed', 0)}:join" + (f":r{repeat}" if repeat else ""))
    out = []
    for i in range(count):
        w = rng.choice(("covered", "chained", "tree", "distinct")) if wl == "random" else wl
        how = group.get("assign", "random")
        if how == "round-robin":
            k = i % TEMPLATES + 1
        elif how == "single-root":  # Fig 11: client 0 holds template 1, the rest 2..10 round-robin
            k = 1 if i == 0 else (i - 1) % (TEMPLATES - 1) + 2
        else:
            k = rng.randrange(TEMPLATES) + 1
        if starts == "random":
            b = rng.choice(brokers)
        elif group.get("start_by", "client") == "template":
            b = starts[(k - 1) % len(starts)]
        else:
            b = starts[i % len(starts)]
        route = next((r for r in routes if b in r), None)
        if moving == "all":
            moves = True
        elif isinstance(moving, int):
            moves = i < moving
        else:
            moves = k in (moving.get("templates") or [])
        out.append({"client": f"{name}-{i}", "workload": w, "template": k, "filter": template(w, k),
                    "start": b, "route": list(route) if route else None, "moves": moves,
                    "offset": rng.uniform(0.0, float(group.get("first_move") or group.get("pause", 10.0))),
                    "join_at": jrng.uniform(0.0, join) if join > 0 else 0.0})
    return out
