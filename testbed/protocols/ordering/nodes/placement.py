"""Topic -> TM server placement (``placement.topic_managers``): range, hash, explicit.

Topics are numbered ``0 .. topics-1``. ``range`` gives contiguous blocks in server
order (the paper: topics 1-200 on server 1, 201-400 on server 2, ...; here 0-199,
200-399, ...), ``hash`` the sha256 of the topic id modulo the number of servers,
``explicit`` an ``assign: {server: [topic, ...]}`` map.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable


def make_placement(tm: dict[str, Any]) -> Callable[[int], str]:
    """A function topic -> server name from a ``placement.topic_managers`` mapping."""
    table = placement_table(tm)

    def where(topic: int) -> str:
        try:
            return table[topic]
        except IndexError:
            raise ValueError(f"topic {topic} outside 0..{len(table) - 1}") from None

    return where


def placement_table(tm: dict[str, Any]) -> list[str]:
    """``table[topic] = server`` for every topic."""
    n = int(tm["topics"])
    servers = list(tm["servers"])
    strategy = tm.get("strategy", "range")
    if strategy == "range":
        block = -(-n // len(servers))
        return [servers[t // block] for t in range(n)]
    if strategy == "hash":
        return [servers[int.from_bytes(hashlib.sha256(str(t).encode()).digest()[:8], "big")
                        % len(servers)] for t in range(n)]
    if strategy == "explicit":
        table = [""] * n
        for server, topics in (tm.get("assign") or {}).items():
            for t in topics:
                table[t] = server
        missing = [t for t in range(n) if not table[t]]
        if missing:
            raise ValueError(f"explicit placement: topics without a server: {missing[:5]}")
        return table
    raise ValueError(f"unknown placement strategy {strategy!r}")


def topics_of(tm: dict[str, Any], server: str) -> list[int]:
    return [t for t, s in enumerate(placement_table(tm)) if s == server]


def rank_table(tm: dict[str, Any]) -> list[int]:
    """``rank[topic]``: the topic's position in the precedence ``->`` (smaller = higher rank).

    Topics are ranked by the position of their TM server in ``servers``, then by id:
    every timestamp chain then visits the servers in one direction, each at most once
    (see :class:`testbed.protocols.ordering.nodes.core.TMHost`, the pipeline). With ``range``
    placement this is the topic id order itself.
    """
    table = placement_table(tm)
    pos = {s: i for i, s in enumerate(tm["servers"])}
    n = len(table)
    return [pos[s] * n + t for t, s in enumerate(table)]
