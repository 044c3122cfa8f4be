"""Gryphon runs read back for the paper's figures (Bhola et al. Figs 4-8).

Pure readers of analysed run directories (their Parquet, manifest, plan and checks.json): each
``measure_*`` takes one run and returns the numbers the paper's claims are about;
``fault_figure`` draws one fault run (latency per subscriber over time, cumulative nack range).
``testbed.protocols.gryphon.experiments`` judges the claims over the seeds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

NORMAL_MS = 100.0  # "not normal" above this, only for a run with no delivery before its fault
# "normal" is the run's own (issue #12: GD latency includes the PHB's log force, 100 ms by
# default, so a fixed 100 ms bound called every GD delivery abnormal and the recovery the whole
# run): NORMAL_FACTOR x the shb's median latency of the messages published before the fault
# (from NORMAL_GUARD_S before it) + NORMAL_SLACK_MS, the rule the "back to normal" claims use
NORMAL_FACTOR, NORMAL_SLACK_MS, NORMAL_GUARD_S = 2.0, 20.0, 0.5


def normal_ms(lat: pd.DataFrame, shb: str, t_fault: float) -> float:
    """The latency above which a delivery at ``shb`` is "not normal": from the run's own
    deliveries before the fault (see NORMAL_FACTOR), else NORMAL_MS."""
    pre = lat[(lat["broker"] == shb) & (lat["pub_s"] < t_fault - NORMAL_GUARD_S)] if "pub_s" in lat else lat[:0]
    if not len(pre):
        return NORMAL_MS
    return NORMAL_FACTOR * float(pre["lat_ms"].median()) + NORMAL_SLACK_MS


class RunData:
    """One analysed run: its Parquet events, manifest and fault timeline."""

    def __init__(self, spark, path: str | Path) -> None:
        from testbed.analysis.ingest import load_parquet

        self.path = Path(path)
        self.events = load_parquet(spark, self.path)
        self.spark = spark
        self.manifest = json.loads((self.path / "manifest.json").read_text())
        self.plan = json.loads((self.path / "plan.json").read_text())
        self.t0 = int(self.manifest.get("t0_wall_ns", 0))
        self.checks = json.loads((self.path / "analysis" / "checks.json").read_text())

    def df(self, ev: str):
        if ev not in self.events:
            from testbed.analysis.ingest import empty_events

            self.events[ev] = empty_events(self.spark, ev)
        return self.events[ev]

    def pdf(self, ev: str, columns: Sequence[str]) -> pd.DataFrame:
        return self.df(ev).toPandas() if ev in self.events else pd.DataFrame(columns=list(columns))

    @property
    def end_s(self) -> float:
        v = self.manifest.get("workload_end_s")
        return float(v) if isinstance(v, (int, float)) else float(self.plan["duration_s"])

    def fault_time(self, op: str, target: str) -> float:
        """Actual (else planned) time of the first action ``op`` on ``target``."""
        for a in self.manifest.get("timeline") or []:
            if a.get("op") == op and target in (a.get("target") or []):
                v = a.get("actual_s")
                return float(v if v is not None else a.get("planned_s"))
        for a in self.plan.get("actions") or []:
            if a.get("op") == op and target in (a.get("target") or []):
                return float(a["at_s"])
        return math.nan


def recovery_s(lat: pd.DataFrame, shb: str, t_fault: float, window: int = 25, until: float = math.inf,
               normal: float | None = None) -> float:
    """Seconds from the fault until deliveries at ``shb`` are back to normal for good: the last
    receive time at which the rolling median latency (``window`` deliveries, so one stray slow
    delivery on a loaded machine does not count) is above ``normal`` (ms; default
    :func:`normal_ms`: from the run's own latency before the fault). Deliveries from ``until`` on
    (the end of the run, when the machine is busy shutting down) are not looked at."""
    if normal is None:
        normal = normal_ms(lat, shb, t_fault)
    s = lat[(lat["broker"] == shb) & (lat["recv_s"] >= t_fault) & (lat["recv_s"] < until)].sort_values("recv_s")
    if not len(s):
        return 0.0
    med = s["lat_ms"].rolling(window, min_periods=1).median()
    bad = s["recv_s"][med > normal]
    return float(bad.max() - t_fault) if len(bad) else 0.0


def aggregate_checks(run_checks: list[tuple[str, dict]]) -> list[dict[str, Any]]:
    """Per run and check: passed, violations (from each run's analysis/checks.json)."""
    rows = []
    for run, doc in run_checks:
        for c in doc.get("checks", []):
            rows.append({"run": run, "check": c["name"], "passed": bool(c["passed"]),
                         "violations": int(c.get("violations") or 0)})
    return rows


# ------------------------------------------------------------------------------ Figs 4-5
# A second of the workload is "slow" at the SHB when the median latency of the messages published
# in it is above SLOW_FACTOR x the run's usual second (the 10th percentile of its per-second
# medians): how long a backlog held the remote latency up, whatever the run's level.
SLOW_FACTOR = 2.0
PEAK_WINDOW_S = 5.0  # the SHB's busiest stretch: its CPU share over its busiest 5 s window


def slow_seconds(per_second_ms: Sequence[float]) -> tuple[int, float]:
    """(the seconds whose median latency is above SLOW_FACTOR x the run's usual second, the
    highest per-second median) of a run's per-second median latencies (ms)."""
    v = sorted(float(x) for x in per_second_ms if x is not None and not math.isnan(float(x)))
    if not v:
        return 0, math.nan
    usual = v[int(0.1 * (len(v) - 1))]
    return sum(1 for x in v if x > SLOW_FACTOR * usual), v[-1]


def peak_share(samples: Sequence[tuple[float, float]], window_s: float = PEAK_WINDOW_S) -> float:
    """% of one core a process used in its busiest window of ``window_s`` seconds, from its
    cumulative CPU samples ``(t_s, cpu_s)`` (windows from its first sample; a window needs two
    samples); NaN with fewer."""
    xs = sorted(samples)
    if len(xs) < 2:
        return math.nan
    best, start = math.nan, xs[0][0]
    while start < xs[-1][0]:
        w = [x for x in xs if start <= x[0] < start + window_s]
        if len(w) >= 2 and w[-1][0] > w[0][0]:
            share = 100.0 * (w[-1][1] - w[0][1]) / (w[-1][0] - w[0][0])
            best = share if math.isnan(best) else max(best, share)
        start += window_s
    return best


def measure_45(rd: RunData, settle: float = 1.0) -> dict[str, Any]:
    """CPU % of p1 (PHB) and s1 (SHB); median latency local (at p1) and remote (at s1); SHB fan-out;
    the SHB's busiest 5 s (``cpu_s1_peak``) and the remote latency's slow seconds
    (``remote_slow_s``, ``remote_peak_ms``: :func:`slow_seconds`)."""
    from pyspark.sql import functions as F

    from testbed.protocols.gryphon.analysis.transforms import cpu_utilization, latencies, latency_summary

    cpu = {r["node"]: r["cpu_pct"] for r in cpu_utilization(rd.df("cpu"), settle, rd.end_s).collect()
           if r["node"] in ("p1", "s1")}
    lat = latencies(rd.df("g_deliver"), rd.t0)
    lat = lat.where(lat.pub_s >= settle)
    med, fan = {}, None
    for r in latency_summary(lat).collect():
        kind = {"p1": "local", "s1": "remote"}.get(r["broker"], r["broker"])
        med[kind] = r["median_ms"]
        if r["broker"] == "s1":
            fan = r["n"] / max(1e-9, rd.end_s - settle)
    per_s = [r["m"] for r in lat.where(F.col("broker") == "s1").groupBy(F.floor("pub_s").alias("s"))
             .agg(F.percentile_approx("lat_ms", 0.5, 1000).alias("m")).collect()]
    slow, peak = slow_seconds(per_s)
    c = (rd.df("cpu").where((F.col("node") == "s1") & (F.col("t_rel_s") >= settle) & (F.col("t_rel_s") <= rd.end_s))
         .select("t_rel_s", (F.col("user_s") + F.col("sys_s")).alias("c")).collect())
    return {"cpu_p1": cpu.get("p1"), "cpu_s1": cpu.get("s1"), "local_median_ms": med.get("local"),
            "remote_median_ms": med.get("remote"), "fanout_msgs_s": fan, "lanes_at_t0": lanes_at_t0(rd),
            "cpu_s1_peak": peak_share([(float(r["t_rel_s"]), float(r["c"])) for r in c]),
            "remote_slow_s": slow if per_s else None, "remote_peak_ms": peak}


def lanes_at_t0(rd: RunData, node: str = "s1") -> int | None:
    """The dedicated subscriber connections ``node`` had up at its last ``conns`` sample at or
    before t0 (a lower bound: samples are a second apart); None without dedicated connections."""
    c = rd.pdf("conns", ["node", "t_rel_s", "lanes_up"])
    c = c[c["node"] == node]
    if c.empty:
        return None
    before = c[c["t_rel_s"] <= 0].sort_values("t_rel_s")
    return int(before["lanes_up"].iloc[-1]) if len(before) else 0


# ------------------------------------------------------------------------------ Figs 6-8
def fault_series(rd: RunData) -> tuple[pd.DataFrame, pd.DataFrame]:
    from testbed.protocols.gryphon.analysis.transforms import latencies, nacks

    return latencies(rd.df("g_deliver"), rd.t0).toPandas(), nacks(rd.df("g_nack")).toPandas()


def fault_figure(path: Path, title: str, lat: pd.DataFrame, nk: pd.DataFrame,
                 refs_lat: Sequence[tuple[float | None, float, str]] = (),
                 refs_nack: Sequence[tuple[float | None, float, str]] = (),
                 focus: Sequence[str] | None = None) -> Path:
    """The latency (top) and cumulative nack range (bottom) of a fault run. ``focus``: the pubends
    whose messages flowed through the failed element; the paper draws "a subscriber that is
    subscribing to messages from a pubend whose messages were flowing through broker b1", so each
    subscriber's latency is drawn for those pubends, its other pubends in grey behind them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from testbed.analysis.plots import draw_refs

    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    focused = focus is not None and len(focus) > 0 and "pubend" in lat
    if focused:
        rest = lat[~lat["pubend"].isin(list(focus))]
        a1.plot(rest["pub_s"], rest["lat_ms"], ".", ms=1, color="0.8", label="other pubends", zorder=1)
        lat = lat[lat["pubend"].isin(list(focus))]
    for (client, broker), g in lat.groupby(["client", "broker"]):
        g = g.sort_values("pub_s")
        a1.plot(g["pub_s"], g["lat_ms"], ".", ms=2, zorder=2,
                label=f"{client}@{broker}" + (f" ({', '.join(sorted(focus or []))})" if focused else ""))
    draw_refs(a1, refs_lat)
    a1.set_ylabel("latency (ms)")
    a1.set_title(title)
    a1.legend(fontsize=7, loc="upper right")
    from testbed.protocols.gryphon.analysis.figures import draw_nack_steps

    draw_nack_steps(a2, nk)
    draw_refs(a2, refs_nack)
    a2.set_xlabel("time (s from workload start; latency: send time)")
    a2.set_ylabel("cumulative nack range (ms)")
    if len(nk) or refs_nack:
        a2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _nacks_of(nk: pd.DataFrame, node: str) -> pd.DataFrame:
    return nk[nk["node"] == node]


def _max(df: pd.DataFrame, col: str) -> float:
    return float(df[col].max()) if len(df) else math.nan


def _median(df: pd.DataFrame, col: str) -> float:
    return float(df[col].median()) if len(df) else math.nan


def measure_6(rd: RunData, lat: pd.DataFrame, nk: pd.DataFrame) -> dict[str, Any]:
    """Fig 6, link b1-s1 cut (stalled, then failed)."""
    t_stall = rd.fault_time("cut", "b1")  # the link is "stalled" (undetected) from the cut on
    s1n = _nacks_of(nk, "s1")
    s1, s2 = lat[lat["broker"] == "s1"], lat[lat["broker"] == "s2"]
    others = lat[lat["broker"].isin(["s3", "s4", "s5"])]  # subscribers on no failure path
    return {
        "first_s1_nack_after_failure_s": float(s1n["nack_s"].min() - t_stall) if len(s1n) else math.nan,
        "fraction_s1_nacks_to_b2": float(s1n["to"].str.contains("b2").mean()) if len(s1n) else math.nan,
        "s1_nacks": len(s1n),
        "s1_max_latency_ms": _max(s1, "lat_ms"),
        "s1_baseline_median_ms": _median(s1[s1["pub_s"] < t_stall - 0.5], "lat_ms"),
        "s1_last_3s_median_ms": _median(s1[s1["pub_s"] > rd.end_s - 3], "lat_ms"),
        "s2_max_latency_ms": _max(s2, "lat_ms"),
        "s3_s5_max_latency_ms": _max(others, "lat_ms"),
        "s2_nacks": len(_nacks_of(nk, "s2")),
        "recovery_s": recovery_s(lat, "s1", t_stall, until=rd.end_s - 1),
        "normal_ms": normal_ms(lat, "s1", t_stall),
        "cut_at_s": t_stall,
    }


def measure_7(rd: RunData, lat: pd.DataFrame, nk: pd.DataFrame) -> dict[str, Any]:
    """Fig 7, b1 stalled, crashed, restarted."""
    t_stall, t_crash, t_restart = (rd.fault_time("stall", "b1"), rd.fault_time("crash", "b1"),
                                   rd.fault_time("restart", "b1"))
    s1 = lat[lat["broker"] == "s1"]
    routes = rd.pdf("g_route", ["node", "t_rel_s", "pubend", "cell", "via"])
    p1r = routes[(routes["node"] == "p1") & (routes["cell"] == "ib1") & (routes["t_rel_s"] > t_crash)
                 & (routes["t_rel_s"] < t_restart)]
    after = nk[(nk["nack_s"] >= t_restart) & (nk["nack_s"] <= t_restart + 5)]
    # the pubends p1 routed towards ib1 via b1 when the stall began (each pubend's last route before it)
    before = routes[(routes["node"] == "p1") & (routes["cell"] == "ib1") & (routes["t_rel_s"] <= t_stall)]
    if "pubend" in before:
        last = before.sort_values("t_rel_s").groupby("pubend")["via"].last()
        via_b1 = sorted(str(p) for p, v in last.items() if v == "b1")
    else:
        via_b1 = []
    r1, r2 = float(_nacks_of(nk, "s1")["range_ms"].sum()), float(_nacks_of(nk, "s2")["range_ms"].sum())
    b2 = nk[(nk["node"] == "b2") & (nk["origin"] == "broker")]
    back = routes_back_s(routes, t_restart, len(via_b1))
    rb2 = float(b2["range_ms"].sum())
    return {
        "s1_peak_latency_ms": _max(s1[(s1["pub_s"] >= t_stall) & (s1["pub_s"] <= t_crash + 1)], "lat_ms"),
        "p1_routes_to_ib1_while_b1_down": sorted(set(p1r["via"])),
        "nacks_within_5s_of_restart": len(after),
        "s1_range_ms": r1, "s2_range_ms": r2,
        "pubends_via_b1": via_b1,
        # not back by the run's end: the time left after the restart, a lower bound (outside any band)
        "routes_back_after_restart_s": back if back is not None else float(rd.end_s - t_restart),
        "routes_back_within_run": back is not None,
        "s1_nacked_pubends": sorted(set(_nacks_of(nk, "s1")["pubend"])) if "pubend" in nk else [],
        "stall_s": t_crash - t_stall,
        "s1_nacks": len(_nacks_of(nk, "s1")), "s2_nacks": len(_nacks_of(nk, "s2")),
        "b2_range_ms": rb2,
        "b2_ratio_to_s1_plus_s2": rb2 / (r1 + r2) if r1 + r2 else math.nan,
        "b2_fraction_to_p1": float((b2["to"] == "p1").mean()) if len(b2) else math.nan,
        "recovery_s": recovery_s(lat, "s1", t_stall, until=rd.end_s - 1),
        "normal_ms": normal_ms(lat, "s1", t_stall),
    }


def routes_back_s(routes: pd.DataFrame, t_restart: float, k: int) -> float | None:
    """Seconds from b1's restart until p1 again routes ``k`` of cell ib1's pubends via b1 (the paper's
    "messages from 2 of the 4 pubends again start flowing through b1"): p1's route per pubend replayed
    in time order from the routes it held at the restart. None: not within the run (or ``k`` = 0)."""
    ib1 = routes[(routes["node"] == "p1") & (routes["cell"] == "ib1")]
    if not k or not len(ib1) or "pubend" not in ib1:
        return None
    ib1 = ib1.sort_values("t_rel_s", kind="stable")
    held = ib1[ib1["t_rel_s"] <= t_restart].groupby("pubend")["via"].last().to_dict()
    for t, pe, via in ib1[ib1["t_rel_s"] > t_restart][["t_rel_s", "pubend", "via"]].itertuples(index=False):
        held[pe] = via
        if sum(v == "b1" for v in held.values()) >= k:
            return float(t - t_restart)
    return None


def measure_8(rd: RunData, lat: pd.DataFrame, nk: pd.DataFrame) -> dict[str, Any]:
    """Fig 8, the PHB p1 stalled, crashed, restarted."""
    t_stall, t_crash, t_restart = (rd.fault_time("stall", "p1"), rd.fault_time("crash", "p1"),
                                   rd.fault_time("restart", "p1"))
    s1 = lat[lat["broker"] == "s1"]
    ackexp = rd.pdf("g_ackexp", ["t_rel_s"])
    after = nk[(nk["nack_s"] >= t_restart) & (nk["origin"] == "subend")]
    base = _median(s1[s1["pub_s"] < t_stall - 0.5], "lat_ms")
    return {
        "s1_baseline_median_ms": base,
        "nacks_while_down": len(nk[(nk["nack_s"] > t_crash) & (nk["nack_s"] < t_restart)]),
        "held_max_latency_ms": _max(s1[(s1["pub_s"] >= t_stall) & (s1["pub_s"] <= t_crash)], "lat_ms"),
        "downtime_s": t_restart - t_crash,
        "ackexpected_after_restart": int((ackexp["t_rel_s"] >= t_restart).sum()) if len(ackexp) else 0,
        "shbs_nacking_after_restart": sorted(set(after["node"])),
        "s1_median_2s_after_restart_ms": _median(s1[s1["pub_s"] >= t_restart + 2], "lat_ms"),
        "recovery_s": recovery_s(lat, "s1", t_restart, until=rd.end_s - 1,
                                 normal=normal_ms(lat, "s1", t_stall)),  # normal: before the stall
        "normal_ms": normal_ms(lat, "s1", t_stall),
    }
