"""Fault windows from the run's history (manifest ``timeline`` and ``injected``; plan actions as a fallback).

A fault (one entry of the topology's ``faults``, index ``fault``) may expand to
several actions (stall + unstall). Its *planned* window is the expander's
``window``; its *actual* window shifts the start by the first action's delay
(actual_s - planned_s) and the end by the last action's delay (or by the first
one's when the fault has a single action). Attribution uses the union of both,
widened by a margin.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

HAPPENED = ("done", "failed", None)  # statuses whose fault may have had an effect


@dataclass(frozen=True)
class FaultWindow:
    fault: int
    ops: tuple[str, ...]
    targets: tuple[str, ...]
    source: str
    planned: tuple[float, float]
    actual: tuple[float, float] | None  # None when no action of it ran
    status: str  # done | failed | skipped | pending | planned (no manifest timeline)
    delays_s: tuple[float, ...]  # actual - planned of each action that ran
    groups: tuple[tuple[str, ...], ...] = ()  # a partition's groups (nodes)

    def attribution_window(self, margin_s: float) -> tuple[float, float]:
        lo, hi = self.planned
        if self.actual is not None:
            lo, hi = min(lo, self.actual[0]), max(hi, self.actual[1])
        return lo - margin_s, hi + margin_s

    @property
    def attributable(self) -> bool:
        return self.status in ("done", "failed", "planned")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ops"], d["targets"] = list(self.ops), list(self.targets)
        d["groups"] = [list(g) for g in self.groups]
        return d


def _entries(manifest: dict[str, Any], plan_dict: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    tl = list(manifest.get("timeline") or [])
    injected = list(manifest.get("injected") or [])  # `testbed inject` faults (index >= 1000)
    if tl or injected:
        return tl + [{**e, "injected": True} for e in injected], True
    out = []
    for a in plan_dict.get("actions", []):
        out.append({"fault": a.get("fault", 0), "op": a.get("op"), "target": a.get("target", []),
                    "planned_s": a.get("at_s"), "actual_s": None, "status": None,
                    "window": a.get("window"), "source": a.get("source", ""), "groups": a.get("groups") or [],
                    "call": (a.get("call") or {}).get("op")})
    return out, False


def fault_windows(manifest: dict[str, Any], plan_dict: dict[str, Any]) -> list[FaultWindow]:
    """The faults' windows. A protocol's own schedule actions (``call`` entries, e.g. a mobile client's
    move and reject) are not faults: nothing is attributed to them (the protocol's checks judge
    them), so they have no window here; the report's timeline table still lists them."""
    entries, from_manifest = _entries(manifest, plan_dict)
    entries = [e for e in entries if not e.get("call")]
    by_fault: dict[int, list[dict[str, Any]]] = {}
    for e in entries:
        by_fault.setdefault(int(e.get("fault", 0)), []).append(e)
    out = []
    for idx in sorted(by_fault):
        es = sorted(by_fault[idx], key=lambda e: float(e.get("planned_s") or 0.0))
        first, last = es[0], es[-1]
        win = first.get("window") or [first.get("planned_s") or 0.0, last.get("planned_s") or 0.0]
        planned = (float(win[0]), float(win[1]))
        ran = [e for e in es if e.get("actual_s") is not None]
        delays = tuple(float(e["actual_s"]) - float(e["planned_s"]) for e in ran)
        actual = None
        if ran:
            d_start = float(ran[0]["actual_s"]) - float(ran[0]["planned_s"])
            d_end = delays[-1] if len(es) > 1 and ran[-1] is last else d_start
            actual = (planned[0] + d_start, max(planned[0] + d_start, planned[1] + d_end))
        statuses = [e.get("status") for e in es]
        if not from_manifest:
            status = "planned"
        elif "failed" in statuses:
            status = "failed"
        elif all(s == "done" for s in statuses):
            status = "done"
        elif any(s == "done" for s in statuses):
            status = "failed"  # partly done: treat as a fault that had effects
        elif all(s == "skipped" for s in statuses):
            status = "skipped"
        else:
            status = "pending" if ran == [] else "done"
        out.append(FaultWindow(
            fault=idx,
            ops=tuple(str(e.get("op")) for e in es),
            targets=tuple(sorted({str(t) for e in es for t in (e.get("target") or [])})),
            source=str(first.get("source") or ""),
            planned=planned, actual=actual, status=status, delays_s=delays,
            groups=tuple(tuple(str(n) for n in g) for g in (first.get("groups") or [])),
        ))
    return out


def action_rows(manifest: dict[str, Any], plan_dict: dict[str, Any]) -> list[dict[str, Any]]:
    """Every action with planned, actual and delta (for the report's timeline table)."""
    entries, _ = _entries(manifest, plan_dict)
    rows = []
    for e in sorted(entries, key=lambda e: (float(e.get("planned_s") or 0.0), int(e.get("fault", 0)))):
        p, a = e.get("planned_s"), e.get("actual_s")
        rows.append({
            "fault": int(e.get("fault", 0)), "op": e.get("op"), "target": list(e.get("target") or []),
            "planned_s": p, "actual_s": a, "delta_ms": None if a is None or p is None else (a - p) * 1000.0,
            "status": e.get("status") or "planned", "error": e.get("error"), "source": e.get("source", ""),
            "injected": bool(e.get("injected")),
        })
    return rows
