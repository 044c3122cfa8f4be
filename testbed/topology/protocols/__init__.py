"""The contract of a protocol's topology module, and the lookup of one by name.

``PROTOCOLS[name]`` imports the protocol's topology module on first use: ``<its
package>.topology`` (``testbed/protocols/<name>/topology.py`` for a built-in protocol), or the
module its package names as ``TOPOLOGY``. The names come from the protocol registry
(:mod:`testbed.registry`). Each module defines:

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
``SCHEDULE``      optional ``{kind: ScheduleAction}``: the protocol's own ``faults`` entries
                  (e.g. ``{at, move: {client, to}}`` for a protocol with mobile clients), validated with the action's
                  ``value`` type and carried out on schedule as control calls to nodes
                  (``ScheduleAction.call``); other protocols reject these keys.
``hosted_clients`` optional ``hosted_clients(plan) -> list[HostedClients]``: clients that live
                  inside nodes (not ``clients:`` processes), shown by ``validate`` and ``graph``.
``graph_hints``   optional ``graph_hints(plan) -> GraphHints``: what ``testbed graph`` adds for
                  this protocol (an extra label line per node, nodes boxed in groups inside
                  their site, several links between two groups drawn as one bundle).
``connections``   optional ``connections(plan) -> {process: n}``: connections a process opens
                  or accepts beyond one per peer (lanes, e.g. Gryphon's dedicated connection per
                  subscriber: ``Runtime.send(..., lane=)``); written into the node's config as
                  ``connections`` (its descriptor limit, event loop and inbound cap follow it).
``derive``        optional ``derive(topology) -> {param: (value, why)}``: defaults that depend on
                  the topology (e.g. a timing that must cover its links' delays). Applied to the
                  ``params`` the file leaves out (never over a value the user wrote); the plan
                  keeps ``why`` (``Plan.derived``) and ``validate`` shows it. It runs on a valid
                  topology only, like ``check``.
``check``         optional ``check(topology) -> list[Problem]`` for rules the
                  models cannot express; it runs only when the rest of the file
                  is valid. Build problems with ``topology.problem(keys, msg)``
                  so they carry the user's line:col.
"""

from __future__ import annotations

import inspect

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

TOPOLOGY_ATTRS = ("Params", "Placement", "ClientParams", "NODE_ROLES", "CLIENT_ROLES", "ACYCLIC")


class _Registry(Mapping[str, ModuleType]):
    """name -> topology module, from the protocol registry, imported lazily."""

    def __getitem__(self, name: str) -> ModuleType:
        from testbed import registry as protocols

        p = protocols.registry().find(name)
        if p is None:
            raise KeyError(name)
        return p.topology_module()

    def __iter__(self) -> Iterator[str]:
        from testbed import registry as protocols

        return iter(protocols.names())

    def __len__(self) -> int:
        from testbed import registry as protocols

        return len(protocols.names())

    def __contains__(self, name: object) -> bool:
        from testbed import registry as protocols

        return isinstance(name, str) and name in protocols.registry()


PROTOCOLS: Mapping[str, ModuleType] = _Registry()


@dataclass(frozen=True)
class ProtocolCall:
    """What one protocol schedule action does: the control op ``op`` with ``args`` sent to every
    node of ``targets``. ``any_ok``: the action happened when one target accepted it (a move is
    sent to every broker; the one hosting the client starts it); otherwise every target must.
    ``text`` is how ``testbed validate`` shows it."""

    targets: tuple[str, ...]
    op: str
    args: dict[str, Any] = field(default_factory=dict)
    any_ok: bool = False
    text: str = ""


class ActionError(ValueError):
    """A schedule action's value names something the topology (or running plan) lacks; ``key`` is
    where inside the value (``("to",)`` for ``move.to``), so the error can be located."""

    def __init__(self, message: str, key: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class ScheduleAction:
    """A protocol's own ``faults`` entry ``{at, <kind>: value[, for: DUR]}``.

    ``value``   the value's type (a pydantic model or an annotated type such as ``Name``)
    ``for_``    ``never`` | ``optional`` | ``required``: whether the entry takes ``for``
    ``call``    ``call(value, for_s, roles) -> ProtocolCall`` (``roles``: process name -> role,
                the topology's nodes and client groups), pure; raises ``ActionError`` for a name ``roles`` lacks
    ``help``    one line for error messages
    """

    value: Any
    call: Callable[[Any, float | None, dict[str, str]], ProtocolCall]
    for_: str = "never"
    help: str = ""

    def validate(self, value: Any, for_s: float | None) -> Any:
        """The validated value; pydantic's ValidationError, or ValueError for a wrong ``for``."""
        from pydantic import TypeAdapter

        if self.for_ == "never" and for_s is not None:
            raise ValueError("'for' does not apply here")
        if self.for_ == "required" and for_s is None:
            raise ValueError("needs 'for' (how long)")
        return TypeAdapter(self.value).validate_python(value)


@dataclass(frozen=True)
class HostedClients:
    """Clients a protocol hosts inside its nodes (not client processes), e.g. mobile
    clients: what ``testbed validate`` lists and ``testbed graph`` draws. ``at``: node -> how many
    start there (with ``at_s``: how many are there at that instant of the schedule); ``text``: one
    line about them (workload, how they move)."""

    name: str
    role: str
    count: int
    at: dict[str, int]
    text: str = ""
    at_s: float | None = None


@dataclass(frozen=True)
class GraphHints:
    """A protocol's additions to ``testbed graph``'s picture (see :mod:`testbed.render.graph`).

    ``labels``: node -> one more line of its label (such nodes are drawn highlighted);
    ``groups``: node -> the group it belongs to, drawn as a dashed box ``"<group_word> <g>"``
    inside the node's site; a link inside one group is labelled ``peer_word``, and two groups
    joined by more than one link have those links drawn as one coloured ``bundle_word``."""

    labels: dict[str, str] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)
    group_word: str = "group"
    peer_word: str = "peers"
    bundle_word: str = "bundle"


def graph_hints(plan: Any) -> GraphHints:
    """The protocol's ``graph_hints(plan)`` hook (empty hints when it has none)."""
    if plan.protocol not in PROTOCOLS:
        return GraphHints()
    hook = getattr(PROTOCOLS[plan.protocol], "graph_hints", None)
    return hook(plan) if hook is not None else GraphHints()


def connections(plan: Any) -> dict[str, int]:
    """The protocol's ``connections(plan)`` hook: extra connections per process ({} without one)."""
    if plan.protocol not in PROTOCOLS:
        return {}
    hook = getattr(PROTOCOLS[plan.protocol], "connections", None)
    return dict(hook(plan)) if hook is not None else {}


def hosted_clients(plan: Any, at_s: float | None = None) -> list[HostedClients]:
    """The plan's clients hosted in nodes: the protocol's ``hosted_clients(plan[, at_s])`` hook ([]
    when it has none). With ``at_s``, where they are at that instant (a hook without an ``at_s``
    parameter: where they start)."""
    if plan.protocol not in PROTOCOLS:
        return []
    hook = getattr(PROTOCOLS[plan.protocol], "hosted_clients", None)
    if hook is None:
        return []
    if at_s is not None and "at_s" in inspect.signature(hook).parameters:
        return list(hook(plan, at_s=at_s))
    return list(hook(plan))


def schedule_actions(module: ModuleType | None) -> dict[str, ScheduleAction]:
    """The protocol's own schedule actions ({} when it declares none)."""
    return dict(getattr(module, "SCHEDULE", None) or {}) if module is not None else {}


def client_params_model(module: ModuleType, role: str):
    """The ClientParams model of ``module`` for a client ``role`` (None if the role takes none)."""
    cp = getattr(module, "ClientParams", None)
    if isinstance(cp, dict):
        return cp.get(role)
    return cp


__all__ = ["PROTOCOLS", "TOPOLOGY_ATTRS", "ActionError", "GraphHints", "HostedClients", "graph_hints", "ProtocolCall", "hosted_clients", "ScheduleAction", "client_params_model", "connections",
           "schedule_actions"]
