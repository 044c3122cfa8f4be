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
from testbed.topology.schema import Fault


@dataclass
class _OneFault:
    """The slice of a Topology that ``fault_actions`` reads."""

    faults: list[Fault]
    duration: float
    sites: dict[str, Any]
    _data: dict[str, Any] = field(default_factory=dict)


def parse_fault(text: str) -> tuple[Fault, dict[str, Any]]:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(f"fault {text!r}: not YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"fault {text!r}: expected a mapping such as '{{crash: b2}}' or '{{cut: [a, b], for: 5s}}'")
    raw = {k: v for k, v in raw.items()}
    raw.setdefault("at", "0s")
    try:
        return Fault.model_validate(raw), raw
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err.get("loc", ())) or "fault"
        raise UsageError(f"fault {text!r}: {where}: {err.get('msg')}") from None


def actions_for(text: str, plan: Plan, now_s: float, index: int) -> list[Action]:
    """The primitive actions of an injected fault, at ``now_s`` (its ``for`` end later)."""
    fault, raw = parse_fault(text)
    names = set(plan.nodes) | set(plan.sites)
    used: list[str] = []
    kind = fault.kind
    if kind in ("crash", "restart", "pause", "stall"):
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
    if kind in ("crash", "restart", "pause", "stall", "cut") and any(n in plan.sites for n in used):
        raise UsageError(f"fault {text!r}: {kind} takes node names, not sites")
    fault = fault.model_copy(update={"at": now_s + float(fault.at)})
    one = _OneFault([fault], duration=max(plan.duration_s, fault.at + (fault.for_ or 0)) + 1,
                    sites={s: {} for s in plan.sites}, _data={"faults": [raw]})
    acts = fault_actions(one, plan.nodes, dict(plan.links))  # type: ignore[arg-type]
    return [Action(**{**a.__dict__, "fault": index}) for a in acts]
