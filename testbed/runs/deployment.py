"""The deployment record: where every node of a run can be reached (``deployment.json``).

Written by a provider's ``up``, read by the run directory, the schedule runner and the
control-channel pool. A plain record, so :mod:`testbed.runs.rundir` can load it without
importing any provider.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Endpoint:
    """Where a node can be reached from the controller and from other nodes."""

    node: str
    host: str  # plan host name
    data: tuple[str, int]  # address other nodes use
    control: tuple[str, int]  # address the controller uses
    handle: str = ""  # pid, container id, ...
    # None: the controller connects to ``control`` over TCP. Else the SSH target through which
    # ``control`` is reached (address, port, user, key path, kind: testbed/providers/tunnel.py):
    # remote control ports listen on the host's loopback (ansible) or on a container address only
    # the engine host reaches (docker on an ssh:// engine).
    tunnel: dict[str, Any] | None = None


@dataclass
class Deployment:
    run_id: str
    provider: str
    emulation: str  # "userspace" | "kernel"
    endpoints: dict[str, Endpoint]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["endpoints"] = {k: asdict(v) for k, v in self.endpoints.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Deployment":
        eps = {
            k: Endpoint(v["node"], v["host"], tuple(v["data"]), tuple(v["control"]), v.get("handle", ""),
                        v.get("tunnel"))
            for k, v in d["endpoints"].items()
        }
        return cls(d["run_id"], d["provider"], d["emulation"], eps, d.get("extra", {}))
