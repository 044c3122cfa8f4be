"""A copy of a :class:`RoutingTable` that shares nothing mutable with the original.

Entries, filters and compiled matchers are never mutated in place by
``routing.py`` (they are replaced), so copying the dicts two levels deep is a
full snapshot at O(entries) dict work, much cheaper than ``copy.deepcopy``.
(The lead switches this to ``RoutingTable.clone()`` when that lands.)
"""

from __future__ import annotations

from testbed.nodes.pubsub.routing import MatchIndex, RoutingTable


def clone_table(t: RoutingTable) -> RoutingTable:
    n = RoutingTable.__new__(RoutingTable)
    n.neighbors = t.neighbors
    n._nset = t._nset
    n.covering = t.covering
    n.srt = dict(t.srt)
    n.advs_by_hop = {h: dict(d) for h, d in t.advs_by_hop.items()}
    n.prt = dict(t.prt)
    n.wanted = {h: dict(d) for h, d in t.wanted.items()}
    n.sent = {h: dict(d) for h, d in t.sent.items()}
    idx = MatchIndex()
    idx._eq = {a: {v: dict(slot) for v, slot in byval.items()} for a, byval in t.index._eq.items()}
    idx._scan = dict(t.index._scan)
    idx._where = dict(t.index._where)
    n.index = idx
    return n


def table_ids(t: RoutingTable) -> tuple[dict[str, str], dict[str, str]]:
    """({adv id: last hop}, {sub id: last hop}) of a table."""
    return ({i: e.hop for i, e in t.srt.items()}, {i: e.hop for i, e in t.prt.items()})
