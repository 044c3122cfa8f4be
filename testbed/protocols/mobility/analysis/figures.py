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


def congestion_over_time(path: Path, title: str, panels: dict[str, tuple[Any, Any]], warmup_s: float,
                         join_s: float = 0.0) -> Path:
    """The mechanism beside Figs 8-10 (one run per protocol): a column per protocol, rows (1) each
    broker's service queue over time (its longest queue per second, ``max_queued``; "no service
    time" when the run had none), (2) each broker's CPU share per second, (3) the moves' mean
    messages and mean latency per time bin. ``panels``: protocol -> (congestion DataFrame of
    ``measure.congestion``, ``measure.msgs_over_time`` DataFrame); the warm-up and the join window
    shaded."""
    plt = _plt()
    fig, axes = plt.subplots(3, len(panels), figsize=(5.5 * len(panels), 9), sharex=True, squeeze=False)
    for col, (name, (cg, mt)) in enumerate(panels.items()):
        q, c, m = axes[0][col], axes[1][col], axes[2][col]
        for node, g in sorted(cg.groupby("node"), key=lambda kv: (len(kv[0]), kv[0])) if len(cg) else []:
            if g["max_queued"].notna().any():
                q.plot(g["t"], g["max_queued"], "-", lw=1, label=node)
            c.plot(g["t"], g["cpu_share"], "-", lw=1, label=node)
        if not (len(cg) and cg["max_queued"].notna().any()):
            q.text(0.5, 0.5, "no service time: no queue", transform=q.transAxes, ha="center", fontsize=8)
        q.set_title(f"{name}: longest service queue per second, per broker", fontsize=9)
        q.set_ylabel("messages queued")
        c.set_ylabel("CPU share (1 = one core)")
        c.set_title("CPU per broker", fontsize=9)
        if len(mt):
            m.bar(mt["bin_s"], mt["msgs_mean"], width=float(mt["bin_s"].diff().min() or 1.0) * 0.8, align="edge",
                  alpha=0.5, color=_color(name) or "grey", label="messages per move")
            r = m.twinx()
            r.plot(mt["bin_s"], mt["lat_mean_ms"], "k.-", label="latency (ms)")
            r.set_ylabel("mean latency (ms)")
            r.set_yscale("log")
        m.set_ylabel("messages per move (bars)")
        m.set_xlabel("time since t0 (s)")
        m.set_title("moves by start time", fontsize=9)
        for ax in (q, c, m):
            ax.axvspan(0, warmup_s, color="grey", alpha=0.12)
            if join_s:
                ax.axvline(join_s, color="k", ls=":", lw=1)
            ax.grid(alpha=0.3)
        if len(cg):
            q.legend(fontsize=6, ncol=2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
