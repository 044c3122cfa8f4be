"""Property checks on an ordering history (plain Python over event dicts).

A history is a list of dicts with ``ev`` among:

``o_notify``      client, eid, topic, ts (flat [t, sn, ...]), ooo (bool), t
``o_ens_publish`` client, eid, topic, dummy (bool), t, t0 -- the event entered the ENS
                  at t; its PUBLISH was invoked at t0 (before timestamp creation)
``o_subscribed``  client, topic, t                    -- subscribe(T) returned
``o_unsubscribe`` client, topic, t

Times ``t`` only need to be comparable across clients (wall ns from the node logs,
corrected for clock offsets, or simulated seconds). The Spark checker
(``testbed.protocols.ordering.analysis.checks``) collects the needed columns and calls these.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations
from typing import Any, Iterable

from testbed.protocols.ordering.nodes.core import ts_from_wire, ts_less


def _sequences(history: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    seqs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for h in history:
        if h["ev"] == "o_notify":
            seqs[h["client"]].append(h)
    for s in seqs.values():  # log order is notification order; t ties keep it (stable sort)
        s.sort(key=lambda h: h.get("order", 0))
    return seqs


def check_tno(history: Iterable[dict[str, Any]], *, max_examples: int = 5) -> dict[str, Any]:
    """TNO: no two subscribers notify two common events in different orders.

    Violations = for each pair of subscribers, the adjacent inversions of the second's
    order along the first's common subsequence. Events tagged out-of-order are
    excluded (the unreliable mode notifies them without an order guarantee).
    """
    pos: dict[str, dict[str, int]] = {}
    for c, seq in _sequences(history).items():
        pos[c] = {h["eid"]: i for i, h in enumerate(seq) if not h.get("ooo")}
    violations = 0
    examples: list[dict[str, Any]] = []
    for a, b in combinations(sorted(pos), 2):
        pa, pb = pos[a], pos[b]
        common = pa.keys() & pb.keys()
        if len(common) < 2:
            continue
        order = sorted(common, key=pa.__getitem__)
        for x, y in zip(order, order[1:]):
            if pb[x] > pb[y]:
                violations += 1
                if len(examples) < max_examples:
                    examples.append({"clients": [a, b], "events": [x, y]})
    return {"property": "tno", "passed": violations == 0, "violations": violations,
            "examples": examples, "subscribers": len(pos)}


def check_completeness(history: Iterable[dict[str, Any]], *, until: float | None = None,
                       unsub_grace: float = 1.0, max_examples: int = 5) -> dict[str, Any]:
    """Reliable ENS: every event published in T after a subscriber's subscribe(T) returned
    is notified to that subscriber -- unless it was published less than ``unsub_grace``
    before the subscriber unsubscribed T (it may still have been in flight then: Fig 5a
    stops notifying T at once) or after ``until`` (the end of the observed run)."""
    history = list(history)
    subs: dict[tuple[str, int], list[list[float]]] = defaultdict(list)  # (client, T) -> [start, end]
    for h in sorted((h for h in history if h["ev"] in ("o_subscribed", "o_unsubscribe")),
                    key=lambda h: h["t"]):
        key = (h["client"], h["topic"])
        if h["ev"] == "o_subscribed":
            subs[key].append([h["t"], float("inf")])
        elif subs[key] and subs[key][-1][1] == float("inf"):
            subs[key][-1][1] = h["t"]
    by_topic: dict[int, list[tuple[str, list[float]]]] = defaultdict(list)
    for (c, t), spans in subs.items():
        for span in spans:
            by_topic[t].append((c, span))
    notified = {(h["client"], h["eid"]) for h in history if h["ev"] == "o_notify"}
    expected = missing = 0
    examples: list[dict[str, Any]] = []
    for h in history:
        if h["ev"] != "o_ens_publish" or h.get("dummy"):
            continue
        if until is not None and h["t"] > until:
            continue
        t0 = h.get("t0", h["t"])  # Lemma 4: events whose PUBLISH began after subscribe returned
        for c, (start, end) in by_topic.get(h["topic"], ()):
            if start < t0 and h["t"] < end - unsub_grace:
                expected += 1
                if (c, h["eid"]) not in notified:
                    missing += 1
                    if len(examples) < max_examples:
                        examples.append({"client": c, "eid": h["eid"], "topic": h["topic"]})
    return {"property": "completeness", "passed": missing == 0, "violations": missing,
            "expected": expected, "examples": examples}


def check_ooo_tags(history: Iterable[dict[str, Any]], *, max_examples: int = 5) -> dict[str, Any]:
    """Unreliable mode: an event is tagged out-of-order iff its timestamp is smaller
    (Definition 4) than that of an event the same subscriber notified before it."""
    wrong = tagged = 0
    examples: list[dict[str, Any]] = []
    for c, seq in _sequences(history).items():
        seen: list[dict[int, int]] = []
        for h in seq:
            ts = ts_from_wire(h["ts"])
            late = any(ts_less(ts, prev) for prev in seen)
            tagged += bool(h.get("ooo"))
            if late != bool(h.get("ooo")):
                wrong += 1
                if len(examples) < max_examples:
                    examples.append({"client": c, "eid": h["eid"], "tagged": bool(h.get("ooo")),
                                     "late": late})
            seen.append(ts)
    return {"property": "ooo_tagging", "passed": wrong == 0, "violations": wrong,
            "tagged": tagged, "examples": examples}
