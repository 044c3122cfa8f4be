"""The mobility paper's figures (Hu et al., Figs 8-14), drawn from plain numbers.

``testbed.protocols.mobility.experiments`` reads the runs (``measure.py``) and calls these; nothing here does
I/O besides writing the PNG. Every figure has the paper's panels side by side: (a) latency, (b)
messages per movement with the number of movements as impulses on a second axis.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Sequence

Series = dict[str, dict[float, Sequence[float]]]  # label -> x -> the seeds' values

COLORS = {"reconfiguration": "tab:blue", "covering": "tab:red"}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ms(xs) -> tuple[float, float]:
    v = [float(x) for x in xs if x is not None and not math.isnan(float(x))]
    if not v:
        return math.nan, math.nan
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def _color(label: str):
    return next((c for k, c in COLORS.items() if label.startswith(k)), None)


def _lines(ax, series: Series, xticks: dict[float, str] | None = None, logy: bool = False) -> None:
    for label, pts in series.items():
        xs = sorted(pts)
        ms = [_ms(pts[x]) for x in xs]
        n = max((len(pts[x]) for x in xs), default=0)
        ax.errorbar(xs, [m for m, _ in ms], yerr=[s for _, s in ms], marker="o", capsize=3, color=_color(label),
                    label=f"{label} (n={n})" if n > 1 else label)
    if xticks:
        ax.set_xticks(list(xticks), list(xticks.values()))
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def latency_over_time(path: Path, title: str, panels: dict[str, Any], warmup_s: float) -> Path:
    """Figs 8 and 14(a, b): one panel per protocol, a point per committed movement at (its start
    time, its duration), coloured by route; the warm-up (excluded from the other figures) shaded.
    ``panels``: protocol -> a DataFrame with begin, dur_ms, route."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), sharey=True, squeeze=False)
    for ax, (name, df) in zip(axes[0], panels.items()):
        for route, g in sorted(df.groupby("route"), key=lambda kv: kv[0]) if len(df) else []:
            ax.plot(g["begin"], g["dur_ms"], ".", ms=4, label=f"{route} ({len(g)})")
        ax.axvspan(0, warmup_s, color="grey", alpha=0.15, label="warm-up (excluded later)")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("movement start time (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("movement latency (ms)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def latency_and_messages(path: Path, title: str, xlabel: str, latency: Series, messages: Series,
                         movements: Series | None = None, xticks: dict[float, str] | None = None,
                         logy: bool = True) -> Path:
    """Figs 9, 10, 12, 13, 14(c, d): (a) mean latency vs x per protocol; (b) messages per movement
    (lines) and, when given, the number of movements (impulses, right axis)."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    _lines(a, latency, xticks, logy)
    a.set_xlabel(xlabel)
    a.set_ylabel("movement latency, mean (ms)")
    a.set_title("(a) latency", fontsize=9)
    _lines(b, messages, xticks)
    b.set_xlabel(xlabel)
    b.set_ylabel("messages per movement")
    b.set_title("(b) messages per movement" + (" and number of movements" if movements else ""), fontsize=9)
    if movements:
        r = b.twinx()
        labels = list(movements)
        xs_all = sorted({x for pts in movements.values() for x in pts})
        span = (max(xs_all) - min(xs_all)) if len(xs_all) > 1 else 1.0
        for i, label in enumerate(labels):
            off = (i - (len(labels) - 1) / 2) * span * 0.02
            for x, vals in movements[label].items():
                m, _ = _ms(vals)
                if not math.isnan(m):
                    r.vlines(x + off, 0, m, color=_color(label), alpha=0.35, lw=4)
        r.set_ylabel("number of movements (impulses)")
        r.set_ylim(bottom=0)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def protocol_bars(path: Path, title: str, latency: dict[str, Sequence[float]],
                  messages: dict[str, Sequence[float]]) -> Path:
    """Fig 11: latency and messages per movement, one bar per protocol (mean ± the seeds' spread)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    for ax, (ylabel, data) in zip(axes, (("movement latency, mean (ms)", latency),
                                         ("messages per movement", messages))):
        names = list(data)
        ms = [_ms(data[n]) for n in names]
        ax.bar(names, [0 if math.isnan(m) else m for m, _ in ms], yerr=[0 if math.isnan(s) else s for _, s in ms],
               capsize=4, color=[_color(n) for n in names])
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
