"""Hosts with a given capacity: each node's measured CPU use against its share.

The share of a process over time comes from the plan (``nodes.<n>.cpu``, its own key or its host's)
and from the manifest's timeline (``throttle``/``unthrottle`` entries carried out, scheduled or
injected). Its use is measured, not assumed: the node's periodic ``cpu`` lines (``user_s + sys_s``
of the process, from the kernel's accounting, every second) give its use between two lines as
``d(cpu seconds) / d(monotonic seconds)``.

``cpu_share`` (a check, run for every protocol's runs that have a limit or a throttle:
``runtime_checks.checks_of``): no interval between two lines of a limited
process used more than its share plus the sampling error. The share in force over an interval is
the largest one in force at any moment of it (a throttle or its end inside the interval). The
sampling error: the kernel enforces the share per CFS period (``PERIOD_S``), so over an interval
``dt`` a process may use up to ``share * (dt + PERIOD_S)``; and each line's clock is read after
its CPU times, late by up to a period when the process was throttled in between, which shortens
the measured ``dt`` by as much. Allowed: ``share * (1 + 2 * PERIOD_S / dt) + ABS_ERROR``.

:func:`cpu_series` (per node: time, cores used, share in force) is what the report draws.
"""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import functions as F

from testbed.analysis.checks import MAX_EXAMPLES, CheckResult
from testbed.analysis.context import AnalysisContext

PERIOD_S = 0.1  # the CFS period the providers use (cgroup cpu.cfs_period_us, docker --cpus)
ABS_ERROR = 0.01  # cores: CPU times are logged to 0.1 ms, and the kernel's accounting granularity


# -- pure helpers (values in, values out) ---------------------------------------------------
def share_changes(plan: dict[str, Any], manifest: dict[str, Any]) -> dict[str, list[tuple[float, float, float | None]]]:
    """node -> [(from_s, until_s, share)] of the throttle changes carried out: the share changes
    at some moment in [from_s, until_s] (the action's actual and done times), None = no limit."""
    out: dict[str, list[tuple[float, float, float | None]]] = {}
    for e in list(manifest.get("timeline") or []) + list(manifest.get("injected") or []):
        if e.get("op") not in ("throttle", "unthrottle") or e.get("status") != "done":
            continue
        if e.get("actual_s") is None:
            continue
        a = float(e["actual_s"])
        d = e.get("done_s")
        d = float(d) if isinstance(d, (int, float)) else a
        cpu = e.get("cpu")
        for n in e.get("target") or []:
            out.setdefault(str(n), []).append((a, d, float(cpu) if cpu is not None else None))
    for v in out.values():
        v.sort(key=lambda x: x[0])
    return out


def limits(plan: dict[str, Any]) -> dict[str, float | None]:
    """node -> its planned share (cores; None = no limit)."""
    return {n: (float(p["cpu"]) if p.get("cpu") is not None else None)
            for n, p in (plan.get("nodes") or {}).items()}


def share_over(base: float | None, changes: list[tuple[float, float, float | None]],
               t0: float, t1: float) -> float | None:
    """The largest share in force at any moment of [t0, t1] (None: unlimited at some moment)."""
    cur = base
    in_force: list[float | None] = []
    for a, d, share in changes:
        if d < t0:
            cur = share  # changed before the interval began
        elif a <= t1:
            in_force.append(share)  # changed during it (the old share holds until the change)
    in_force.append(cur)
    if any(s is None for s in in_force):
        return None
    return max(s for s in in_force if s is not None)


def allowed(share: float, dt: float) -> float:
    """Cores a process with ``share`` may show over an interval of ``dt`` seconds (with error)."""
    return share * (1 + 2 * PERIOD_S / dt) + ABS_ERROR


def usage(rows: list) -> dict[str, list[tuple[float, float, float]]]:
    """cpu lines (node, t_rel_s, m, user_s, sys_s; any order) -> node -> [(t0, t1, cores)] between
    consecutive lines of one process life (a restarted process starts from zero again: skipped)."""
    by: dict[str, list] = {}
    for r in rows:
        by.setdefault(r["node"], []).append(r)
    out: dict[str, list[tuple[float, float, float]]] = {}
    for node, rs in by.items():
        rs.sort(key=lambda r: (r["t_rel_s"], r["m"]))
        series = []
        for p, q in zip(rs, rs[1:]):
            dm = (q["m"] - p["m"]) / 1e9
            dc = (q["user_s"] + q["sys_s"]) - (p["user_s"] + p["sys_s"])
            if dm <= 0 or dc < 0 or dm > 30:  # another process life (a restart), or a long gap
                continue
            series.append((float(p["t_rel_s"]), float(q["t_rel_s"]), dc / dm))
        out[node] = series
    return out


def cpu_share_of(plan: dict[str, Any], manifest: dict[str, Any], rows: list) -> CheckResult:
    """The check's verdict from one run's ``cpu`` lines (see the module's docstring)."""
    base = limits(plan)
    changes = share_changes(plan, manifest)
    limited = sorted(n for n in base if base[n] is not None or n in changes)
    bad: list[dict[str, Any]] = []
    worst: dict[str, float] = {}
    intervals = 0
    for node, series in usage(rows).items():
        if node not in limited:
            continue
        for t0, t1, cores in series:
            share = share_over(base.get(node), changes.get(node, []), t0, t1)
            if share is None:
                continue
            intervals += 1
            limit = allowed(share, t1 - t0)
            worst[node] = max(worst.get(node, 0.0), cores / share)
            if cores > limit:
                bad.append({"node": node, "from_s": round(t0, 3), "to_s": round(t1, 3),
                            "used_cores": round(cores, 4), "share": share, "allowed": round(limit, 4)})
    bad.sort(key=lambda b: b["used_cores"] / b["share"], reverse=True)
    return CheckResult(
        name="cpu_share", passed=not bad, violations=len(bad), examples=bad[:MAX_EXAMPLES],
        description="no node used more CPU than its share (its cpu key, or a throttle in force) "
                    "plus the sampling error, between any two of its cpu lines",
        details={"limited_nodes": limited, "intervals": intervals,
                 "max_used_over_share": {n: round(v, 3) for n, v in sorted(worst.items())},
                 "period_s": PERIOD_S, "abs_error_cores": ABS_ERROR})


def cpu_rows(ctx: AnalysisContext) -> list:
    return (ctx.df("cpu").select("node", "t_rel_s", "m", "user_s", "sys_s")
            .where(F.col("t_rel_s").isNotNull()).collect())


def check_cpu_share(ctx: AnalysisContext) -> CheckResult:
    plan, manifest = ctx.plan, ctx.manifest
    if not any(v is not None for v in limits(plan).values()) and not share_changes(plan, manifest):
        return cpu_share_of(plan, manifest, [])  # no limit: nothing to read
    return cpu_share_of(plan, manifest, cpu_rows(ctx))


def cpu_series(plan: dict[str, Any], manifest: dict[str, Any], rows: list) -> dict[str, list[dict[str, Any]]]:
    """node -> [{t_s (interval midpoint), cores, share}] for the report's CPU plot."""
    base = limits(plan)
    changes = share_changes(plan, manifest)
    out = {}
    for node, series in sorted(usage(rows).items()):
        pts = []
        for t0, t1, cores in series:
            share = share_over(base.get(node), changes.get(node, []), (t0 + t1) / 2, (t0 + t1) / 2)
            pts.append({"t_s": round((t0 + t1) / 2, 3), "cores": round(cores, 4),
                        "share": share if share is None or math.isfinite(share) else None})
        out[node] = pts
    return out


def share_steps(plan: dict[str, Any], manifest: dict[str, Any], t0: float, t1: float) -> dict[str, list[tuple[float, float | None]]]:
    """node -> [(t, share from t on)] over [t0, t1] for the limited or throttled nodes (a change at
    its action's actual time)."""
    base = limits(plan)
    changes = share_changes(plan, manifest)
    out = {}
    for n in sorted(set(changes) | {n for n, v in base.items() if v is not None}):
        steps = [(t0, base.get(n))] + [(a, share) for a, _, share in changes.get(n, []) if t0 < a < t1]
        out[n] = steps + [(t1, steps[-1][1])]
    return out


def cpu_figure(series: dict[str, list[dict[str, Any]]], faults: list[dict[str, Any]], out,
               max_unlimited: int = 4, steps: dict[str, list[tuple[float, float | None]]] | None = None):
    """cpu.png: cores used per node over time (each limited node's share as a dashed step line
    of its colour), the faults' actual windows shaded as in the fault timeline. The limited
    nodes, and the ``max_unlimited`` busiest others for comparison. None without series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    limited = [n for n, pts in series.items() if any(p["share"] is not None for p in pts)]
    others = sorted((n for n in series if n not in limited and series[n]),
                    key=lambda n: -max(p["cores"] for p in series[n]))[:max_unlimited]
    nodes = limited + others
    if not nodes:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.2))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, n in enumerate(nodes):
        col = palette[i % len(palette)]
        pts = series[n]
        ax.plot([p["t_s"] for p in pts], [p["cores"] for p in pts], marker=".", linewidth=1.4, color=col,
                label=f"{n} used" if n in limited else f"{n} used (no limit)")
        if n in limited and steps and n in steps:
            ax.step([t for t, _ in steps[n]], [v if v is not None else float("nan") for _, v in steps[n]],
                    where="post", linestyle="--", linewidth=1.0, color=col, label=f"{n} share")
    for i, f in enumerate(faults or []):
        if f.get("actual"):
            a0, a1 = f["actual"]
            ax.axvspan(a0, max(a1, a0 + 0.1), color=palette[(i + 2) % len(palette)], alpha=0.12)
            ax.text(a0, 0, f" #{f['fault']} {'/'.join(dict.fromkeys(f['ops']))}",
                    fontsize=8, va="bottom", color=palette[(i + 2) % len(palette)])
    ax.set_xlabel("time since workload start (s)")
    ax.set_ylabel("CPU used (cores, between 1 s samples)")
    ax.set_title("CPU use per node against its share (dashed), fault windows shaded")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right", ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
