"""The resolved Plan: every node, link, client group and fault, with nothing left implicit.

This is the contract between ``topology/`` (which produces it with
``expand(topology) -> Plan``) and everything downstream (render, providers,
faults, runs). It is plain frozen data with a lossless JSON form
(``Plan.to_dict`` / ``Plan.from_dict``) stored as ``plan.json`` in each run
directory.

Units inside a Plan are fixed: seconds for times (``*_s``), milliseconds for
link delays (``*_ms``), bits/s for link rates, fractions (0..1) for loss,
bytes for sizes, messages per second for client rates.

Processes: every entry of ``Plan.nodes`` is one OS process / container. The
topology's ``nodes`` become processes of their role; every client group of the
topology becomes one more process (``kind == "clients"``) that hosts
``count`` logical clients.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

LINK_DISTRIBUTIONS = ("uniform", "normal", "pareto", "paretonormal")


@dataclass(frozen=True)
class LinkSpec:
    """Egress emulation for one directed pair (src -> dst)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    distribution: str = "normal"
    loss: float = 0.0  # fraction 0..1
    rate_bps: int | None = None  # None = unlimited
    reorder: bool = False  # False keeps FIFO even with jitter
    up: bool = True

    def merged(self, **overrides: Any) -> "LinkSpec":
        """A copy with the given fields replaced (None values are ignored)."""
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        # asdict's result, built directly: every field is a scalar, and a 100-process plan has
        # 9,900 links (asdict's recursive copy was most of writing plan.json and the configs)
        return {"delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms, "distribution": self.distribution,
                "loss": self.loss, "rate_bps": self.rate_bps, "reorder": self.reorder, "up": self.up}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LinkSpec":
        return cls(**d)


@dataclass(frozen=True)
class HostPlan:
    name: str
    address: str | None = None  # None = this machine
    user: str | None = None
    site: str | None = None
    port: int = 22
    key: str | None = None  # path to a private key on the controller (never copied)
    docker: str | None = None  # e.g. "ssh://user@addr" for a remote Docker engine
    extra: dict[str, Any] = field(default_factory=dict)
    become: bool = False  # ansible provider: the user may become root (sudo) on this host
    runtime: str = "auto"  # ansible provider: auto | docker (a container per node) | process
    cpu: float | None = None  # cores for every process on this host together (None: no limit)
    memory_bytes: int | None = None  # memory for every process on this host together


@dataclass(frozen=True)
class ClientGroupPlan:
    """A group of ``count`` logical clients hosted by one client process."""

    name: str
    role: str  # publisher | subscriber | (protocol-specific roles)
    count: int
    attach: tuple[str, ...]  # brokers; logical client i attaches to attach[i % len(attach)]
    rate_per_s: float | None = None  # per logical client, messages/s
    size_bytes: int | None = None  # payload size
    filter: str | None = None  # subscription filter text (content-based)
    extra: dict[str, Any] = field(default_factory=dict)  # protocol-specific keys, validated there


@dataclass(frozen=True)
class NodePlan:
    """One process: a protocol node or a client-hosting process."""

    name: str
    kind: str  # "node" | "clients"
    role: str  # broker | tm-server | ... ; for kind == "clients": the group's role
    site: str
    host: str
    neighbors: tuple[str, ...] = ()  # overlay neighbours (undirected; both ends list each other)
    cell: str | None = None
    clients: ClientGroupPlan | None = None  # set iff kind == "clients"
    extra: dict[str, Any] = field(default_factory=dict)  # protocol-specific node keys
    cpu: float | None = None  # this process's CPU limit in cores: its own key, else its host's
    memory_bytes: int | None = None  # this process's memory limit: its own key, else its host's
    # per-message service time: {"mean_s": float, "distribution": "exponential" | "constant"} or None
    service: dict[str, Any] | None = None


@dataclass(frozen=True)
class Action:
    """One primitive action of the fault timeline, at ``at_s`` after workload start.

    ``op`` is one of:
      crash, restart, pause, resume            target: (node,)
      stall, unstall                           target: (node,)
      cut, heal                                target: (a, b) -- both directions
      partition, heal_partition                groups: ((n, ...), (n, ...), ...) resolved to nodes
      set_link                                 links: {"src->dst": LinkSpec} (full new specs)
      throttle, unthrottle                     target: (node,); cpu: the share in cores from now on
                                               (unthrottle: the node's own limit again, None = none)
      <a protocol's own kind> (e.g. move)      target: the nodes called; call: {op, args, any, text}
                                               (a control op of the protocol's nodes; see
                                               ``ScheduleAction`` in topology/protocols)
    ``fault`` is the index of the ``faults`` entry it came from (for attribution);
    ``window`` is that fault's [start, end] in seconds (end = start for instant faults
    whose effect lasts until a later action, e.g. crash until restart: the expander
    sets the window of a crash to end at the matching restart or the end of the run).
    """

    at_s: float
    op: str
    fault: int
    target: tuple[str, ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()
    links: dict[str, LinkSpec] = field(default_factory=dict)
    window: tuple[float, float] = (0.0, 0.0)
    source: str = ""  # the fault as written, for display, e.g. "{at: 8s, stall: b1, for: 2.5s}"
    close: bool = False  # cut: also close the connection (both ends detect it at once)
    call: dict[str, Any] = field(default_factory=dict)  # a protocol action's control call ({} otherwise)
    cpu: float | None = None  # throttle/unthrottle: the node's CPU share in cores from this action on

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["links"] = {k: v.to_dict() for k, v in self.links.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Action":
        d = dict(d)
        d["target"] = tuple(d.get("target", ()))
        d["groups"] = tuple(tuple(g) for g in d.get("groups", ()))
        d["links"] = {k: LinkSpec.from_dict(v) for k, v in d.get("links", {}).items()}
        d["window"] = tuple(d.get("window", (0.0, 0.0)))
        return cls(**d)


@dataclass(frozen=True)
class Plan:
    name: str
    protocol: str
    provider: str
    duration_s: float
    seed: int
    sites: tuple[str, ...]
    hosts: dict[str, HostPlan]
    nodes: dict[str, NodePlan]  # every process, protocol nodes first, then client processes
    links: dict[str, LinkSpec]  # "src->dst" for every ordered pair of distinct processes
    actions: tuple[Action, ...]  # the fault timeline, sorted by at_s (stable)
    params: dict[str, Any] = field(default_factory=dict)  # validated protocol params
    derived: dict[str, str] = field(default_factory=dict)  # param -> why: set from the topology (derive hook)
    placement: dict[str, Any] = field(default_factory=dict)
    point: dict[str, Any] = field(default_factory=dict)  # the sweep point this plan is for
    repeat_index: int = 0
    # Where the plan came from. Not part of plan.json (``to_dict``); a run directory
    # stores them as topology.yaml / topology.rendered.yaml. Ignored by ``==``.
    source_path: str = field(default="", compare=False, repr=False)
    source_text: str = field(default="", compare=False, repr=False)  # the file as given
    rendered_text: str = field(default="", compare=False, repr=False)  # after Jinja2

    # -- helpers -------------------------------------------------------------
    def link(self, src: str, dst: str) -> LinkSpec:
        return self.links[f"{src}->{dst}"]

    def egress(self, src: str) -> dict[str, LinkSpec]:
        """Every destination's LinkSpec for one source process."""
        prefix = f"{src}->"
        return {k[len(prefix):]: v for k, v in self.links.items() if k.startswith(prefix)}

    def egress_all(self) -> dict[str, dict[str, LinkSpec]]:
        """``{src: egress(src)}`` for every process, in one pass over the links (``egress`` per
        process is a pass each: quadratic in the processes)."""
        out: dict[str, dict[str, LinkSpec]] = {n: {} for n in self.nodes}
        for k, v in self.links.items():
            src, sep, dst = k.partition("->")
            if sep and src in out:
                out[src][dst] = v
        return out

    def node_seed(self, node: str) -> int:
        """A per-node seed derived from the plan seed (stable across Python runs)."""
        import hashlib

        h = hashlib.sha256(f"{self.seed}/{self.repeat_index}/{node}".encode()).digest()
        return int.from_bytes(h[:4], "big")

    # -- JSON ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "protocol": self.protocol,
            "provider": self.provider,
            "duration_s": self.duration_s,
            "seed": self.seed,
            "sites": list(self.sites),
            "hosts": {k: asdict(v) for k, v in self.hosts.items()},
            "nodes": {k: _node_to_dict(v) for k, v in self.nodes.items()},
            "links": {k: v.to_dict() for k, v in self.links.items()},
            "actions": [a.to_dict() for a in self.actions],
            "params": self.params,
            **({"derived": self.derived} if self.derived else {}),
            "placement": self.placement,
            "point": self.point,
            "repeat_index": self.repeat_index,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Plan":
        return cls(
            name=d["name"],
            protocol=d["protocol"],
            provider=d["provider"],
            duration_s=d["duration_s"],
            seed=d["seed"],
            sites=tuple(d["sites"]),
            hosts={k: HostPlan(**v) for k, v in d["hosts"].items()},
            nodes={k: _node_from_dict(v) for k, v in d["nodes"].items()},
            links={k: LinkSpec.from_dict(v) for k, v in d["links"].items()},
            actions=tuple(Action.from_dict(a) for a in d["actions"]),
            params=d.get("params", {}),
            derived=d.get("derived", {}),
            placement=d.get("placement", {}),
            point=d.get("point", {}),
            repeat_index=d.get("repeat_index", 0),
        )


def _node_to_dict(n: NodePlan) -> dict[str, Any]:
    d = asdict(n)
    if d.get("service") is None:
        d.pop("service", None)  # plans without it stay as they were (run-index fingerprints)
    d["neighbors"] = list(n.neighbors)
    if n.clients is not None:
        d["clients"]["attach"] = list(n.clients.attach)
    return d


def _node_from_dict(d: dict[str, Any]) -> NodePlan:
    d = dict(d)
    d["neighbors"] = tuple(d.get("neighbors", ()))
    if d.get("clients"):
        c = dict(d["clients"])
        c["attach"] = tuple(c["attach"])
        d["clients"] = ClientGroupPlan(**c)
    return NodePlan(**d)


__all__ = [
    "LINK_DISTRIBUTIONS",
    "LinkSpec",
    "HostPlan",
    "ClientGroupPlan",
    "NodePlan",
    "Action",
    "Plan",
    "fields",
]
