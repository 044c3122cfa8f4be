"""Bhola et al., exactly-once delivery in Gryphon: Figs 4-8 (EXPERIMENTS.md section C) as grids and claims.

  Figs 4-5  fig4-5.yaml, one run per (subscribers, mode in gd/best-effort) and seed
  Fig 6     fig6.yaml   link b1-s1 stalled then failed
  Fig 7     fig7.yaml   b1 stalled, crashed, restarted
  Fig 8     fig8.yaml   p1 (the PHB) stalled, crashed, restarted

Every run is analysed on its own (Parquet + the history checks); the numbers are read back with
``testbed.protocols.gryphon.analysis.measure`` and the claims judged over the seeds. Fault figures show seed 0.

What the judged claims test (docs/gryphon.md, "Claims", lists kind, band and reason): Figs 4-5 the
cost of guaranteed delivery (GD) at the SHB (per-subscriber matching and acks) and at the PHB (the
log force), and the SHB's fan-out queueing; Fig 6 the nack path around a failed link (who is
nacked, the saw-tooth of messages repaired together); Fig 7 the route switch to b2, nack
consolidation at b2 and the nack ranges against b1's stall, the second peak at b1's recovery;
Fig 8 the PHB's AckExpected recovery. By construction (never judged): the ~100 ms GD - best-effort
gap (the topology's ``log_force: 100ms``), Fig 6's notice time and its last message's latency
(the injected 2.5 s silent cut, then a close detected at once), Fig 7's first latency peak (the
injected 2.75 s stall of b1) and Fig 8's held messages' latency (p1's configured downtime).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from testbed.experiments import claims as C
from testbed.experiments.claims import Difference, Tolerance
from testbed.experiments.grid import Explanation, Figure, Grid, Paper, Reference

# Quick keeps the paper's fan-out pressure at the SHB (Fig 5's "remote latency increases with the number
# of subscribers" needs it: 400 subscribers at 2 msgs/s do not load an SHB): the paper's first two
# subscriber counts (2,000 and 8,000 deliveries/s at the SHB) and shorter runs (8 s against 30 s); 16,000
# (a 51 MB log per run to analyse) would take quick past its 20 minutes.
SUBSCRIBERS = {"quick": [1000, 4000], "paper": [1000, 4000, 8000, 16000]}
MODES = ("gd", "best-effort")

# Every tolerance of this paper, with its reason (one place).
TOL = {
    "shb_under": Tolerance("the paper: 'under 4%'; judged as GD - best-effort CPU at the SHB in [0, 4] points of one "
                           "core (100 = one core busy): the lower bound is 'GD costs at least best-effort', the "
                           "upper the paper's 4 read in our unit, stricter than the paper's own (4% of a "
                           "6-processor machine would allow up to 24 points of one core)", low=0.0, high=4.0),
    "sawtooth": Tolerance("'Since the lost messages are received in a burst after the nacks are sent, the latency "
                          "values for s1 show a saw-tooth form' (Sec 4.2, Fig 6, drawn 'for a pubend whose messages "
                          "were flowing on p1-b1'): messages received together have a latency that falls one second "
                          "per second of send time, so the least-squares slope of s1's latency against publication "
                          "time over the silent cut, for the pubends s1 nacks (those that flowed on the cut link), is "
                          "-1 s/s; within 30% (a burst's deliveries spread over up to 30% of the time they were sent "
                          "over, e.g. a chopped range nacked in several rounds)", low=-1.3, high=-0.7),
    "second_peak": Tolerance("'the second latency peak occurs when b1 recovers': the highest s1 latency among the "
                             "messages published after the first peak is delivered within 0-2 s after b1's restart "
                             "(its reconnection and the routes back)", low=0.0, high=2.0),
    "routes_back": Tolerance("'The second latency peak occurs when b1 recovers, which results in messages from 2 of "
                             "the 4 pubends to again start flowing through b1': p1 routes as many of cell ib1's "
                             "pubends via b1 as before the stall within 0-2 s of b1's restart (its reconnection to p1 "
                             "and the route change; the window of second_peak)", low=0.0, high=2.0),
    "shb_constant": Tolerance("'stays constant': the GD overhead varies by at most 2 CPU points over the sweep",
                              high=2.0),
    "phb_flat": Tolerance("'flat': the PHB's GD CPU % varies over the subscriber sweep by at most 2 points or "
                          "25% of its mean (phb_flat_rel), whichever is larger: the PHB does no per-subscriber "
                          "work; the rest is the noise of a shared machine", high=2.0),
    "phb_flat_rel": Tolerance("see phb_flat: the relative part of the bound (a fraction of the mean)", high=0.25),
    "gap_constant": Tolerance("'remains approximately constant' / 'observed in both the local and the remote "
                              "latencies': the GD - best-effort gap varies by at most 20 ms (20% of the 100 ms "
                              "log force that sets it) over the subscriber sweep, and the remote and local gaps "
                              "differ by at most as much", high=20.0),
    "notice": Tolerance("'does not notice the failure till more than 2 seconds later (just after time 8000)': "
                        "the link is stalled 2.5 s (the paper: 2-3 s) and then closed, which s1 detects at once; "
                        "its first nack must come after 2 s and before 3 s (the paper's longest stall)",
                        low=2.0, high=3.0),
    "peak": Tolerance("the paper: 'a latency of 2.5 seconds' for the last message before the failure (the 2.5 s "
                      "stall, then the nack round trip after the close): within 20%", rel=0.2),
    "ratio": Tolerance("'about half': b2 merges s1's and s2's identical nacks", low=0.35, high=0.65),
    "per_pubend": Tolerance("'about 2750ms of data was lost for each pubend. This agrees with the time interval "
                            "for which b1 was stalled': the nack range divided by the pubends routed via b1 is "
                            "the stall (issue #12: within 15%)", rel=0.15),
}
CPU_UNIT = ("% of one core of this machine (100 = one core busy); the paper's brokers ran on dedicated "
            "6-processor Power-PC machines, its axis unit is not comparable")
LOG_FORCE = ("the topology's `log_force: 100ms` (fig4-5.yaml, from Sec 4.1: 'This latency difference of about "
             "100ms is due to the delay introduced by the logging of guaranteed messages at the PHB'): the gap is "
             "what we configured; the claims judged are that it is constant and the same locally and remotely")
STALL_NOTICE = ("the injected faults (fig6.yaml): a silent cut of b1-s1 for 2.5 s, then a close that s1 detects "
                "at once; s1's first nack comes one round trip after the close, so the notice time is the "
                "configured 2.5 s")
STALL_PEAK = ("the same 2.5 s silent cut: the last message published before it waits the stall plus one nack "
              "round trip, so its latency is the configured 2.5 s plus a round trip")
STALL_B1 = ("the injected stall of b1 (fig7.yaml: 2.75 s, then a crash detected at once; no node detects a "
            "stall before the 3 s link timeout): the messages b1 holds wait out the configured stall before the "
            "crash reroutes them via b2, so the first peak (about the stall) is set by the plan; it was judged as "
            "'>= 1000 ms', which no run with this stall can miss")
PHB_DOWN = ("the injected stall, crash and restart of p1 (fig8.yaml: a 2.5 s stall, then down 12 s at quick scale, "
            "20 s at paper scale): a message p1 logged but had not sent before the crash can only leave p1 after "
            "its restart, so its latency is at least the configured downtime; that it is delivered at all (exactly "
            "once) is the history checks'. Judged as '>= half the downtime' before the rule-4 audit (#28)")
HARDWARE_LOG = ("set by the paper's logging hardware (a disk write per message at the PHB); here a local fsync "
                "on a shared 2-core machine: reported, not judged")


def _refs(ctx, n: int):
    return [(r.x, r.y, r.label(), r.series) for r in ctx.references(n)]


# ------------------------------------------------------------------------------ claims (pure)
def claims_45(rows: list[dict[str, Any]], figs: list[int]) -> list[C.Claim]:
    """``rows``: one per run: subscribers, mode, repeat + measure_45's numbers."""
    by: dict[tuple[str, int, int], dict[str, Any]] = {(r["mode"], r["subscribers"], r["repeat"]): r for r in rows}
    ns = sorted({r["subscribers"] for r in rows})
    seeds = sorted({r["repeat"] for r in rows})

    def val(mode, n, r, key):
        v = by.get((mode, n, r), {}).get(key)
        return math.nan if v is None else float(v)

    def ok(v):
        return bool(v) and not any(map(math.isnan, v))

    out: list[C.Claim] = []
    if 4 in figs:
        shb = {r: [val("gd", n, r, "cpu_s1") - val("best-effort", n, r, "cpu_s1") for n in ns] for r in seeds}
        phb = {r: [val("gd", n, r, "cpu_p1") - val("best-effort", n, r, "cpu_p1") for n in ns] for r in seeds}
        out.append(C.value(4, "SHB: GD - best-effort under 4%",
                           [max(v) for v in shb.values() if v], 4.0, TOL["shb_under"],
                           what="the largest SHB overhead of the sweep, per seed; the t-interval must lie in "
                                "[0, 4] points", by_seed=shb, unit=CPU_UNIT))
        if len(ns) > 1:
            diffs = [Difference(f"gd at the SHB: {ns[-1]} vs {ns[0]} subscribers",
                                tuple(val("gd", ns[-1], r, "cpu_s1") for r in seeds),
                                tuple(val("gd", ns[0], r, "cpu_s1") for r in seeds), ">"),
                     Difference(f"best-effort at the SHB: {ns[-1]} vs {ns[0]} subscribers",
                                tuple(val("best-effort", ns[-1], r, "cpu_s1") for r in seeds),
                                tuple(val("best-effort", ns[0], r, "cpu_s1") for r in seeds), ">")]
            diffs += [Difference(f"gd vs best-effort at the SHB, {n} subscribers",
                                 tuple(val("gd", n, r, "cpu_s1") for r in seeds),
                                 tuple(val("best-effort", n, r, "cpu_s1") for r in seeds), ">") for n in ns]
            out.append(C.comparison(4, "CPU at the SHB increases with the number of subscribers, and GD's is higher "
                                       "than best-effort's", diffs,
                                    what="the SHB's CPU (" + CPU_UNIT + ") at the largest against the smallest "
                                         "subscriber count for both modes, and GD against best-effort at every "
                                         "count, beyond the seeds' spread (Sec 4.1)"))
        out.append(C.shape(4, "SHB: GD - best-effort stays constant",
                           [(max(v) - min(v)) <= TOL["shb_constant"].high if ok(v) else None for v in shb.values()],
                           judged="max - min of the SHB overhead over the sweep <= 2 CPU points",
                           samples=[max(v) - min(v) for v in shb.values() if v], tol=TOL["shb_constant"]))
        out.append(C.comparison(4, "the overhead for GD at the PHB is more than that at the SHB (logging)",
                                [Difference(f"{n} subscribers", tuple(phb[r][i] for r in seeds),
                                            tuple(shb[r][i] for r in seeds), ">") for i, n in enumerate(ns)],
                                what="GD - best-effort CPU at the PHB (p1) against the SHB (s1), at every "
                                     "subscriber count, over the seeds (" + CPU_UNIT + ")"))
        flat, rng = [], []
        t = TOL["phb_flat"]
        for r in seeds:
            pv = [x for x in (val("gd", n, r, "cpu_p1") for n in ns) if not math.isnan(x)]
            bound = max(t.high, TOL["phb_flat_rel"].high * (sum(pv) / len(pv))) if pv else 0.0
            flat.append((max(pv) - min(pv)) <= bound if pv else None)
            rng.append(max(pv) - min(pv) if pv else None)
        out.append(C.shape(4, "PHB flat in #subscribers", flat, samples=rng, tol=t,
                           judged="max - min of the PHB's GD CPU % <= max(2 points, 25% of its mean)"))
        out.append(C.information(4, "PHB GD overhead about 8% (logging)",
                                 [sum(v) / len(v) for v in phb.values() if v], "about 8%",
                                 HARDWARE_LOG + "; unit: " + CPU_UNIT, unit="% of one core"))
    if 5 in figs and ns:
        diffs = []
        for mode in MODES:
            a = tuple(val(mode, ns[-1], r, "remote_median_ms") for r in seeds)
            b = tuple(val(mode, ns[0], r, "remote_median_ms") for r in seeds)
            diffs.append(Difference(f"{mode}: {ns[-1]} vs {ns[0]} subscribers", a, b, ">"))
        out.append(C.comparison(5, "remote latency rises with #subscribers for both", diffs,
                                what="median remote latency at the largest against the smallest sweep point "
                                     "(the paper's subscriber counts: the SHB's fan-out is the paper's)"))
        gap = {(kind, n, r): val("gd", n, r, f"{kind}_median_ms") - val("best-effort", n, r, f"{kind}_median_ms")
               for kind in ("local", "remote") for n in ns for r in seeds}
        lim = TOL["gap_constant"].high
        const, same, spans, deltas = [], [], [], []
        for r in seeds:
            per = {kind: [gap[(kind, n, r)] for n in ns] for kind in ("local", "remote")}
            if not all(ok(v) for v in per.values()):
                const.append(None)
                same.append(None)
                continue
            span = max(max(v) - min(v) for v in per.values())
            delta = max(abs(a - b) for a, b in zip(per["remote"], per["local"]))
            const.append(span <= lim)
            same.append(delta <= lim)
            spans.append(span)
            deltas.append(delta)
        out.append(C.shape(5, "the difference between GD and best-effort remains approximately constant with "
                              "increasing number of subscribers", const, samples=spans, tol=TOL["gap_constant"],
                           judged="max - min over the subscriber sweep of the GD - best-effort median latency "
                                  "gap, local and remote, <= 20 ms"))
        out.append(C.shape(5, "this constant difference is observed in both the local and the remote latencies",
                           same, samples=deltas, tol=TOL["gap_constant"],
                           judged="|remote gap - local gap| <= 20 ms at every subscriber count"))
        out.append(C.by_construction(5, "GD - best-effort about 100 ms (logging delay at PHB)",
                                     [v for v in gap.values() if not math.isnan(v)], decided_by=LOG_FORCE,
                                     paper_value="about 100 ms"))
        flat, rng = [], []
        for r in seeds:
            good = True
            allv = [val(m, n, r, "local_median_ms") for m in MODES for n in ns]
            allv = [x for x in allv if not math.isnan(x)]
            if not allv:
                flat.append(None)
                continue
            for m in MODES:
                v = [x for x in (val(m, n, r, "local_median_ms") for n in ns) if not math.isnan(x)]
                good = good and bool(v) and (max(v) - min(v)) <= max(5.0, 0.5 * (sum(allv) / len(allv)))
                rng.append(max(v) - min(v) if v else None)
            flat.append(good)
        out.append(C.shape(5, "local latency flat", flat, samples=rng,
                           judged="max - min of the local median latency <= max(5 ms, 50% of its mean), per mode"))
    return out


def claims_6(ms: list[dict[str, Any]]) -> list[C.Claim]:
    g = lambda k: [m[k] for m in ms]  # noqa: E731
    return [
        C.by_construction(6, "s1 does not notice the failure till more than 2 seconds later",
                          g("first_s1_nack_after_failure_s"), decided_by=STALL_NOTICE, paper_value="> 2 s"),
        C.shape(6, "nacks go to b2", [m["fraction_s1_nacks_to_b2"] >= 0.99 if m["s1_nacks"] else False for m in ms],
                judged="every nack of s1 goes to b2 (b1-s1 is down)", samples=g("fraction_s1_nacks_to_b2")),
        C.shape(6, "several nacks (ranges chopped)", [m["s1_nacks"] >= 2 for m in ms], judged="s1 sends >= 2 nacks",
                samples=g("s1_nacks")),
        C.by_construction(6, "the last message before the failure sees about 2.5 s latency", g("s1_max_latency_ms"),
                          decided_by=STALL_PEAK, paper_value=2500),
        C.value(6, "the latency graph has a saw-tooth form", [m.get("sawtooth_slope") for m in ms], -1.0,
                TOL["sawtooth"], what="slope of s1's latency against publication time over the silent cut, for the "
                "pubends s1 nacked (s/s)", points=[m.get("sawtooth_points") for m in ms],
                pubends=[m.get("sawtooth_pubends") for m in ms]),
        C.shape(6, "sawtooth latency then back to normal",
                [m["s1_last_3s_median_ms"] <= 2 * m["s1_baseline_median_ms"] + 20 for m in ms],
                judged="s1's median latency in the last 3 s <= 2 x its median before the failure + 20 ms",
                samples=g("s1_last_3s_median_ms")),
        C.shape(6, "s2 unaffected",
                [m["s2_nacks"] == 0 and m["s2_max_latency_ms"] <= 1.5 * m["s3_s5_max_latency_ms"] + 50 for m in ms],
                judged="no nacks from s2 and its max latency no worse than s3-s5's (x1.5 + 50 ms)",
                samples=g("s2_max_latency_ms")),
    ]


def claims_7(ms: list[dict[str, Any]]) -> list[C.Claim]:
    g = lambda k: [m[k] for m in ms]  # noqa: E731
    return [
        C.by_construction(7, "first latency peak from the stall", g("s1_peak_latency_ms"), decided_by=STALL_B1,
                          paper_value="a peak", what="s1's peak latency of the messages published from the stall "
                                                     "to 1 s after the crash (ms)"),
        C.shape(7, "all traffic moves to b2", [m["p1_routes_to_ib1_while_b1_down"] == ["b2"] for m in ms],
                judged="p1 routes cell ib1 via b2 only while b1 is down"),
        C.shape(7, "second peak at b1's restart with no nacks", [m["nacks_within_5s_of_restart"] == 0 for m in ms],
                judged="no nacks within 5 s of b1's restart", samples=g("nacks_within_5s_of_restart")),
        C.value(7, "the second latency peak occurs when b1 recovers", [m.get("second_peak_after_restart_s") for m in ms],
                None, TOL["second_peak"], what="delivery time of s1's highest-latency message published after the "
                "first peak, minus b1's restart (s)"),
        C.value(7, "when b1 recovers, messages from 2 of the 4 pubends again start flowing through b1",
                g("routes_back_after_restart_s"), None, TOL["routes_back"],
                back_within_run=g("routes_back_within_run"),
                what="seconds from b1's restart until p1 routes as many ib1 pubends via b1 as before the stall "
                     "(not back by the run's end: the time left, a lower bound)"),
        C.shape(7, "s1 and s2 nacks almost identical",
                [m["s1_range_ms"] > 0 and abs(m["s1_range_ms"] - m["s2_range_ms"])
                 <= 0.2 * max(m["s1_range_ms"], m["s2_range_ms"]) for m in ms],
                judged="s1's and s2's nack ranges within 20% of each other",
                samples=[m["s1_range_ms"] - m["s2_range_ms"] for m in ms]),
        C.shape(7, "b2 forwards all nacks to p1", [m["b2_fraction_to_p1"] >= 0.99 for m in ms],
                judged="every nack b2 originates goes to p1", samples=g("b2_fraction_to_p1")),
        C.value(7, "b2's nack range about half of s1 + s2", g("b2_ratio_to_s1_plus_s2"), 0.5, TOL["ratio"]),
        C.value(7, "s1 nack range about 5500 ms (2 pubends x about 2750 ms): the range per pubend routed via b1 "
                   "agrees with b1's stall", [_per_pubend(m, "s1_range_ms") for m in ms], 1.0, TOL["per_pubend"],
                stall_ms=[1e3 * m["stall_s"] for m in ms], pubends_via_b1=[m["pubends_via_b1"] for m in ms],
                ranges_ms=g("s1_range_ms"), what="nack range / (pubends via b1 x stall), 1 = the paper's"),
        C.value(7, "s2 nack range about 5500 ms (2 pubends x about 2750 ms): the range per pubend routed via b1 "
                   "agrees with b1's stall", [_per_pubend(m, "s2_range_ms") for m in ms], 1.0, TOL["per_pubend"],
                ranges_ms=g("s2_range_ms"), what="nack range / (pubends via b1 x stall), 1 = the paper's"),
        C.shape(7, "b1 and b2 split the load: each was handling messages from 2 of the 4 pubends",
                [len(m["pubends_via_b1"]) == 2 for m in ms], judged="p1 routes exactly 2 pubends via b1 before the stall",
                samples=[len(m["pubends_via_b1"]) for m in ms]),
    ]


def sawtooth(lat: Any, t_cut: float, t_close: float, pubends: Any = None) -> dict[str, Any]:
    """s1's latency against publication time over the silent cut [t_cut, t_close]: the least-squares
    slope (s of latency per s of publication time) and the number of messages it is fitted on.
    ``pubends``: only these pubends' messages (the ones s1 nacked: their messages flowed on the cut
    link; the paper draws 'a pubend whose messages were flowing on p1-b1'). The others reach s1 via
    b2 at their normal latency: fitted together with them, the slope would be a mix (-0.49 s/s for
    two pubends of each kind, where each cut pubend's own is -1.00)."""
    import numpy as np

    s1 = lat[(lat["broker"] == "s1") & (lat["pub_s"] >= t_cut) & (lat["pub_s"] < t_close)]
    if pubends is not None:
        s1 = s1[s1["pubend"].isin(list(pubends))]
    out = {"sawtooth_pubends": sorted(set(pubends)) if pubends is not None else None, "sawtooth_points": len(s1)}
    if len(s1) < 5:
        return {"sawtooth_slope": None, **out}
    slope = float(np.polyfit(s1["pub_s"].astype(float), s1["lat_ms"].astype(float) / 1e3, 1)[0])
    return {"sawtooth_slope": slope, **out}


def nacked_pubends(nk: Any, node: str, t_from: float) -> list[str]:
    """The pubends ``node`` nacked from ``t_from`` on (whose messages it lost)."""
    n = nk[(nk["node"] == node) & (nk["nack_s"] >= t_from)]
    return sorted(set(n["pubend"])) if len(n) else []


def nack_span_s(nk: Any, node: str, t_from: float) -> float | None:
    """Seconds between ``node``'s first and last nack from ``t_from`` on (None: no nack): one round
    of chopped nacks is sent at once; several rounds spread the repair."""
    n = nk[(nk["node"] == node) & (nk["nack_s"] >= t_from)]
    return float(n["nack_s"].max() - n["nack_s"].min()) if len(n) else None


def second_peak(lat: Any, t_crash: float, t_restart: float) -> dict[str, Any]:
    """The highest s1 latency among messages published after the first peak (from 1 s after b1's
    crash): its delivery time minus b1's restart."""
    s1 = lat[(lat["broker"] == "s1") & (lat["pub_s"] > t_crash + 1)]
    if not len(s1):
        return {"second_peak_after_restart_s": None}
    row = s1.loc[s1["lat_ms"].idxmax()]
    return {"second_peak_after_restart_s": float(row["pub_s"] + row["lat_ms"] / 1e3 - t_restart),
            "second_peak_latency_ms": float(row["lat_ms"])}


def _per_pubend(m: dict[str, Any], key: str) -> float:
    """The nack range per pubend routed via the failed broker, divided by the stall: 1 = 'agrees with
    the time interval for which b1 was stalled'."""
    n = len(m.get("pubends_via_b1") or [])
    stall_ms = 1e3 * float(m.get("stall_s") or math.nan)
    return m[key] / n / stall_ms if n and stall_ms > 0 else math.nan


def claims_8(ms: list[dict[str, Any]]) -> list[C.Claim]:
    g = lambda k: [m[k] for m in ms]  # noqa: E731
    return [
        C.shape(8, "no nacks while p1 is down (DCT infinite)", [m["nacks_while_down"] == 0 for m in ms],
                judged="no nack between p1's crash and restart", samples=g("nacks_while_down")),
        C.by_construction(8, "logged-but-unsent messages show high latency (partial sawtooth)",
                          g("held_max_latency_ms"), decided_by=PHB_DOWN, paper_value="high latency",
                          downtime_s=g("downtime_s"), what="max s1 latency of the messages published during p1's "
                                                           "stall (ms)"),
        C.shape(8, "on recovery AckExpected triggers nacks from s1..s5",
                [m["ackexpected_after_restart"] >= 1 and m["shbs_nacking_after_restart"] == ["s1", "s2", "s3", "s4", "s5"]
                 for m in ms], judged=">= 1 AckExpected after the restart and nacks from every SHB",
                samples=g("ackexpected_after_restart")),
        C.shape(8, "latency back to normal quickly",
                [m["s1_median_2s_after_restart_ms"] <= 2 * m["s1_baseline_median_ms"] + 20 for m in ms],
                judged="s1's median latency from 2 s after the restart <= 2 x its median before the stall + 20 ms "
                       "(Fig 6's rule; 'normal' is the run's own: GD latency includes the 100 ms log force)",
                samples=g("s1_median_2s_after_restart_ms")),
    ]


# ------------------------------------------------------------------------------ analyze
def analyze(ctx) -> None:
    from testbed.protocols.gryphon.analysis import measure as M
    from testbed.analysis.plots import series_plot

    run_checks: list[tuple[str, dict]] = []
    if ctx.wants(4, 5):
        rows = []
        for e in ctx.entries("fig4-5"):
            rd = M.RunData(ctx.spark, e.run)
            run_checks.append((f"fig4-5/{e.point['mode']}/{e.point['subscribers']}/r{e.repeat}", rd.checks))
            rows.append({"subscribers": e.point["subscribers"], "mode": e.point["mode"], "repeat": e.repeat,
                         "run": e.run.name, **M.measure_45(rd)})
        import pandas as pd

        pd.DataFrame(rows).to_csv(ctx.data_dir / "fig4-5.csv", index=False)

        def series(key: str, label: str) -> dict[str, dict[float, list[float]]]:
            out: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
            for r in rows:
                if r.get(key) is not None:
                    out[f"{label} {r['mode']}"][r["subscribers"]].append(r[key])
            return out

        if ctx.wants(4):
            series_plot(ctx.figure_path(4), "Fig 4: CPU utilization vs subscribers", "subscribers at the SHB",
                        "CPU utilization (% of one core; paper: 6-processor machines)",
                        {**series("cpu_p1", "PHB"), **series("cpu_s1", "SHB")},
                        _refs(ctx, 4))
        if ctx.wants(5):
            series_plot(ctx.figure_path(5), "Fig 5: latency vs subscribers", "subscribers at the SHB",
                        "median latency (ms)", {**series("local_median_ms", "local"),
                                                **series("remote_median_ms", "remote")}, _refs(ctx, 5))
        ctx.add(*claims_45(rows, ctx.figs))
        ded = [r for r in rows if r.get("lanes_at_t0") is not None]
        if ded:  # the paper's dedicated connections, up before the workload (fig4-5.yaml's settle)?
            worst = min(ded, key=lambda r: r["lanes_at_t0"] / r["subscribers"])
            ctx.measure(4, connections_up_at_t0=f"{worst['lanes_at_t0']} of {worst['subscribers']} (the fewest, "
                                                 f"{worst['mode']} r{worst['repeat']})")
            ctx.measure(5, connections_up_at_t0=f"{worst['lanes_at_t0']} of {worst['subscribers']}")
        fan = [r for r in rows if r["mode"] == "gd" and r.get("fanout_msgs_s")]
        if fan:
            best = max(fan, key=lambda r: r["fanout_msgs_s"])
            ctx.numbers["shb_fanout_msgs_s"] = {"msgs_s": best["fanout_msgs_s"], "subscribers": best["subscribers"]}
            ctx.measure(5, fanout_msgs_s=best["fanout_msgs_s"])
        ctx.measure(5, **top_point(rows))
    titles = {6: "Fig 6: link b1-s1 stalled then failed", 7: "Fig 7: b1 stalled, crashed, restarted",
              8: "Fig 8: PHB p1 stalled, crashed, restarted"}
    measures = {6: M.measure_6, 7: M.measure_7, 8: M.measure_8}
    # the pubends drawn in colour, as the paper does ("a pubend whose messages were flowing on
    # p1-b1" / "through broker b1"); Fig 8's failure (the PHB) is on every pubend's path
    FOCUS = {6: lambda m, nk: nacked_pubends(nk, "s1", m["cut_at_s"]), 7: lambda m, nk: m["pubends_via_b1"],
             8: lambda m, nk: None}
    judge = {6: claims_6, 7: claims_7, 8: claims_8}
    for f in (6, 7, 8):
        if not ctx.wants(f):
            continue
        ms = []
        for e in sorted(ctx.entries(f"fig{f}"), key=lambda e: e.repeat):
            rd = M.RunData(ctx.spark, e.run)
            run_checks.append((f"fig{f}/r{e.repeat}", rd.checks))
            lat, nk = M.fault_series(rd)
            m = measures[f](rd, lat, nk)
            if f == 6:  # the silent cut, then the close (fig6.yaml's two cuts of b1-s1)
                cuts = sorted(a.get("actual_s", a.get("planned_s")) for a in rd.manifest.get("timeline") or []
                              if a.get("op") == "cut" and "b1" in (a.get("target") or []))
                m.update(sawtooth(lat, cuts[0], cuts[1], nacked_pubends(nk, "s1", cuts[0])) if len(cuts) > 1
                         else {"sawtooth_slope": None})
                m["s1_nack_span_s"] = nack_span_s(nk, "s1", cuts[0]) if cuts else None
            if f == 7:
                m.update(second_peak(lat, rd.fault_time("crash", "b1"), rd.fault_time("restart", "b1")))
            ms.append(m)
            if e.repeat == 0:
                lat.to_csv(ctx.data_dir / f"fig{f}.csv", index=False)
                nk.to_csv(ctx.data_dir / f"fig{f}_nacks.csv", index=False)
                refs = [(r.x, r.y, r.label()) for r in ctx.references(f)]
                M.fault_figure(ctx.figure_path(f), titles[f] + " (seed 0)", lat, nk,
                               [x for x, r in zip(refs, ctx.references(f)) if r.series == "latency"],
                               [x for x, r in zip(refs, ctx.references(f)) if r.series == "nack range"],
                               focus=FOCUS[f](m, nk))
        ctx.add(*judge[f](ms))
        if f == 6 and ms:
            spans = [m["s1_nack_span_s"] for m in ms if m.get("s1_nack_span_s") is not None]
            ctx.measure(6, s1_nacks_mean=sum(m["s1_nacks"] for m in ms) / len(ms),
                        s1_nack_span_ms=1e3 * max(spans) if spans else None)
        if f == 7 and ms:
            ctx.measure(7, second_peak_ms=[None if m.get("second_peak_latency_ms") is None
                                           else round(m["second_peak_latency_ms"]) for m in ms] or None,
                        normal_ms=[None if m.get("normal_ms") is None else round(m["normal_ms"]) for m in ms] or None,
                        # cited only when the routes came back in every seed (else "not explained")
                        routes_back_s=[round(m["routes_back_after_restart_s"], 2) for m in ms]
                        if all(m.get("routes_back_within_run") for m in ms) else None)
        ctx.numbers[f"fig{f}_recovery_s"] = [m["recovery_s"] for m in ms]
        ctx.numbers[f"fig{f}_normal_ms"] = [m["normal_ms"] for m in ms]  # recovery_s's "normal", per seed
    ctx.checks.extend(M.aggregate_checks(run_checks))


_STATED = {
    4: "SHB: GD - best-effort stays constant, under 4%; PHB flat in #subscribers, GD overhead about 8% (logging)",
    5: "remote latency rises with #subscribers for both; GD - best-effort about 100 ms, constant (logging delay "
       "at PHB); local latency flat",
    6: "s1 notices after about 2 s; nacks go to b2; several nacks (ranges chopped); the last message before the "
       "failure sees about 2.5 s latency; sawtooth latency then back to normal; s2 unaffected",
    7: "first latency peak from the stall; all traffic moves to b2; second peak at b1's restart with no nacks; "
       "s1 and s2 nacks almost identical; b2 forwards all nacks to p1 with nack range about half of s1 + s2; s1 "
       "and s2 nack range about 5500 ms (2 pubends x about 2750 ms)",
    8: "no nacks while p1 is down (DCT infinite); logged-but-unsent messages show high latency (partial "
       "sawtooth); on recovery AckExpected triggers nacks from s1..s5; latency back to normal quickly",
}


def _points45(scale: str) -> list[dict[str, Any]]:
    return [{"subscribers": n, "mode": m} for n in SUBSCRIBERS[scale] for m in MODES]


def top_point(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Figs 4-5's evidence at the sweep's largest subscriber count, per mode and seed (in seed
    order, as text): the remote and local median latency, the SHB's CPU (% of one core) over the
    workload and in its busiest 5 s, and the remote latency's slow seconds and per-second peak
    (``measure.slow_seconds``)."""
    if not rows:
        return {}
    top = max(r["subscribers"] for r in rows)
    out: dict[str, Any] = {"top_subscribers": top}
    for mode, p in (("gd", "gd"), ("best-effort", "be")):
        rs = sorted((r for r in rows if r["subscribers"] == top and r["mode"] == mode), key=lambda r: r["repeat"])
        for key, name, nd in (("remote_median_ms", "remote_ms", 1), ("local_median_ms", "local_ms", 1),
                              ("cpu_s1", "shb_cpu", 0), ("cpu_s1_peak", "shb_peak", 0),
                              ("remote_slow_s", "slow_s", 0), ("remote_peak_ms", "peak_ms", 0)):
            v = [r.get(key) for r in rs if r.get(key) is not None and not math.isnan(float(r.get(key)))]
            out[f"{p}_top_{name}"] = ", ".join(f"{float(x):.{nd}f}" for x in v) if v else None
    return out


# Why a claim does not hold here, rendered with this reproduction's numbers (grid.Explanation):
# the CPU claims cite the load the runs recorded; an uncited cause shows as "not explained".
_LOADED = ("the machine's 1-minute load average reached {load_1m_max:.1f} on {cpus} cores during these {load_runs} "
           "runs (mean {load_1m_mean:.1f})")
_LOAD = _LOADED + ", and the claim judges CPU points of one core"
# Fig 5's latency failures at the largest point: how long the SHB's backlog held the remote latency
# up and how busy the SHB was meanwhile, per GD seed (measure.slow_seconds, measure.peak_share)
_BACKLOG = ("; per GD seed, the remote median stayed above twice the run's usual second for {gd_top_slow_s} s of "
            "the workload (per-second peaks {gd_top_peak_ms} ms) and the SHB's busiest 5 s took {gd_top_shb_peak} % "
            "of one core")
_BACKLOG_KEYS = ("gd_top_slow_s", "gd_top_peak_ms", "gd_top_shb_peak")
EXPLAINED = {
    C.claim_id(6, "the latency graph has a saw-tooth form"): Explanation(
        "the latency of the pubends s1 nacked fell at {mean:.2f} [{ci_low:.2f}, {ci_high:.2f}] s/s (n={n}) over the "
        "silent cut, against -1 s/s for messages received in one burst: s1 sent {s1_nacks_mean:.0f} nacks on "
        "average, the first and last up to {s1_nack_span_ms:.0f} ms apart, so the cut's messages were repaired over "
        "that long", ("s1_nacks_mean", "s1_nack_span_ms")),
    C.claim_id(4, "SHB: GD - best-effort stays constant"): Explanation(
        "the SHB overhead's range over the sweep was {mean:.1f} ± {spread:.1f} points (n={n}); " + _LOAD,
        ("load_1m_max", "cpus")),
    C.claim_id(4, "the overhead for GD at the PHB is more than that at the SHB (logging)"): Explanation(
        "at {worst} the difference (PHB - SHB overhead: {mean:.1f} points) is inside the seeds' spread "
        "({spread:.1f}); " + _LOAD, ("worst", "load_1m_max", "cpus")),
    C.claim_id(4, "PHB flat in #subscribers"): Explanation(
        "the PHB's GD CPU varied by {mean:.1f} ± {spread:.1f} points over the sweep (n={n}); " + _LOAD,
        ("load_1m_max", "cpus")),
    C.claim_id(5, "remote latency rises with #subscribers for both"): Explanation(
        "at {worst} the rise ({mean:.1f} ms) is inside the seeds' spread ({spread:.1f} ms): the SHB's fan-out at "
        "the sweep's largest point ({top_subscribers} subscribers; the paper's largest: 16,000) was "
        "{fanout_msgs_s:.0f} deliveries/s; there the remote median latency per seed was {gd_top_remote_ms} ms (GD) "
        "and {be_top_remote_ms} ms (best-effort), with the SHB at {gd_top_shb_cpu} and {be_top_shb_cpu} % of one "
        "core" + _BACKLOG + "; " + _LOADED,
        ("worst", "fanout_msgs_s", "top_subscribers", "gd_top_remote_ms", "be_top_remote_ms", "gd_top_shb_cpu",
         "be_top_shb_cpu", *_BACKLOG_KEYS, "load_1m_max", "cpus")),
    C.claim_id(5, "the difference between GD and best-effort remains approximately constant with increasing "
                  "number of subscribers"): Explanation(
        "the GD - best-effort remote latency's range over the sweep was {mean:.1f} ± {spread:.1f} ms (n={n}); at "
        "the largest point ({top_subscribers} subscribers) the remote median latency per seed was "
        "{gd_top_remote_ms} ms (GD) against {be_top_remote_ms} ms (best-effort), with the SHB at {gd_top_shb_cpu} "
        "and {be_top_shb_cpu} % of one core" + _BACKLOG + "; " + _LOADED,
        ("top_subscribers", "gd_top_remote_ms", "be_top_remote_ms", "gd_top_shb_cpu", "be_top_shb_cpu",
         *_BACKLOG_KEYS, "load_1m_max", "cpus")),
    C.claim_id(5, "this constant difference is observed in both the local and the remote latencies"): Explanation(
        "the local and remote GD - best-effort differences parted by up to {mean:.1f} ± {spread:.1f} ms (n={n}); "
        "at the largest point ({top_subscribers} subscribers) the local median latency per seed was "
        "{gd_top_local_ms} ms (GD) and the remote {gd_top_remote_ms} ms, with the SHB at {gd_top_shb_cpu} % of "
        "one core" + _BACKLOG + "; " + _LOADED,
        ("top_subscribers", "gd_top_local_ms", "gd_top_remote_ms", "gd_top_shb_cpu", *_BACKLOG_KEYS,
         "load_1m_max", "cpus")),
    C.claim_id(4, "SHB: GD - best-effort under 4%"): Explanation(
        "the largest SHB overhead of the sweep was {mean:.2f} [{ci_low:.2f}, {ci_high:.2f}] points (n={n}) against "
        "the band [0, 4]; " + _LOAD, ("load_1m_max", "cpus")),
    C.claim_id(4, "CPU at the SHB increases with the number of subscribers, and GD's is higher than best-effort's"):
        Explanation("at {worst} the difference ({mean:.2f} points) against the seeds' spread ({spread:.2f}); " + _LOAD,
                    ("worst", "load_1m_max", "cpus")),
    C.claim_id(7, "the second latency peak occurs when b1 recovers"): Explanation(
        "the highest s1 latency after the first peak was {second_peak_ms} ms per seed, delivered {mean:.1f} "
        "[{ci_low:.1f}, {ci_high:.1f}] s after b1's restart (n={n}), against a normal latency of {normal_ms} ms: "
        "b1's restart raises the latency no more than other moments of the run do, so the highest falls elsewhere. "
        "Of the paper's cause, the routing half happened: p1 routed the pubends via b1 again {routes_back_s} s after "
        "the restart (per seed); the other half, 'the extra computation in the broker machine just when it starts "
        "up, such as to run the Java JIT compiler', is a cost our brokers lack and is not modelled (the paper gives "
        "no magnitude for it; docs/gryphon.md)", ("second_peak_ms", "normal_ms", "routes_back_s")),
}

PAPER = Paper(
    name="gryphon",
    title="Bhola et al., exactly-once delivery in a content-based publish/subscribe system (Gryphon)",
    notes="docs/gryphon.md",
    explained=EXPLAINED,
    figures=(
        Figure(4, "CPU utilization vs number of subscribers, GD vs best-effort", ("fig4-5",), _STATED[4]),
        Figure(5, "latency vs number of subscribers, local and remote", ("fig4-5",), _STATED[5]),
        Figure(6, "latency and nacks, link b1-s1 failed", ("fig6",), _STATED[6],
               (Reference(2500, None, "latency", "the last message before the failure: about 2.5 s"),)),
        Figure(7, "latency and nack range, b1 crashed and restarted", ("fig7",), _STATED[7],
               (Reference(5500, None, "nack range", "s1 and s2 nack range about 5500 ms"),)),
        Figure(8, "latency and nacks, p1 crashed", ("fig8",), _STATED[8]),
    ),
    grids=(
        Grid("fig4-5", "fig4-5.yaml", points={s: _points45(s) for s in SUBSCRIBERS}, analyze=True),
        Grid("fig6", "fig6.yaml", analyze=True),
        Grid("fig7", "fig7.yaml", analyze=True),
        Grid("fig8", "fig8.yaml", analyze=True),
    ),
    analyze=analyze,
    # Alone: the figures are the pubend and subend brokers' CPU per event (Figs 4-5) and what
    # recovery costs them (Figs 6-8), measured as the processes' CPU time: another run's processes
    # on the same cores would change them, so `reproduce` runs each of these with nothing beside it.
    alone=True,
)
