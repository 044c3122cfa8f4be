"""A broker's service queue, CPU and received rate over a run, read back from its log (protocol-agnostic).

The runtime logs, per node and per second (docs/topology.md, "Service time"): the ``service`` line of
a node with a service time (its queue: ``queued``, ``max_queued``, the ``busy`` fraction of the
interval, the mean ``wait_ms`` in the queue of the ``served`` messages), ``cpu`` (user + system
seconds, cumulative) and ``stats`` (``received`` messages, cumulative). Plain Python over the JSONL
logs: only the lines of these three events are parsed. A paper's analysis cites what it finds as
the measured cause of a claim's failure (a congested or saturated broker)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pandas as pd


def marked_lines(path: str | Path, markers: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """The log lines of ``path`` that contain one of ``markers`` (a cheap pre-filter, e.g.
    ``'"service"'``; the caller checks ``ev``), parsed; an undecodable line is skipped."""
    with open(path) as fh:
        for line in fh:
            if not any(k in line for k in markers):
                continue
            try:
                yield json.loads(line)
            except ValueError:
                continue


def run_t0_ns(run_dir: str | Path) -> int:
    """The run's time zero (the manifest's ``t0_wall_ns``; 0 if it has none)."""
    return int(json.loads((Path(run_dir) / "manifest.json").read_text()).get("t0_wall_ns", 0))


CONGESTION_COLUMNS = ["node", "t", "queued", "max_queued", "busy", "wait_ms", "served", "cpu_share", "recv_per_s"]
_CONG_EVENTS = ('"service"', '"cpu"', '"stats"')  # a cheap pre-filter; ``ev`` decides


def congestion(run_dir: str | Path, brokers: set[str] | None = None) -> pd.DataFrame:
    """One row per (broker, sample) of one run, ``t`` in seconds since the run's t0: the service
    queue's fields (NaN where the node has no service time), the CPU share over the interval since
    the previous ``cpu`` line (CPU seconds / wall seconds, 1.0 = one core) and the messages received
    per second over that interval. ``brokers``: the nodes to read (default: every log's node)."""
    run_dir = Path(run_dir)
    t0 = run_t0_ns(run_dir)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for f in sorted((run_dir / "logs").glob("*.jsonl")):
        node = f.stem
        if brokers is not None and node not in brokers:
            continue
        prev_cpu: tuple[int, float] | None = None
        prev_recv: tuple[int, int] | None = None
        for d in marked_lines(f, _CONG_EVENTS):
            ev, t = d.get("ev"), int(d.get("t") or 0)
            sec = round((t - t0) / 1e9)  # the node's periodic lines of one tick share a second
            row = rows.setdefault((node, sec), {"node": node, "t": (t - t0) / 1e9})
            if ev == "service":
                row.update(queued=d.get("queued"), max_queued=d.get("max_queued"), busy=d.get("busy"),
                           wait_ms=d.get("wait_ms"), served=d.get("served"))
            elif ev == "cpu":
                c = float(d.get("user_s") or 0) + float(d.get("sys_s") or 0)
                if prev_cpu is not None and t > prev_cpu[0]:
                    row["cpu_share"] = (c - prev_cpu[1]) / ((t - prev_cpu[0]) / 1e9)
                prev_cpu = (t, c)
            elif ev == "stats":
                n = int(d.get("received") or 0)
                if prev_recv is not None and t > prev_recv[0]:
                    row["recv_per_s"] = (n - prev_recv[1]) / ((t - prev_recv[0]) / 1e9)
                prev_recv = (t, n)
    if not rows:
        return pd.DataFrame(columns=CONGESTION_COLUMNS)
    df = pd.DataFrame(list(rows.values()))
    for c in CONGESTION_COLUMNS:
        if c not in df:
            df[c] = math.nan
    df = df[CONGESTION_COLUMNS].astype({c: float for c in CONGESTION_COLUMNS[1:]})
    df = df.dropna(how="all", subset=CONGESTION_COLUMNS[2:])  # a node's first cpu/stats line: no interval yet
    return df.sort_values(["node", "t"]).reset_index(drop=True)


def congestion_summary(cg: pd.DataFrame, start_s: float, end_s: float) -> dict[str, Any]:
    """The brokers' congestion over the window [start_s, end_s) of one run: the busiest broker (by
    mean ``busy``) and its mean busy fraction, the highest per-broker mean busy, the longest queue any
    broker had (``max_queued``), the mean wait in the queue over every served message, the highest
    per-second CPU share of any broker and the highest per-broker mean CPU share; ``service``: whether
    the run had service lines at all (without a service time there is no queue to measure)."""
    w = cg[(cg["t"] >= start_s) & (cg["t"] < end_s)]
    has = bool(len(w)) and bool(w["busy"].notna().any())
    out: dict[str, Any] = {"service": has, "busy_broker": None, "busy_mean_max": math.nan, "queue_max": math.nan,
                           "wait_ms_mean": math.nan, "cpu_max": math.nan, "cpu_mean_max": math.nan,
                           "recv_per_s_max": math.nan}
    if not len(w):
        return out
    cpu = w.dropna(subset=["cpu_share"])
    if len(cpu):
        out["cpu_max"] = float(cpu["cpu_share"].max())
        out["cpu_mean_max"] = float(cpu.groupby("node")["cpu_share"].mean().max())
    recv = w.dropna(subset=["recv_per_s"])
    if len(recv):
        out["recv_per_s_max"] = float(recv.groupby("node")["recv_per_s"].mean().max())
    if has:
        s = w.dropna(subset=["busy"])
        by = s.groupby("node")["busy"].mean()
        out["busy_broker"] = str(by.idxmax())
        out["busy_mean_max"] = float(by.max())
        out["queue_max"] = float(s["max_queued"].max())
        served = s["served"].fillna(0)
        out["wait_ms_mean"] = (float((s["wait_ms"].fillna(0) * served).sum() / served.sum())
                               if served.sum() > 0 else 0.0)
    return out
