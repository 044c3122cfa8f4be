"""Protocol-specific parts of a topology, one module per protocol.

``PROTOCOLS[name]`` imports ``testbed/topology/protocols/<name>.py`` on first
use. Each module defines:

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
``ACYCLIC``       ``"forest"`` (the neighbour graph must have no cycle),
                  ``"cells"`` (no cycle after collapsing each ``cell`` into one
                  vertex) or ``None`` (any graph).
``check``         optional ``check(topology) -> list[Problem]`` for rules the
                  models cannot express; it runs only when the rest of the file
                  is valid. Build problems with ``topology.problem(keys, msg)``
                  so they carry the user's line:col.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType

NAMES = ("pubsub", "ordering", "gryphon", "transactions", "mobility")


class _Registry(Mapping[str, ModuleType]):
    """name -> protocol module, imported lazily."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names

    def __getitem__(self, name: str) -> ModuleType:
        if name not in self._names:
            raise KeyError(name)
        return importlib.import_module(f"{__name__}.{name}")

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


PROTOCOLS: Mapping[str, ModuleType] = _Registry(NAMES)


def client_params_model(module: ModuleType, role: str):
    """The ClientParams model of ``module`` for a client ``role`` (None if the role takes none)."""
    cp = getattr(module, "ClientParams", None)
    if isinstance(cp, dict):
        return cp.get(role)
    return cp


__all__ = ["PROTOCOLS", "NAMES", "client_params_model"]
