"""Per-run Gryphon figures (drawn by ``testbed analyze`` for every gryphon run):

  gryphon_latency.png   latency vs send time, one series per subscriber (the paper's Figs 6-8 top)
  gryphon_nacks.png     cumulative nack range vs time, one series per node, a marker per nack
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from testbed.analysis.figures import DPI  # noqa: E402
from testbed.protocols.gryphon.analysis.transforms import latencies, nacks  # noqa: E402


def shade_faults(ax, windows) -> None:
    for w in windows or ():
        lo, hi = getattr(w, "actual", None) or getattr(w, "planned", (None, None))
        if lo is None:
            continue
        ax.axvspan(lo, hi if hi and hi > lo else lo + 0.05, color="tab:red", alpha=0.08)


def plot_latency(lat_pd, out: Path, title: str, windows=None) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4))
    for (client, broker), g in lat_pd.groupby(["client", "broker"]):
        g = g.sort_values("pub_s")
        ax.plot(g["pub_s"], g["lat_ms"], ".", ms=2, label=f"{client}@{broker}")
    shade_faults(ax, windows)
    ax.set_xlabel("send time (s from workload start)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title)
    ax.legend(fontsize=7, markerscale=4, loc="upper right")
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


def draw_nack_steps(ax, nk_pd) -> None:
    """Each node's cumulative nack range over time: a step line with a dot per nack."""
    for node, g in nk_pd.groupby("node"):
        g = g.sort_values("nack_s")
        ax.step(g["nack_s"], g["cum_range_ms"], where="post", label=f"{node} ({len(g)} nacks)")
        ax.plot(g["nack_s"], g["cum_range_ms"], "o", ms=3, color=ax.lines[-1].get_color())


def plot_nacks(nk_pd, out: Path, title: str, windows=None) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4))
    draw_nack_steps(ax, nk_pd)
    shade_faults(ax, windows)
    ax.set_xlabel("time (s from workload start)")
    ax.set_ylabel("cumulative nack range (ms of ticks)")
    ax.set_title(title)
    if len(nk_pd):
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


def run_figures(ctx, out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = int(ctx.manifest.get("t0_wall_ns", 0))
    paths = []
    lat = latencies(ctx.df("g_deliver"), t0).toPandas()
    if len(lat):
        paths.append(plot_latency(lat, out_dir / "gryphon_latency.png", "latency per subscriber", ctx.windows))
    nk = nacks(ctx.df("g_nack")).toPandas()
    paths.append(plot_nacks(nk, out_dir / "gryphon_nacks.png", "nacks (cumulative range)", ctx.windows))
    return paths


FIGURES = [run_figures]
