"""``testbed inject '{crash: b2}'``: one fault of the topology format, applied to a running plan.

The fault text is parsed with the topology schema's own ``Fault`` model and
expanded with the same ``fault_actions`` as a file's ``faults`` list, at time
``now_s`` on the run's clock; names are checked against the running plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from testbed.errors import UsageError
from testbed.topology.expand import fault_actions
from testbed.topology.plan import Action, Plan
from testbed.topology.protocols import PROTOCOLS, schedule_actions
from testbed.topology.schema import FAULT_KINDS, Fault


@dataclass
class _OneFault:
    """The slice of a Topology that ``fault_actions`` reads."""

    faults: list[Fault]
    duration: float
    sites: dict[str, Any]
    _data: dict[str, Any] = field(default_factory=dict)
    protocol: str = ""


def parse_fault(text: str, protocol: str | None = None) -> tuple[Fault, dict[str, Any]]:
    """The fault (a core kind, or one of ``protocol``'s own schedule actions, validated)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(f"fault {text!r}: not YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"fault {text!r}: expected a mapping such as '{{crash: b2}}' or '{{cut: [a, b], for: 5s}}'")
    raw = {k: v for k, v in raw.items()}
    raw.setdefault("at", "0s")
    try:
        fault = Fault.model_validate(raw)
    except ValidationError as e:
        raise UsageError(f"fault {text!r}: {_first_error(e)}") from None
    if fault.protocol_action:
        kind = fault.kind
        actions = schedule_actions(PROTOCOLS[protocol]) if protocol in PROTOCOLS else {}
        if kind not in actions:
            raise UsageError(f"fault {text!r}: unknown fault kind {kind!r}; protocol {protocol} has: "
                             f"{', '.join(list(FAULT_KINDS) + list(actions))}")
        try:
            fault.model_extra[kind] = actions[kind].validate(fault.model_extra[kind], fault.for_)
        except ValidationError as e:
            raise UsageError(f"fault {text!r}: {kind}.{_first_error(e)}") from None
        except ValueError as e:
            raise UsageError(f"fault {text!r}: {kind}: {e}") from None
    return fault, raw


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ())) or "fault"
    return f"{where}: {err.get('msg')}"


def actions_for(text: str, plan: Plan, now_s: float, index: int) -> list[Action]:
    """The primitive actions of an injected fault, at ``now_s`` (its ``for`` end later)."""
    fault, raw = parse_fault(text, plan.protocol)
    names = set(plan.nodes) | set(plan.sites)
    used: list[str] = []
    kind = fault.kind
    call = None
    if fault.protocol_action:
        spec = schedule_actions(PROTOCOLS[plan.protocol])[kind]
        try:  # the protocol checks its value's names against the running plan
            call = spec.call(fault.value, fault.for_, {n: p.role for n, p in plan.nodes.items()})
        except ValueError as e:
            raise UsageError(f"fault {text!r}: {kind}: {e}") from None
        used = list(call.targets)
    elif kind in ("crash", "restart", "pause", "stall", "throttle"):
        used = [getattr(fault, kind)]
    elif kind == "cut":
        used = list(fault.cut)
    elif kind == "partition":
        used = [n for g in fault.partition for n in g]
    elif kind == "set_link":
        used = list(fault.set_link.nodes or []) + list(fault.set_link.sites or [])
    unknown = [n for n in used if n not in names]
    if unknown:
        raise UsageError(f"fault {text!r}: unknown node or site {', '.join(unknown)} "
                         f"(nodes: {', '.join(plan.nodes)}; sites: {', '.join(plan.sites)})")
    if kind in ("crash", "restart", "pause", "stall", "cut", "throttle") and any(n in plan.sites for n in used):
        raise UsageError(f"fault {text!r}: {kind} takes node names, not sites")
    fault = fault.model_copy(update={"at": now_s + float(fault.at)})
    fault._call = call
    one = _OneFault([fault], duration=max(plan.duration_s, fault.at + (fault.for_ or 0)) + 1,
                    sites={s: {} for s in plan.sites}, _data={"faults": [raw]}, protocol=plan.protocol)
    acts = fault_actions(one, plan.nodes, dict(plan.links))  # type: ignore[arg-type]
    return [Action(**{**a.__dict__, "fault": index}) for a in acts]
