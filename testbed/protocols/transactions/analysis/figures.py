"""The transactions paper's figures (Jergler et al. Figs 5-9), drawn from measured rows.

Every function takes plain values (rows of :func:`testbed.protocols.transactions.analysis.measure.tx_rows`,
grouped by the caller) and writes one PNG: latency and throughput side by side as in the paper,
mean over the seeds (or placements) with a ± spread bar, the paper's stated numbers as stars.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Sequence

from testbed.analysis.figures import DPI

LABEL = {"dtx": "D-TX", "dtxni": "D-TXNI", "stx": "S-TX", "blwait": "BL-WAIT"}
ORDER = ("dtx", "dtxni", "stx", "blwait")
Ref = tuple  # (x or variant or None, y, label)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ms(xs: Sequence[Any]) -> tuple[float, float]:
    v = [float(x) for x in xs if x is not None and not math.isnan(float(x))]
    if not v:
        return math.nan, 0.0
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def approaches(path: Path, title: str, lat: dict[str, Sequence[float]], thr: dict[str, Sequence[float]],
               refs: Sequence[Ref] = ()) -> Path:
    """Fig 5: one bar per approach, latency (ms) left, throughput (tx/s) right. ``refs``:
    (variant, y, label, "latency" | "throughput")."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    vs = [v for v in ORDER if v in lat or v in thr]
    for ax, data, ylabel, kind in ((axes[0], lat, "mean latency (ms)", "latency"),
                                   (axes[1], thr, "throughput (tx/s)", "throughput")):
        ms = [_ms(data.get(v, [])) for v in vs]
        ax.bar(range(len(vs)), [0 if math.isnan(m) else m for m, _ in ms], yerr=[s for _, s in ms], capsize=4,
               color=[f"C{ORDER.index(v)}" for v in vs])
        ax.set_xticks(range(len(vs)), [f"{LABEL[v]}\n(n={len(data.get(v, []))})" for v in vs])
        first = True
        for ref in refs:
            if ref[3] == kind and ref[0] in vs:
                ax.plot([vs.index(ref[0])], [ref[1]], marker="*", ms=14, color="gold", markeredgecolor="black",
                        ls="none", label="paper" if first else None)
                first = False
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, axis="y")
        if not first:
            ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def sweep(path: Path, title: str, xlabel: str, lat: dict[str, dict[float, Sequence[float]]],
          thr: dict[str, dict[float, Sequence[float]]], refs: Sequence[Ref] = ()) -> Path:
    """Figs 6-8: latency and throughput against the swept quantity, one line per approach.
    ``refs``: (x, y, label, "latency" | "throughput", variant)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, data, ylabel, kind in ((axes[0], lat, "mean latency (ms)", "latency"),
                                   (axes[1], thr, "throughput (tx/s)", "throughput")):
        for v in ORDER:
            pts = data.get(v)
            if not pts:
                continue
            xs = sorted(pts)
            ms = [_ms(pts[x]) for x in xs]
            n = max(len(pts[x]) for x in xs)
            ax.errorbar(xs, [m for m, _ in ms], yerr=[s for _, s in ms], marker="o", capsize=3,
                        color=f"C{ORDER.index(v)}", label=f"{LABEL[v]} (n={n})")
        for ref in refs:
            if ref[3] == kind:
                color = f"C{ORDER.index(ref[4])}" if ref[4] in ORDER else "black"
                ax.plot([ref[0]], [ref[1]], marker="*", ms=13, color=color, markeredgecolor="black", ls="none",
                        label=ref[2])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def inbound_rate(path: Path, title: str, runs: dict[str, dict[str, Any]]) -> Path:
    """Fig 9: per approach (one panel each), the regular events delivered at the agents per
    second over time, the dispatch windows shaded. ``runs``: variant -> measure.inbound()'s value
    for one run (seed 0)."""
    plt = _plt()
    vs = [v for v in ORDER if v in runs]
    fig, axes = plt.subplots(len(vs) or 1, 1, figsize=(8, 2.2 * max(1, len(vs))), sharex=True, squeeze=False)
    for ax, v in zip(axes[:, 0], vs):
        r = runs[v]
        bs = sorted(r["bins"])
        ax.step([b * r["bin_s"] for b in bs], [r["bins"][b] for b in bs], where="post", color=f"C{ORDER.index(v)}",
                label=LABEL[v])
        for i, (s, e) in enumerate(r["windows"]):
            ax.axvspan(s, max(e, s + 0.05), color="tab:red", alpha=0.15, label="dispatch" if i == 0 else None)
        ax.set_ylabel("events/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[-1, 0].set_xlabel("time (s from the start of the run)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
