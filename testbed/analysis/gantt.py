"""fault_timeline.png: the fault schedule as a Gantt-style strip over the delivered-rate plot.

One row per fault (``#index op target``): the planned window as a hatched
outline, the actual window (from the manifest's recorded times) as a filled bar,
a fault that never ran in grey. Below it, on the same time axis, delivered and
published messages per second with the actual windows shaded, so a dip lines
up with the fault that caused it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DPI = 120
STATUS_COLOURS = {"done": None, "planned": None, "failed": "#d62728", "skipped": "#999999", "pending": "#999999"}


def fault_label(f: dict[str, Any]) -> str:
    ops = "/".join(dict.fromkeys(f.get("ops") or []))
    targets = ",".join(f.get("targets") or [])
    text = f"#{f['fault']} {ops} {targets}".strip()
    return text if len(text) <= 32 else text[:29] + "..."


def fault_timeline(metrics: dict[str, Any], out: Path, duration_s: float | None = None) -> Path | None:
    """Draw the strip + rate figure; None when the run had no faults or no rate series."""
    faults = metrics.get("faults") or []
    rate = metrics.get("rate") or {}
    if not faults or not rate.get("second"):
        return None
    secs = rate["second"]
    rows = len(faults)
    fig, (gantt, ax) = plt.subplots(2, 1, sharex=True, figsize=(10, 2.2 + 0.35 * rows + 3.2),
                                    gridspec_kw={"height_ratios": [0.6 + 0.35 * rows, 3.2]})
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, f in enumerate(faults):
        y = rows - 1 - i
        col = STATUS_COLOURS.get(f.get("status")) or palette[(i + 2) % len(palette)]
        p0, p1 = f["planned"]
        gantt.broken_barh([(p0, max(p1 - p0, 0.1))], (y - 0.38, 0.76), facecolors="none", edgecolors=col,
                          hatch="//", linestyle="--", linewidth=1.0)
        if f.get("actual"):
            a0, a1 = f["actual"]
            gantt.broken_barh([(a0, max(a1 - a0, 0.1))], (y - 0.25, 0.5), facecolors=col, alpha=0.75)
            ax.axvspan(a0, max(a1, a0 + 0.1), color=col, alpha=0.15)
        if f.get("status") not in ("done", "planned"):
            gantt.text(p1 + 0.1, y, f.get("status", ""), va="center", fontsize=8, color=col)
    gantt.set_yticks(range(rows), [fault_label(f) for f in reversed(faults)], fontsize=8)
    gantt.set_ylim(-0.6, rows - 0.4)
    gantt.set_title("Fault timeline (filled: actual window, hatched: planned) over the delivered rate")
    gantt.grid(True, axis="x", alpha=0.3)

    ax.step(secs, rate["delivered"], where="post", label="delivered", linewidth=1.5, color="tab:blue")
    if any(rate.get("published", [])):
        ax.step(secs, rate["published"], where="post", label="published", linewidth=1.0, color="tab:gray", alpha=0.7)
    ymax = max(rate["delivered"] + rate.get("published", []) + [1])
    ax.set_ylim(0, ymax * 1.1)
    ax.set_ylabel("messages / s (1 s bins)")
    ax.set_xlabel("time since workload start (s)")
    hi = max([secs[-1] + 1] + [f["planned"][1] for f in faults] + ([duration_s] if duration_s else []))
    ax.set_xlim(min(0.0, secs[0]), hi)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


__all__ = ["fault_timeline", "fault_label"]
