"""Topology rules of the ``ordering`` protocol (see protocols/__init__.py for the interface).

Every key is documented in docs/ordering.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictInt, model_validator

from testbed.topology.schema import Name, StrictModel
from testbed.topology.units import Time


class Params(StrictModel):
    """Top-level ``params`` of an ordering topology.

    ``ens``: reliable (Sec 3.4: buffer until in order) or unreliable (Sec 4: a buffer of
    ``buffer`` events, each held at most ``ttl``; late events notified tagged out-of-order).
    ``retry``: re-send unanswered timestamp/subscription requests after this long (0 = never).
    ``order``: total (Definition 1) or causal (Sec 4: one shared subscription suffices).
    ``ens_settle``: how long after sending an ENS subscription it counts as active.
    ``diffuse``: publish timestamped events on the ENS (false: timestamping only).
    ``log_notify``: log every notification (needed by the TNO/completeness checks).
    ``warmup``: publications start this long after the workload start (subscriptions first).
    ``stuck_after``: a client logs ``o_stuck`` (with what it waits for) for an event held back
    this long (the liveness check reads it).
    """

    ens: Literal["reliable", "unreliable"] = "reliable"
    buffer: StrictInt = Field(default=64, ge=1)
    ttl: Time = 1.0
    retry: Time = 0.0
    order: Literal["total", "causal"] = "total"
    ens_settle: Time = 0.3
    diffuse: StrictBool = True
    log_notify: StrictBool = True
    warmup: Time = 0.0
    stuck_after: Time = 0.5


class TopicManagers(StrictModel):
    """``placement.topic_managers``: which server hosts the topic manager of each topic.

    ``topics`` topics numbered 0..topics-1; ``strategy``: ``range`` (contiguous blocks
    in server order), ``hash`` (sha256 of the topic id), ``explicit`` (``assign``:
    server -> list of topic ids; every topic exactly once).
    """

    topics: StrictInt = Field(ge=1)
    strategy: Literal["range", "hash", "explicit"] = "range"
    servers: list[Name] = Field(min_length=1)
    assign: dict[Name, list[StrictInt]] | None = None

    @model_validator(mode="after")
    def _explicit(self) -> "TopicManagers":
        if self.strategy == "explicit":
            if not self.assign:
                raise ValueError("strategy explicit needs assign: {server: [topic, ...]}")
            seen = sorted(t for ts in self.assign.values() for t in ts)
            if seen != list(range(self.topics)):
                raise ValueError(f"assign must give every topic 0..{self.topics - 1} exactly once")
        elif self.assign is not None:
            raise ValueError("assign is only used with strategy explicit")
        return self


class Placement(StrictModel):
    """``placement`` of an ordering topology."""

    topic_managers: TopicManagers | None = None


class ClientParams(StrictModel):
    """A client group's ``params``: ``topics_per_client`` (k distinct topics subscribed per
    client) and ``shape`` of the per-site power-law popularity (0.901 geographic topic
    popularity, 0.349 spray-and-diffuse; see testbed/nodes/ordering/workload.py)."""

    topics_per_client: StrictInt = Field(default=10, ge=0)
    shape: Literal[0.901, 0.349] = 0.901


NODE_ROLES = {"broker", "tm-server"}
CLIENT_ROLES = {"client", "publisher", "subscriber"}
ACYCLIC = None


def check(topology) -> list:
    """Topic-manager servers and explicit assignments must name nodes of the topology."""
    problems = []
    tm = topology.protocol_placement.topic_managers if topology.protocol_placement else None
    if tm is None:
        return problems
    for i, server in enumerate(tm.servers):
        if server not in topology.nodes:
            problems.append(topology.problem(("placement", "topic_managers", "servers", i),
                                             f"topic-manager server {server!r} is not a node"))
    for server in tm.assign or {}:
        if server not in tm.servers:
            problems.append(topology.problem(("placement", "topic_managers", "assign", server),
                                             f"{server!r} is not one of the servers"))
    return problems
