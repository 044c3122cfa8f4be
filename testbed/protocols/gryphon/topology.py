"""Topology rules of the ``gryphon`` protocol (Bhola et al., exactly-once delivery).

``params`` (times in seconds once validated; the node side reads the same keys,
see ``testbed/protocols/gryphon/nodes/broker.py:DEFAULTS``):

``mode``          ``gd`` (guaranteed delivery) or ``best-effort`` (no knowledge, curiosity,
                  logging or retransmission: the Fig 4-5 baseline)
``gct``           gap curiosity threshold
``nrt``           the minimum nack repetition interval (NRT is estimated like TCP's RTO)
``nrt_max``       the cap of NRT's exponential backoff
``aet``           ack expected threshold at pubends
``dct``           delay curiosity threshold (``inf``: none)
``ack_interval``  how often subends/brokers send consolidated acks upstream
``ls_interval``   period of the link status messages between neighbours and cell peers
``link_timeout``  a neighbour not heard for this long is treated as failed (a crash is
                  seen at once through the lost connection)
``log_sync``      group-commit interval of the PHB's stable log (fsync)
``log_force``     how long a force of the PHB's log takes before its messages are published
                  (default 100ms: Sec 4.1, the GD - best-effort latency "difference of about
                  100ms is due to the delay introduced by the logging of guaranteed messages
                  at the PHB"; our fsync takes well under 1 ms)
``silence``       a pubend idle for this long turns its Q ticks up to now into F
``nack_chunk``    nacks are chopped into ranges of at most this many ticks (ms)
``settle``        wait after the nodes are up before the workload starts

Client group ``params``: publishers ``attr_space`` (messages carry ``k = n % attr_space``);
subscribers ``filter_mod`` (client i subscribes ``[k,eq,i % filter_mod]``) and ``connection``
(``shared``, the default: the group's subscribers share its process's connection to the SHB;
``dedicated``: each subscriber has a TCP connection of its own, over which the SHB delivers to
it, as in the paper's Sec 4.1, so the SHB pays a write per subscriber connection).

A subscriber group's ``filter`` is in the pubsub protocol's language and is checked
with the same parser the nodes use (``testbed.protocols.pubsub.nodes.filters``, see
``testbed/protocols/pubsub/topology.py``); no filter means everything. Messages carry
the attributes ``k`` (a number) and ``src`` (the publishing client's name).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from testbed.protocols.pubsub.topology import parse_filter
from testbed.topology.schema import StrictModel
from testbed.topology.units import Time, TimeOrInf


class Params(StrictModel):
    """Top-level ``params`` of a gryphon topology (times in seconds once validated)."""

    mode: Literal["gd", "best-effort"] = "gd"
    gct: Time = 0.2
    nrt: Time = 0.6
    nrt_max: Time = 10.0
    aet: Time = 10.0
    dct: TimeOrInf = float("inf")
    ack_interval: Time = 0.1
    ls_interval: Time = 0.2
    link_timeout: Time = 1.0
    log_sync: Time = 0.005
    log_force: Time = 0.1
    silence: Time = 0.5
    nack_chunk: Time = 0.5
    settle: Time = 1.0


class Placement(StrictModel):
    """``placement`` of a gryphon topology."""


class PublisherParams(StrictModel):
    attr_space: int = Field(1000, ge=1)


class SubscriberParams(StrictModel):
    filter_mod: int | None = Field(None, ge=1)
    # Sec 4.1: "each subscriber ... on a dedicated TCP connection" to its SHB; ``shared``: the
    # group's subscribers share their process's one connection (cheaper, the SHB's per-connection
    # cost is gone)
    connection: Literal["shared", "dedicated"] = "shared"


ClientParams = {"publisher": PublisherParams, "subscriber": SubscriberParams}

NODE_ROLES = {"broker"}
CLIENT_ROLES = {"publisher", "subscriber"}
ACYCLIC = "cells"
BUILDS_ON = ("pubsub",)  # reuses the core's filter language (nodes.summary) and topology keys


def check(topology) -> list:
    """Client filters (the pubsub parser), which the models alone cannot judge."""
    problems = []
    for name, g in topology.clients.items():
        if g.filter is None:
            continue
        if g.role != "subscriber":
            problems.append(topology.problem(("clients", name, "filter"), "publishers do not subscribe; remove filter"))
            continue
        try:
            parse_filter(g.filter)
        except ValueError as e:
            problems.append(topology.problem(("clients", name, "filter"), str(e)))
            continue
        cp = topology.client_params(name)
        if cp is not None and getattr(cp, "filter_mod", None) is not None:
            problems.append(topology.problem(("clients", name, "filter"),
                                             "params.filter_mod replaces the filter; give one of them"))
    return problems


def connections(plan) -> dict[str, int]:
    """Dedicated subscriber connections: the client process accepts one per subscriber, and each
    SHB opens one per subscriber attached to it."""
    out: dict[str, int] = {}
    for n in plan.nodes.values():
        g = n.clients
        if g is None or g.role != "subscriber" or (g.extra or {}).get("connection") != "dedicated":
            continue
        out[n.name] = out.get(n.name, 0) + g.count
        for i in range(g.count):
            b = g.attach[i % len(g.attach)]
            out[b] = out.get(b, 0) + 1
    return out


def graph_hints(plan):
    """``testbed graph``: every cell boxed inside its site (its members are replicas of one virtual
    broker); links between two cells drawn as a link bundle."""
    from testbed.topology.protocols import GraphHints

    return GraphHints(groups={n.name: n.cell for n in plan.nodes.values() if n.kind == "node" and n.cell},
                      group_word="cell", peer_word="cell peers", bundle_word="bundle")
