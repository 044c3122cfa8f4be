"""Topology rules of the ``ordering`` protocol (see protocols/__init__.py for the interface).

Every key is documented in docs/ordering.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictInt, model_validator

from testbed.protocols.ordering.nodes.workload import FOREIGN_EPS
from testbed.topology.schema import Name, StrictModel
from testbed.topology.units import Time


class Params(StrictModel):
    """Top-level ``params`` of an ordering topology.

    ``ens``: reliable (Sec 3.4: buffer until in order) or unreliable (Sec 4: a buffer of
    ``buffer`` events, each held at most ``ttl``; late events notified tagged out-of-order).
    ``retry``: re-send unanswered timestamp/subscription requests after this long (0 = never).
    ``order``: total (Definition 1) or causal (Sec 4: one shared subscription suffices).
    ``ens_settle``: how long after sending an ENS subscription it counts as active. Left out, it
    is derived from the topology (``derive``): what an ENS subscription needs to become active
    at every broker (``ens_propagation_s`` + ``ENS_SETTLE_MARGIN_S``), rounded up to 0.1 s, and
    never below ``ENS_SETTLE_FLOOR_S``; written too short, it is an error (``check``).
    ``diffuse``: publish timestamped events on the ENS (false: timestamping only; no subscription
    dummies either, since no event reaches a subscriber).
    ``log_notify``: log every notification (needed by the TNO/completeness checks).
    ``warmup``: publications start this long after the workload start (subscriptions first).
    ``pipeline``: false routes chains as the paper does (topic id order, straight to the next
    topic's server), which lets chains overtake each other (issue #11); for comparison only.
    ``tm_recovery``: TM servers keep their state on stable storage and resend chain messages
    between them until acknowledged, so a TM server survives crash + restart (with ``retry``).
    ``stuck_after``: a client logs ``o_stuck`` (with what it waits for) for an event held back
    this long (the liveness check reads it).
    ``settle``: wait after the nodes are up before the workload starts (the clients subscribe
    when they start; a client process busy with the subscription phase answers its control
    channel only after it, so the figure topologies wait for it).
    ``foreign_eps``: with shape 0.901, each client's subscription holds, with this probability
    (independent of ``topics_per_client``), one topic of another site instead of one of its own
    site's. Default 0.05 from Sec 5.2: "just a small percentage of the clients of a geographic
    region subscribe to topics that are outside their region" (testbed/protocols/ordering/nodes/workload.py).
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
    tm_recovery: StrictBool = False
    pipeline: StrictBool = True
    foreign_eps: float = Field(default=FOREIGN_EPS, ge=0.0, le=1.0)
    settle: Time = 1.0


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
    popularity, 0.349 spray-and-diffuse; see testbed/protocols/ordering/nodes/workload.py)."""

    topics_per_client: StrictInt = Field(default=10, ge=0)
    shape: Literal[0.901, 0.349] = 0.901


NODE_ROLES = {"broker", "tm-server"}
CLIENT_ROLES = {"client", "publisher", "subscriber"}
ACYCLIC = None
BUILDS_ON = ("pubsub",)  # its nodes reuse the pub/sub core (its events appear in the runs)


ENS_SETTLE_MARGIN_S = 0.1  # processing on the way, on top of the links' worst delays
ENS_SETTLE_FLOOR_S = 0.3  # the default ens_settle where the links need less (a LAN)


def ens_propagation_s(topology) -> tuple[float, list[str]]:
    """How long an ENS subscription may need before it is active at every broker.

    Advertisements flood the broker tree from each client process's broker, and a
    subscription only travels towards brokers whose advertisement reached its own: on the
    longest tree path that is one crossing for the advertisement and one back for the
    subscription, each link at its worst (``delay + 4 jitter``, as the liveness bound).
    Returns (seconds, the path's end brokers).
    """
    from collections import deque

    from testbed.topology.expand import key, resolve_hosts, resolve_links, resolve_processes

    nodes = resolve_processes(topology, resolve_hosts(topology))
    specs = resolve_links(topology, nodes)
    brokers = [n for n, p in nodes.items() if p.role == "broker"]

    def hop(a: str, b: str) -> float:
        worst = 0.0
        for k in (key(a, b), key(b, a)):
            sp = specs.get(k)
            if sp is not None:
                span = 1.0 if sp.distribution == "uniform" else 4.0
                worst = max(worst, sp.delay_ms + span * sp.jitter_ms)
        return worst / 1e3

    best, ends = 0.0, []
    for src in brokers:
        dist, todo = {src: 0.0}, deque([src])
        while todo:
            b = todo.popleft()
            for n in nodes[b].neighbors:
                if n in nodes and nodes[n].role == "broker" and n not in dist:
                    dist[n] = dist[b] + hop(b, n)
                    todo.append(n)
        for dst, d in dist.items():
            if d > best:
                best, ends = d, [src, dst]
    return 2 * best, ends


def _ens_settle_need(topology) -> tuple[float, list[str]]:
    need, ends = ens_propagation_s(topology)
    return need + ENS_SETTLE_MARGIN_S, ends


def _round_up(x: float) -> float:
    return -(-round(x * 1e6) // 100_000) / 10  # up to 0.1 s (a float's noise is not a step)


def derive(topology) -> dict:
    """Defaults that depend on the topology: ``ens_settle`` (with a reliable ENS that diffuses
    events) covers an ENS subscription's propagation over this topology's links."""
    params = topology.protocol_params
    if params is None or params.ens != "reliable" or not params.diffuse:
        return {}
    need, ends = _ens_settle_need(topology)
    value = max(ENS_SETTLE_FLOOR_S, _round_up(need))
    why = (f"an ENS subscription needs {need:.3f}s to become active at every broker (advertisement "
           f"out and subscription back along {ends[0]}..{ends[1]}, plus {ENS_SETTLE_MARGIN_S:g}s), "
           f"rounded up to 0.1s, at least {ENS_SETTLE_FLOOR_S:g}s") if ends else \
          f"one broker: the floor {ENS_SETTLE_FLOOR_S:g}s"
    return {"ens_settle": (value, why)}


def check(topology) -> list:
    """Topic-manager servers and explicit assignments must name nodes of the topology; with a
    reliable ENS, ``ens_settle`` must cover an ENS subscription's propagation (issue #11: a
    subscription that is not yet active where a subscriber publishes its subscriptionUpdate
    dummy loses the dummy, and every event after it on that topic waits for it forever)."""
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
    params = topology.protocol_params
    if problems or params is None or params.ens != "reliable" or not params.diffuse:
        return problems
    if "ens_settle" not in params.model_fields_set:
        return problems  # left out: derived from the topology (derive), long enough by construction
    need, ends = _ens_settle_need(topology)
    if params.ens_settle < need:
        problems.append(topology.problem(
            ("params", "ens_settle"),
            f"ens_settle {params.ens_settle:g}s is shorter than an ENS subscription may need to "
            f"become active at every broker ({need:.3f}s: advertisement out and subscription back "
            f"along {ends[0]}..{ends[1]}, plus {ENS_SETTLE_MARGIN_S:g}s); set "
            f"params.ens_settle to at least {_round_up(need):g}s (or leave it out: it is then derived)"))
    return problems


# -- testbed graph --------------------------------------------------------------------------------
def _ranges(nums: list[int]) -> str:
    """``[0,1,2,5,7,8]`` -> ``0-2,5,7-8``."""
    out: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    text = ",".join(out)
    return text if len(text) <= 40 else text[:37] + "..."


def graph_hints(plan):
    """``testbed graph``: each TM server labelled with the topics it hosts (``placement.topic_managers``)."""
    from collections import defaultdict

    from testbed.protocols.ordering.nodes.placement import placement_table  # pure: topic -> server
    from testbed.topology.protocols import GraphHints

    tm = plan.placement.get("topic_managers") if isinstance(plan.placement, dict) else None
    if not isinstance(tm, dict) or not tm.get("servers"):
        return GraphHints()
    try:
        table = placement_table(tm)
    except (KeyError, ValueError, ZeroDivisionError):
        return GraphHints()
    by: dict[str, list[int]] = defaultdict(list)
    for t, s in enumerate(table):
        by[s].append(t)
    strategy = tm.get("strategy", "range")
    return GraphHints(labels={s: f"TM: {len(by.get(s, []))} topics {_ranges(by.get(s, []))} ({strategy})"
                              for s in tm["servers"]})
