"""Views of routing tables for the transaction brokers (snapshots are ``RoutingTable.clone()``)."""

from __future__ import annotations

from testbed.protocols.pubsub.nodes.routing import RoutingTable


def table_ids(t: RoutingTable) -> tuple[dict[str, str], dict[str, str]]:
    """({adv id: last hop}, {sub id: last hop}) of a table."""
    return ({i: e.hop for i, e in t.srt.items()}, {i: e.hop for i, e in t.prt.items()})
