"""A client process attached to several brokers: its publications reach every subscriber.

The brokers' routing tables (the pub/sub core's pure layer) are wired into a line
b1 - b2 - b3; the client process ``cb`` has clients on b2 and b3, ``ca`` one on b1.
"""

from __future__ import annotations

from testbed.protocols.ordering.nodes.clients import ens_advertisements
from testbed.protocols.pubsub.nodes.filters import parse
from testbed.protocols.pubsub.nodes.routing import RoutingTable


def overlay(advs):
    tables = {"b1": RoutingTable(["b2"]), "b2": RoutingTable(["b1", "b3"]), "b3": RoutingTable(["b2"])}

    def run(broker, kind, mid, f, hop):
        t = tables[broker]
        outs = t.advertise(mid, parse(f), hop) if kind == "adv" else t.subscribe(mid, parse(f), hop)
        for o in outs:
            run(o.dst, o.kind, o.id, o.filter.text, broker)

    for b, msg in advs:
        run(b, "adv", msg["id"], msg["f"], f"cb/{msg['c']}")
    run("b1", "adv", "ca:adv", "[topic,>=,0]", "ca/ca.adv")
    run("b1", "sub", "ca-0:t5", "[topic,eq,5]", "ca/ca-0")  # a subscriber on b1
    return tables


def reaches_b1(tables, start: str) -> bool:
    """Follow a publication on topic 5 from a client of ``cb`` at ``start`` through the overlay."""
    todo, seen = [(start, "cb/cb-1")], set()
    while todo:
        b, frm = todo.pop()
        for h in tables[b].route({"topic": 5}, frm):
            if h == "ca/ca-0":
                return True
            if h in tables and (h, b) not in seen:
                seen.add((h, b))
                todo.append((h, b))
    return False


def test_each_broker_gets_its_own_advertisement():
    advs = ens_advertisements("cb", ["b2", "b3"])
    assert len({m["id"] for _, m in advs}) == 2
    tables = overlay(advs)
    assert reaches_b1(tables, "b2") and reaches_b1(tables, "b3")


def test_one_shared_advertisement_id_loses_publications():
    """What the client host did before: the same id at both brokers; b3's clients are cut off."""
    advs = [(b, {**m, "id": "cb:adv"}) for b, m in ens_advertisements("cb", ["b2", "b3"])]
    tables = overlay(advs)
    assert reaches_b1(tables, "b2")
    assert not reaches_b1(tables, "b3")
