"""Protocol-specific parts of a topology, one module per protocol.

``PROTOCOLS[name]`` imports the protocol's topology module on first use: for a
built-in protocol ``testbed/topology/protocols/<name>.py``, for an external one
the module its ``testbed.protocols`` entry point names. The names come from the
protocol registry (:mod:`testbed.protocols`), which finds the built-ins by
scanning this package: adding a file here adds a protocol. Each module defines:

``Params``        pydantic model for the top-level ``params`` mapping
                  (subclass :class:`testbed.topology.schema.StrictModel`;
                  use ``testbed.topology.units.Time`` etc., so times come out
                  in seconds). Dumped with ``model_dump()`` into ``Plan.params``.
``Placement``     pydantic model for ``placement`` (dumped into ``Plan.placement``).
``ClientParams``  pydantic model for a client group's ``params`` key, or a dict
                  ``{role: model}`` when roles take different keys. Dumped into
                  ``ClientGroupPlan.extra``.
``NODE_ROLES``    set of allowed ``nodes.*.role`` values.
``CLIENT_ROLES``  set of allowed ``clients.*.role`` values.
``BUILDS_ON``     optional tuple of protocols whose node code this one reuses
                  (the pub/sub core, for one): their events appear in its runs too.
``ACYCLIC``       ``"forest"`` (the neighbour graph must have no cycle),
                  ``"cells"`` (no cycle after collapsing each ``cell`` into one
                  vertex) or ``None`` (any graph).
``check``         optional ``check(topology) -> list[Problem]`` for rules the
                  models cannot express; it runs only when the rest of the file
                  is valid. Build problems with ``topology.problem(keys, msg)``
                  so they carry the user's line:col.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import ModuleType

TOPOLOGY_ATTRS = ("Params", "Placement", "ClientParams", "NODE_ROLES", "CLIENT_ROLES", "ACYCLIC")


class _Registry(Mapping[str, ModuleType]):
    """name -> topology module, from the protocol registry, imported lazily."""

    def __getitem__(self, name: str) -> ModuleType:
        from testbed import protocols

        p = protocols.registry().find(name)
        if p is None:
            raise KeyError(name)
        return p.topology_module()

    def __iter__(self) -> Iterator[str]:
        from testbed import protocols

        return iter(protocols.names())

    def __len__(self) -> int:
        from testbed import protocols

        return len(protocols.names())

    def __contains__(self, name: object) -> bool:
        from testbed import protocols

        return isinstance(name, str) and name in protocols.registry()


PROTOCOLS: Mapping[str, ModuleType] = _Registry()


def client_params_model(module: ModuleType, role: str):
    """The ClientParams model of ``module`` for a client ``role`` (None if the role takes none)."""
    cp = getattr(module, "ClientParams", None)
    if isinstance(cp, dict):
        return cp.get(role)
    return cp


__all__ = ["PROTOCOLS", "TOPOLOGY_ATTRS", "client_params_model"]
