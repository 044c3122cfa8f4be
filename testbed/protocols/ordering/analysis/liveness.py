"""Liveness of the ordering protocol: no event stays in a subscriber's buffer for long.

The bound is derived from the plan (``plan.json``: links, placement, brokers, faults)::

    bound = D_pipe + D_ret + D_ens + D_faults + SLACK          (reliable ENS)
    bound = ttl + D_faults + SLACK                              (unreliable ENS: the TTL forces)

* ``hop(a, b)``: the longest one-way delay of the link a -> b or b -> a, ``delay + 4 jitter``
  (the link emulation draws ``delay + jitter * t`` with ``|t| <= 4``; uniform: ``|t| <= 1``),
  over the plan's links and every ``set_link`` fault;
* ``D_pipe``: a chain walking the whole TM pipeline, ``sum hop(s_i, s_i-1)`` over the
  placement's servers (chains visit them from the last to the first, relayed in between);
* ``D_ret``: the longest ``hop(server, client process)`` (EVENT_TS / COMPLETED_SUB_VC back);
* ``D_ens``: the longest ENS path, client process -> its broker -> the broker tree -> a
  subscriber's broker -> its process;
* ``D_faults``: the total length of every fault window (pause, stall, crash, cut, partition):
  messages held by a fault wait that long on top; each restart adds ``RESTART_S`` (2 s:
  start-up, reconnect back-off, re-sends) and ``params.retry`` (a client's re-send);
* ``SLACK``: 1 s for processing and timers on a shared machine (Python processes, 10 ms ticks).

Why it holds: an event e is held back only for predecessors, events that passed (or were
created at) a topic manager before e did. Chains move down one FIFO pipeline, so each
such predecessor -- and each of its own predecessors, created further down -- completes
its chain at most ``D_pipe`` after e entered it, reaches its publisher ``D_ret`` later and
every subscriber ``D_ens`` after that, while e itself arrives no earlier than its own
chain's end. Subscription dummies follow the same path (COMPLETED_SUB_VC, then the ENS).

``check_liveness`` reads the notifications' buffer times (``o_notify.wait_ms``) and the
client processes' ``o_stuck`` records (held back longer than ``params.stuck_after``, and
every event still held back when the process stopped, with what each waits for).
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any, Iterable

SLACK_S = 1.0
RESTART_S = 2.0  # a restarted process: start-up, the peers' reconnect back-off (<= 1 s), re-sends
JITTER_SPAN = {"uniform": 1.0, "constant": 0.0}  # others: the tables' cap, 4 sigma
FAULT_OPS_WITH_WINDOWS = {"pause", "stall", "crash", "cut", "partition"}


def _hop_ms(spec: dict[str, Any]) -> float:
    jitter = float(spec.get("jitter_ms") or 0.0)
    return float(spec.get("delay_ms") or 0.0) + JITTER_SPAN.get(spec.get("distribution", "normal"), 4.0) * jitter


def liveness_bound(plan: dict[str, Any]) -> dict[str, Any]:
    """The bound (seconds) and its parts, from a plan dict (``plan.json``)."""
    links: dict[tuple[str, str], float] = {}

    def add(key: str, spec: dict[str, Any]) -> None:
        a, _, b = key.partition("->")
        pair = (a, b) if a <= b else (b, a)
        links[pair] = max(links.get(pair, 0.0), _hop_ms(spec))

    for k, spec in (plan.get("links") or {}).items():
        add(k, spec)
    faults_s = 0.0
    for a in plan.get("actions") or ():
        for k, spec in (a.get("links") or {}).items():
            add(k, spec)
        if a.get("op") in FAULT_OPS_WITH_WINDOWS:
            w = a.get("window") or (0.0, 0.0)
            faults_s += max(0.0, float(w[1]) - float(w[0]))
        if a.get("op") == "restart":  # start-up, reconnect back-off, a client's re-send
            faults_s += RESTART_S + float((plan.get("params") or {}).get("retry", 0.0) or 0.0)

    def hop(a: str, b: str) -> float:
        if a == b:
            return 0.0
        return links.get((a, b) if a <= b else (b, a), 0.0)

    nodes = plan.get("nodes") or {}
    tm = (plan.get("placement") or {}).get("topic_managers") or {}
    servers = list(tm.get("servers") or [])
    brokers = {n: list(v.get("neighbors") or []) for n, v in nodes.items() if v.get("role") == "broker"}
    procs = {n: list((v.get("clients") or {}).get("attach") or [])
             for n, v in nodes.items() if v.get("kind") == "clients"}
    d_pipe = sum(hop(servers[i], servers[i - 1]) for i in range(1, len(servers)))
    d_ret = max((hop(s, p) for s in servers for p in procs), default=0.0)

    def tree_dist(src: str) -> dict[str, float]:
        dist, todo = {src: 0.0}, deque([src])
        while todo:
            b = todo.popleft()
            for n in brokers.get(b, ()):
                if n in brokers and n not in dist:
                    dist[n] = dist[b] + hop(b, n)
                    todo.append(n)
        return dist

    d_ens = 0.0
    dists = {b: tree_dist(b) for b in brokers}
    for p, pb in procs.items():
        for q, qb in procs.items():
            for b1 in pb:
                for b2 in qb:
                    d = dists.get(b1, {}).get(b2)
                    if d is not None:
                        d_ens = max(d_ens, hop(p, b1) + d + hop(b2, q))
    params = plan.get("params") or {}
    reliable = params.get("ens", "reliable") == "reliable"
    if reliable:
        bound = (d_pipe + d_ret + d_ens) / 1e3 + faults_s + SLACK_S
    else:
        bound = float(params.get("ttl", 1.0)) + faults_s + SLACK_S
    return {"bound_s": round(bound, 4), "pipe_ms": round(d_pipe, 3), "ret_ms": round(d_ret, 3),
            "ens_ms": round(d_ens, 3), "faults_s": round(faults_s, 3), "slack_s": SLACK_S,
            "servers": servers, "reliable": reliable}


def _waits(v: Any) -> list:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return []
    return list(v or [])


def check_liveness(history: Iterable[dict[str, Any]], bound_s: float, *,
                   max_examples: int = 5) -> dict[str, Any]:
    """No event stays in a subscriber's buffer longer than ``bound_s``.

    History rows used: ``o_notify`` (client, eid, wait_ms), ``o_stuck`` (client, eid, topic,
    age_ms, final, waits, sub), ``o_ens_publish`` (eid, topic, sn, t) and ``o_subscribed``
    (client, ts) to name the predecessor each stuck event waits for.
    """
    history = list(history)
    by_sn: dict[tuple[int, int], str] = {}
    for h in history:
        if h["ev"] == "o_ens_publish" and h.get("sn") is not None and not h.get("dummy"):
            by_sn[(int(h["topic"]), int(h["sn"]))] = f"event {h['eid']}"
        elif h["ev"] == "o_subscribed" and h.get("ts"):
            flat = list(h["ts"])
            for t, sn in zip(flat[::2], flat[1::2]):
                by_sn.setdefault((int(t), int(sn)), f"subscription of {h['client']} (its dummy)")
    waited: dict[tuple[str, str], float] = {}
    for h in history:
        if h["ev"] == "o_notify" and h.get("wait_ms") is not None:
            waited[(h["client"], h["eid"])] = float(h["wait_ms"])
    stuck_info: dict[tuple[str, str], dict[str, Any]] = {}
    for h in history:
        if h["ev"] != "o_stuck":
            continue
        key = (h["client"], h["eid"])
        old = stuck_info.get(key)
        if old is None or float(h["age_ms"]) >= float(old["age_ms"]):
            stuck_info[key] = h
    late: list[tuple[float, str, str, bool]] = []
    limit = bound_s * 1e3
    for key, w in waited.items():
        if w > limit:
            late.append((w, key[0], key[1], False))
    for key, h in stuck_info.items():
        if key in waited:
            continue  # notified later: counted above with its full buffer time
        if float(h["age_ms"]) > limit:  # still held back at its last record
            late.append((float(h["age_ms"]), key[0], key[1], True))
    late.sort(reverse=True)
    examples = []
    for w, c, eid, never in late[:max_examples]:
        h = stuck_info.get((c, eid)) or {}
        waits = []
        for t, have, need, *tm in _waits(h.get("waits")):
            pred = by_sn.get((int(t), int(have) + 1),
                             "no publication or subscription with that number in the logs "
                             "(lost, or still at the TMs)")
            waits.append({"topic": t, "sub_lc": have, "needs": need, "tm": tm[0] if tm else None,
                          "next_missing": f"{t}#{int(have) + 1}: {pred}"})
        ex: dict[str, Any] = {"client": c, "eid": eid, "topic": h.get("topic"),
                              "held_ms": round(w, 1), "never_notified": never}
        if h.get("sub"):
            ex["waits_for_subscription"] = h["sub"]
        ex["waits"] = waits if waits else "-"
        examples.append(ex)
    notified_waits = sorted(waited.values())
    return {"property": "liveness", "passed": not late, "violations": len(late),
            "bound_s": bound_s, "examples": examples,
            "held_back_at_end": sum(1 for h in stuck_info.values() if h.get("final")),
            "max_wait_ms": round(notified_waits[-1], 1) if notified_waits else 0.0,
            "p99_wait_ms": round(notified_waits[int(0.99 * (len(notified_waits) - 1))], 1)
            if notified_waits else 0.0}
