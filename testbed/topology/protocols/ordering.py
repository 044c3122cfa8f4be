"""Topology rules of the ``ordering`` protocol (see protocols/__init__.py for the interface).

Minimal and strict for now: every key the protocol engineer adds must be
declared here (unknown keys are errors) and documented in docs/topology.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt, model_validator

from testbed.topology.schema import Name, StrictModel


class Params(StrictModel):
    """Top-level ``params`` of an ordering topology."""


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
    """A client group's ``params``."""


NODE_ROLES = {"broker", "tm-server"}
CLIENT_ROLES = {"publisher", "subscriber"}
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
