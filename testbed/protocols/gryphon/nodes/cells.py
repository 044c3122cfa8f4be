"""Cells, the virtual broker tree and link bundles (Sec 3, 3.1). Pure, stdlib only.

A node's ``cell`` key (TOPOLOGY.md) groups physical brokers into one virtual
broker; a broker without a cell is a cell of its own. Virtual links join cells
whose members are overlay neighbours; a virtual link is a *link bundle* of the
physical neighbour pairs. The knowledge tree of a pubend is the BFS spanning
tree of the cell graph rooted at the cell of its pubend-hosting broker (PHB).
"""

from __future__ import annotations

import hashlib
from collections import deque
from typing import Any, Iterable


def pubend_id(phb: str, client: str) -> str:
    return f"{phb}/{client}"


def phb_of(pubend: str) -> str:
    return pubend.split("/", 1)[0]


def pubend_ordinal(pubend: str) -> int:
    """A pubend's position among its PHB's pubends, for round-robin over a link bundle.

    Publishing clients are named ``<group>-<i>`` (the pubend ``<phb>/<group>-<i>``): the
    ordinal is ``i`` plus an offset from the group name (sha256, so that several groups on
    one PHB do not all start on the same link). A name without a numeric suffix hashes.
    """
    client = pubend.split("/", 1)[-1]
    group, _, idx = client.rpartition("-")
    if group and idx.isdigit():
        return int(idx) + int.from_bytes(hashlib.sha256(group.encode()).digest()[:4], "big")
    return int.from_bytes(hashlib.sha256(pubend.encode()).digest()[:4], "big")


def bundle_pick(pubend: str, links: Iterable[str]) -> str | None:
    """The link of a bundle (sorted) that carries ``pubend``'s traffic: round-robin over the
    PHB's pubends (stable across processes and restarts).

    Sec 3.1: "messages from about half the pubends hosted by p1 will flow to IB1 along
    p1-b1, and half along p1-b2"; Sec 4.2: b1 and b2 were "each ... handling messages from 2
    of the 4 pubends". (Hashing each pubend id, sha256 mod 2, sent 3 of Fig 3's 4 to b1.)
    """
    ls = sorted(links)
    if not ls:
        return None
    return ls[pubend_ordinal(pubend) % len(ls)]


class CellMap:
    def __init__(self, directory: dict[str, dict[str, Any]]) -> None:
        self.brokers = sorted(n for n, d in directory.items() if d.get("kind") == "node")
        self.cell_of: dict[str, str] = {n: (directory[n].get("cell") or n) for n in self.brokers}
        self.members: dict[str, list[str]] = {}
        for n in self.brokers:
            self.members.setdefault(self.cell_of[n], []).append(n)
        self.neighbors: dict[str, set[str]] = {n: set() for n in self.brokers}
        for n in self.brokers:
            for m in directory[n].get("neighbors") or ():
                if m in self.neighbors:
                    self.neighbors[n].add(m)
                    self.neighbors[m].add(n)
        self.cell_adj: dict[str, set[str]] = {c: set() for c in self.members}
        for n, ms in self.neighbors.items():
            for m in ms:
                a, b = self.cell_of[n], self.cell_of[m]
                if a != b:
                    self.cell_adj[a].add(b)
                    self.cell_adj[b].add(a)
        self._trees: dict[str, tuple[dict[str, str | None], dict[str, list[str]]]] = {}

    def tree(self, root: str) -> tuple[dict[str, str | None], dict[str, list[str]]]:
        """(parent, children) of every cell in the BFS tree rooted at cell ``root``."""
        if root not in self._trees:
            parent: dict[str, str | None] = {root: None}
            children: dict[str, list[str]] = {c: [] for c in self.members}
            q = deque([root])
            while q:
                c = q.popleft()
                for d in sorted(self.cell_adj.get(c, ())):
                    if d not in parent:
                        parent[d] = c
                        children[c].append(d)
                        q.append(d)
            self._trees[root] = (parent, children)
        return self._trees[root]

    def children(self, pubend: str, cell: str) -> list[str]:
        return self.tree(self.cell_of[phb_of(pubend)])[1].get(cell, [])

    def parent(self, pubend: str, cell: str) -> str | None:
        return self.tree(self.cell_of[phb_of(pubend)])[0].get(cell)

    def subtree(self, pubend: str, cell: str) -> set[str]:
        _, ch = self.tree(self.cell_of[phb_of(pubend)])
        out, stack = set(), [cell]
        while stack:
            c = stack.pop()
            for d in ch.get(c, ()):
                out.add(d)
                stack.append(d)
        return out

    def cell_peers(self, node: str) -> list[str]:
        return [m for m in self.members[self.cell_of[node]] if m != node]

    def links_to(self, node: str, cell: str) -> list[str]:
        """The physical links of the bundle from ``node`` towards ``cell``."""
        return sorted(m for m in self.members.get(cell, ()) if m in self.neighbors[node])
