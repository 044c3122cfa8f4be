"""Figures of a reproduction: series over seeds (mean with a spread bar), bars, and the paper's numbers.

Every function takes plain values (no I/O besides writing the PNG). ``refs`` are the numbers the
paper states for the figure: ``(x, y, label[, series])`` with ``x`` None for a horizontal line; they
are drawn as star markers or dashed lines labelled "paper" (in the colour of the series they belong
to), so agreement is seen, not read.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Iterable, Sequence

Samples = Sequence[float]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ms(xs: Iterable[Any]) -> tuple[float, float]:
    v = [float(x) for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return math.nan, math.nan
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def draw_refs(ax, refs: Sequence[tuple], colors: dict[str, Any] | None = None) -> None:
    """``refs``: (x, y, label[, series]); a reference of a plotted series takes its colour
    (black edge), otherwise black."""
    for ref in refs:
        x, y, label = ref[:3]
        series = ref[3] if len(ref) > 3 else ""
        color = next((c for name, c in (colors or {}).items() if series and name.startswith(series)), "black")
        text = label or "paper"
        if x is None:
            ax.axhline(y, color=color, ls="--", lw=1, label=text)
        else:
            ax.plot([x], [y], marker="*", ms=14, color=color, markeredgecolor="black", ls="none", label=text)


def series_plot(path: Path, title: str, xlabel: str, ylabel: str,
                series: dict[str, dict[float, Samples]], refs: Sequence[tuple] = (),
                logx: bool = False) -> Path:
    """One line per series: x -> the seeds' values; drawn as mean with a ± spread (std) bar."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    colors = {}
    for label, pts in series.items():
        xs = sorted(pts)
        ms = [_ms(pts[x]) for x in xs]
        ns = max((len(pts[x]) for x in xs), default=0)
        line = ax.errorbar(xs, [m for m, _ in ms], yerr=[s for _, s in ms], marker="o", capsize=3,
                           label=f"{label} (n={ns})" if ns > 1 else label)
        colors[label] = line[0].get_color()
    draw_refs(ax, refs, colors)
    if logx:
        ax.set_xscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def bar_plot(path: Path, title: str, ylabel: str, groups: dict[str, dict[str, Samples]],
             refs: Sequence[tuple[float | None, float, str]] = ()) -> Path:
    """Grouped bars: category -> group -> the seeds' values (mean, ± spread)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    cats = sorted({c for g in groups.values() for c in g})
    width = 0.8 / max(1, len(groups))
    for i, (label, vals) in enumerate(groups.items()):
        ms = [_ms(vals.get(c, [])) for c in cats]
        ax.bar([j + i * width for j in range(len(cats))], [0 if math.isnan(m) else m for m, _ in ms], width,
               yerr=[0 if math.isnan(s) else s for _, s in ms], capsize=3, label=label)
    ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(cats))], cats)
    draw_refs(ax, refs)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
