"""Plan -> one node config dict per process (the contract in ``testbed/nodes/runtime/api.py``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from testbed.registry import node_class_path
from testbed.topology.protocols import connections as protocol_connections
from testbed.topology.plan import Plan

LOG_FLUSH_MS = 100


def directory(plan: Plan) -> dict[str, dict[str, Any]]:
    return {
        n.name: {"kind": n.kind, "role": n.role, "site": n.site, "cell": n.cell,
                 "neighbors": list(n.neighbors), "host": n.host}
        for n in plan.nodes.values()
    }


class PlanParts:
    """What every node's config takes from the whole plan, computed once for a provider's loop
    over the nodes (``render_node_config(..., parts=PlanParts(plan))``): the directory and each
    process's egress links. Without it each config recomputes them, a pass over all links per node."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.directory = directory(plan)
        self.egress = plan.egress_all()
        self.connections = protocol_connections(plan)


def render_node_config(
    plan: Plan,
    run_id: str,
    node: str,
    *,
    listen: tuple[str, int],
    control: tuple[str, int],
    peers: dict[str, tuple[str, int]],
    emulation: str,
    log_path: str,
    state_dir: str,
    secret: bytes,
    parts: PlanParts | None = None,
) -> dict[str, Any]:
    """The config of one process. Addresses are the provider's; everything else is the plan's.

    ``secret`` is the run's (``testbed.providers.control.run_secret``): the config holds it, so
    providers write configs mode 0600 (``write_private_json``) and never print them."""
    if parts is None or parts.plan is not plan:
        parts = None
    n = plan.nodes[node]
    egress = parts.egress[node] if parts is not None else plan.egress(node)
    conns = (parts.connections if parts is not None else protocol_connections(plan)).get(node, 0)
    clients = None
    if n.clients is not None:
        clients = asdict(n.clients)
        clients["attach"] = list(n.clients.attach)
    return {
        "run_id": run_id,
        "node": n.name,
        "kind": n.kind,
        "role": n.role,
        "protocol": plan.protocol,
        "node_class": node_class_path(plan.protocol, n.kind, n.role),
        "site": n.site,
        "cell": n.cell,
        "neighbors": list(n.neighbors),
        "extra": n.extra,
        "listen": list(listen),
        "control": list(control),
        "peers": {k: list(v) for k, v in peers.items() if k != node},
        "links": {dst: spec.to_dict() for dst, spec in egress.items()},
        "service": n.service,
        "emulation": emulation,
        "clients": clients,
        # one dict for every config of the plan when parts are given (the configs are written as
        # JSON and never changed in place)
        "directory": parts.directory if parts is not None else directory(plan),
        "params": plan.params,
        "placement": plan.placement,
        "seed": plan.node_seed(node),
        "repeat_index": plan.repeat_index,
        "duration_s": plan.duration_s,
        "log_path": log_path,
        "state_dir": state_dir,
        "log_flush_ms": LOG_FLUSH_MS,
        "connections": conns,
        "secret": secret.hex(),
    }
