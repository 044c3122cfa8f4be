"""Figures (matplotlib, Agg, PNG) and the per-protocol figure registry.

Generic figures, drawn whenever the run has ``deliver`` events:
  latency_cdf.png   delivery latency CDF, one curve per (publisher site -> subscriber site)
  delivered_rate.png delivered messages/s (1 s bins) with fault windows shaded: actual windows
                     filled, planned windows as dashed outlines, each labelled with its fault index

Protocol figures: ``analysis/<protocol>/figures.py`` lists ``FIGURES = [fn, ...]``,
each ``fn(ctx, out_dir) -> list[Path]``; the protocol registry finds them
(``testbed.registry.figures_for(protocol)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DPI = 120


# -- generic figures ------------------------------------------------------------------
def latency_cdf(metrics: dict[str, Any], out: Path) -> Path | None:
    curves = [c for c in metrics.get("cdf", []) if c["quantiles"]]
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for c in curves:
        qs = c["quantiles"]
        probs = [i / (len(qs) - 1) for i in range(len(qs))]
        ax.plot(qs, probs, label=f"{c['pub_site']} \u2192 {c['sub_site']}", linewidth=1.6)
    lo = min((q for c in curves for q in c["quantiles"] if q is not None and q > 0), default=1.0)
    hi = max((q for c in curves for q in c["quantiles"] if q is not None), default=1.0)
    if hi / lo > 50:  # long tails (faults): a log axis keeps the body of the distribution readable
        ax.set_xscale("log")
    ax.set_xlabel("delivery latency (ms)" + (", log scale" if hi / lo > 50 else ""))
    ax.set_ylabel("fraction of deliveries")
    ax.set_ylim(0, 1.01)
    ax.set_title("Delivery latency CDF by site pair (publisher \u2192 subscriber)")
    ax.grid(True, alpha=0.3)
    ax.legend(title="site pair", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


def delivered_rate(metrics: dict[str, Any], out: Path) -> Path | None:
    rate = metrics.get("rate") or {}
    if not rate.get("second"):
        return None
    secs = rate["second"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.step(secs, rate["delivered"], where="post", label="delivered", linewidth=1.5, color="tab:blue")
    if any(rate.get("published", [])):
        ax.step(secs, rate["published"], where="post", label="published", linewidth=1.0,
                color="tab:gray", alpha=0.7)
    ymax = max(rate["delivered"] + rate.get("published", []) + [1])
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, f in enumerate(metrics.get("faults", [])):
        col = colors[(i + 2) % len(colors)]
        p0, p1 = f["planned"]
        ax.axvspan(p0, max(p1, p0 + 0.1), fill=False, hatch="//", edgecolor=col, linestyle="--",
                   linewidth=1.0, label="planned window" if i == 0 else None)
        if f.get("actual"):
            a0, a1 = f["actual"]
            ax.axvspan(a0, max(a1, a0 + 0.1), color=col, alpha=0.18, label="actual window" if i == 0 else None)
        label = f"#{f['fault']} {'/'.join(dict.fromkeys(f['ops']))}"
        if f["status"] not in ("done", "planned"):
            label += f" ({f['status']})"
        ax.text(p0, ymax * (1.06 - 0.07 * (i % 4)), label, fontsize=8, color=col, va="top",
                bbox={"facecolor": "white", "edgecolor": col, "alpha": 0.85, "pad": 1.5})
    ax.set_xlabel("time since workload start (s)")
    ax.set_ylabel("messages / s (1 s bins)")
    ax.set_title("Delivered rate over time, fault windows shaded (actual) and hatched (planned)")
    ax.set_ylim(0, ymax * 1.1)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


def draw_all(ctx, metrics: dict[str, Any], out_dir: Path) -> list[Path]:
    """Generic figures, then the protocol's registered ones; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [p for p in (latency_cdf(metrics, out_dir / "latency_cdf.png"),
                         delivered_rate(metrics, out_dir / "delivered_rate.png")) if p is not None]
    from testbed.registry import figures_for

    for fn in figures_for(ctx.protocol):
        paths.extend(Path(p) for p in (fn(ctx, out_dir) or []))
    return paths
