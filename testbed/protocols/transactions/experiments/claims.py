"""The transactions claims (pure: series in, claims out) and the measured explanations of failures.

What the judged claims test (docs/transactions.md, "Claims", lists kind, band and reason): Fig 5
the cost of each approach's message pattern on one line of brokers (the order, and the paper's
ratios: S-TX's dependency path against BL-WAIT's wait); Fig 6 how each pattern's cost grows with
the overlay's diameter; Figs 7-8 how concurrency (threads, instances) loads the brokers (the
ratios 1 -> 10); Fig 9 the brokers' dispatch work against regular traffic (the drop, and S-TX's
contrast only where D-TX / D-TXNI drop). The P1-P5 checks and the BL-WAIT wait search are checks of
the runs (the checks table), not claims. Throughput is one definition for every point:
``grids.THROUGHPUT`` (committed / span).
"""

from __future__ import annotations

import math
from typing import Any

from testbed.experiments import claims as C
from testbed.experiments.claims import Difference
from testbed.experiments.grid import Explanation
from testbed.protocols.transactions.experiments.grids import (CALIBRATION, CHECKS_REQUIRED, LABEL, THROUGHPUT_TEXT, TOL,
                                                              VARIANTS, calibrated_tol, ratio_tol)

# ------------------------------------------------------------------------------ claims (pure)
Series = dict[str, tuple[float, ...]]  # variant -> one value per sample (seed / placement)


def _t(xs) -> tuple[float, ...]:
    return tuple(math.nan if x is None else float(x) for x in xs)


def _ratio(a, b) -> tuple[float, ...]:
    return tuple(x / y if y and not math.isnan(x) and not math.isnan(y) else math.nan for x, y in zip(a, b))


def claims_5(lat: Series, thr: Series, thr_x_lat: Series) -> list[C.Claim]:
    out = [C.comparison(5, "lat(S-TX) < lat(BL-WAIT) < lat(D-TXNI), lat(D-TX)", [
        Difference("S-TX < BL-WAIT", lat.get("stx", ()), lat.get("blwait", ()), "<"),
        Difference("BL-WAIT < D-TXNI", lat.get("blwait", ()), lat.get("dtxni", ()), "<"),
        Difference("BL-WAIT < D-TX", lat.get("blwait", ()), lat.get("dtx", ()), "<")],
        what="mean latency per run, 3 seeds per approach")]
    rel = [abs(a - b) / a for a, b in zip(lat.get("dtx", ()), lat.get("dtxni", ())) if a]
    out.append(C.value(5, "D-TX and D-TXNI similar: |lat(D-TX) - lat(D-TXNI)| / lat(D-TX) <= 0.15", rel, 0.15,
                       TOL["dtx_vs_dtxni"], what="per seed, the relative difference of the mean latencies"))
    tl = [x for v in VARIANTS for x in thr_x_lat.get(v, ())]
    out.append(C.value(5, "throughput x latency = 1 s (sequential)", tl, 1.0, TOL["thr_x_lat"],
                       what="per run: committed / (last end - first begin) x mean latency (s), every approach",
                       by_variant={v: list(thr_x_lat.get(v, ())) for v in VARIANTS}))
    out.append(C.value(5, "S-TX about 20 tx/s beats BL-WAIT about 5 tx/s: thr(S-TX) / thr(BL-WAIT) about 4",
                       _ratio(thr.get("stx", ()), thr.get("blwait", ())), 4.0, ratio_tol(4.0),
                       what=f"per seed, throughput ({THROUGHPUT_TEXT}) of S-TX / of BL-WAIT: S-TX's dependency path "
                            "against BL-WAIT's searched wait"))
    out.append(C.by_construction(5, "D-TX latency about 570 ms", lat.get("dtx", ()), decided_by=CALIBRATION,
                                 paper_value=570))
    # the other absolute numbers of the calibrated model are judged (docs/transactions.md)
    out.append(C.value(5, "BL-WAIT latency about 190 ms", lat.get("blwait", ()), 190, calibrated_tol(190),
                       what="mean latency per seed (ms), at the wait the search found"))
    for v, paper in (("stx", 20), ("blwait", 5)):
        out.append(C.value(5, f"{LABEL[v]} throughput about {paper} tx/s", thr.get(v, ()), paper, calibrated_tol(paper),
                           what=f"per seed, {THROUGHPUT_TEXT} (tx/s)"))
    return out


def claims_6(lat: dict[str, dict[int, tuple[float, ...]]]) -> list[C.Claim]:
    """``lat[variant][brokers]``: mean latency per sample (placement / seed), samples aligned."""
    sizes = sorted({n for v in lat.values() for n in v})
    g = lambda v, n: lat.get(v, {}).get(n, ())  # noqa: E731
    order = []
    for n in sizes:
        order += [Difference(f"{n} brokers: S-TX < BL-WAIT", g("stx", n), g("blwait", n), "<"),
                  Difference(f"{n} brokers: BL-WAIT < D-TXNI", g("blwait", n), g("dtxni", n), "<")]
    out = [C.comparison(6, "order S-TX < BL-WAIT < D-TXNI at every size", order,
                        what="mean latency per placement (line of 3: per seed) at each overlay size")]
    excess = []  # per sample: the worst relative excess of D-TXNI over D-TX across the sizes
    for i in range(min((len(g("dtx", n)) for n in sizes), default=0)):
        xs = [(g("dtxni", n)[i] - g("dtx", n)[i]) / g("dtx", n)[i] for n in sizes
              if i < len(g("dtxni", n)) and g("dtx", n)[i]]
        excess.append(max(xs) if xs and not any(map(math.isnan, xs)) else None)
    out.append(C.value(6, "D-TXNI <= D-TX at every size", excess, None, TOL["dtxni_le_dtx"],
                       what="per sample, max over the sizes of (D-TXNI - D-TX) / D-TX: the t-interval must lie below "
                            "the 'similar' margin (pass), wholly above it fails"))
    if sizes:
        lo, hi = sizes[0], sizes[-1]
        out.append(C.comparison(6, "all degrade with size: latency rises with the number of brokers", [
            Difference(f"{LABEL[v]}: {hi} vs {lo} brokers", g(v, hi), g(v, lo), ">") for v in VARIANTS],
            what=f"mean latency at {hi} against {lo} broker(s), per approach"))
        ratios = {v: _ratio(g(v, hi), g(v, lo)) for v in VARIANTS}
        out.append(C.comparison(6, f"the {hi}-broker / {lo}-broker latency ratio is smallest for S-TX", [
            Difference(f"ratio S-TX < {LABEL[v]}", ratios["stx"], ratios[v], "<") for v in ("blwait", "dtxni", "dtx")],
            what="latency ratio per placement", paper_value="S-TX 1.9x, D-TX 2.22x, BL-WAIT 2.6x"))
        out.append(C.comparison(6, f"D-TXNI better than D-TX on large overlays: lat(D-TXNI) < lat(D-TX) at {hi}", [
            Difference(f"{hi} brokers: D-TXNI < D-TX", g("dtxni", hi), g("dtx", hi), "<")],
            what="mean latency per placement at the largest overlay"))
        for v, paper in (("dtx", 2.22), ("blwait", 2.6), ("stx", 1.9)):
            out.append(C.value(6, f"{LABEL[v]} latency {hi} / {lo} brokers about {paper}x", ratios[v], paper,
                               ratio_tol(paper), what="per placement / seed, mean latency at the largest over the "
                               "smallest overlay: how the pattern's cost grows with the overlay's diameter"))
        for v, n, paper in (("dtx", lo, 410), ("dtx", hi, 911), ("stx", hi, 60)):
            out.append(C.value(6, f"{LABEL[v]} about {paper} ms at {n} broker{'s' if n > 1 else ''}", g(v, n), paper,
                               calibrated_tol(paper), what="mean latency per placement / seed (ms), calibrated model"))
    return out


def _order_at(fig: int, lat: dict[str, dict[int, tuple[float, ...]]], what: str, unit: str) -> C.Claim:
    xs = sorted({n for v in lat.values() for n in v})
    g = lambda v, n: lat.get(v, {}).get(n, ())  # noqa: E731
    diffs = []
    for n in xs:
        diffs += [Difference(f"{n} {unit}: S-TX < BL-WAIT", g("stx", n), g("blwait", n), "<"),
                  Difference(f"{n} {unit}: BL-WAIT < D-TX", g("blwait", n), g("dtx", n), "<"),
                  Difference(f"{n} {unit}: BL-WAIT < D-TXNI", g("blwait", n), g("dtxni", n), "<")]
    return C.comparison(fig, what, diffs, what=f"mean latency per seed at each {unit} count")


def claims_7(lat: dict[str, dict[int, tuple[float, ...]]], thr: dict[str, dict[int, tuple[float, ...]]]) -> list[C.Claim]:
    xs = sorted({n for v in lat.values() for n in v})
    out = [_order_at(7, lat, "order S-TX < BL-WAIT < D-TX, D-TXNI at every thread count", "threads")]
    if len(xs) < 2:
        return out
    lo, hi = xs[0], xs[-1]
    lr = {v: _ratio(lat.get(v, {}).get(hi, ()), lat.get(v, {}).get(lo, ())) for v in VARIANTS}
    tr = {v: _ratio(thr.get(v, {}).get(hi, ()), thr.get(v, {}).get(lo, ())) for v in VARIANTS}
    out.append(C.comparison(7, f"latency ratio {lo} -> {hi} threads: BL-WAIT < S-TX < D-TX", [
        Difference("BL-WAIT < S-TX", lr["blwait"], lr["stx"], "<"),
        Difference("S-TX < D-TX", lr["stx"], lr["dtx"], "<")],
        what="per seed, mean latency at 10 threads / at 1 thread", paper_value="BL-WAIT 1.5x, S-TX 3x, D-TX 4x"))
    out.append(C.comparison(7, f"throughput ratio {lo} -> {hi} threads: BL-WAIT > S-TX > D-TX > 1", [
        Difference("BL-WAIT > S-TX", tr["blwait"], tr["stx"], ">"),
        Difference("S-TX > D-TX", tr["stx"], tr["dtx"], ">"),
        Difference("D-TX > 1", tr["dtx"], tuple(1.0 for _ in tr["dtx"]), ">")],
        what="per seed, throughput at 10 threads / at 1 thread", paper_value="BL-WAIT 7x, S-TX 3.7x, D-TX 2.3x"))
    for v, pl, pt in (("blwait", 1.5, 7.0), ("stx", 3.0, 3.7), ("dtx", 4.0, 2.3), ("dtxni", 4.0, None)):
        out.append(C.value(7, f"{LABEL[v]} latency x{pl} from {lo} to {hi} threads", lr[v], pl, ratio_tol(pl),
                           what="per seed, mean latency at the most threads / at 1 thread: the brokers' load"))
        if pt:
            out.append(C.value(7, f"{LABEL[v]} throughput x{pt} from {lo} to {hi} threads", tr[v], pt, ratio_tol(pt),
                               what=f"per seed, throughput ({THROUGHPUT_TEXT}) at the most threads / at 1 thread"))
    return out


def claims_8(lat: dict[str, dict[int, tuple[float, ...]]], thr: dict[str, dict[int, tuple[float, ...]]],
             lat7: dict[str, dict[int, tuple[float, ...]]], thr7: dict[str, dict[int, tuple[float, ...]]]
             ) -> list[C.Claim]:
    xs = sorted({n for v in lat.values() for n in v})
    g = lambda d, v, n: d.get(v, {}).get(n, ())  # noqa: E731
    diffs = []
    for n in xs:
        diffs += [Difference(f"{n} instances: S-TX < {LABEL[v]}", g(lat, "stx", n), g(lat, v, n), "<")
                  for v in ("blwait", "dtx", "dtxni")]
    out = [C.comparison(8, "S-TX best everywhere", diffs, what="mean latency per seed at each instance count")]
    if len(xs) < 2:
        return out
    lo, hi = xs[0], xs[-1]
    mid = 5 if 5 in xs else xs[len(xs) // 2]
    t7 = sorted({n for v in lat7.values() for n in v})
    diffs, tdiffs = [], []
    for v in ("stx", "blwait"):
        r8 = _ratio(g(lat, v, hi), g(lat, v, lo))
        tr8 = _ratio(g(thr, v, hi), g(thr, v, lo))
        if t7:
            r7 = _ratio(g(lat7, v, t7[-1]), g(lat7, v, t7[0]))
            tr7 = _ratio(g(thr7, v, t7[-1]), g(thr7, v, t7[0]))
        else:
            r7 = tr7 = ()
        diffs.append(Difference(f"{LABEL[v]}: latency ratio {4 * hi} clients < {t7[-1] if t7 else '?'} threads",
                                r8, r7, "<"))
        tdiffs.append(Difference(f"{LABEL[v]}: throughput ratio {4 * hi} clients > {t7[-1] if t7 else '?'} threads",
                                 tr8, tr7, ">"))
        out.append(C.value(8, f"{LABEL[v]} latency +50% at 40 clients", r8, 1.5, ratio_tol(1.5),
                           what="per seed, mean latency at the most instances / at 1"))
        out.append(C.value(8, f"{LABEL[v]} throughput x7 at 40 clients", tr8, 7.0, ratio_tol(7.0),
                           what=f"per seed, throughput ({THROUGHPUT_TEXT}) at the most instances / at 1"))
    out.append(C.comparison(8, f"at {4 * hi} clients S-TX and BL-WAIT latency ratios below Fig 7's at 10 threads",
                            diffs, what="per seed, lat(40 clients)/lat(4) against lat(10 threads)/lat(1 thread)"))
    out.append(C.comparison(8, f"... and their throughput ratios above Fig 7's at 10 threads", tdiffs,
                            what="per seed, thr(40 clients)/thr(4) against thr(10 threads)/thr(1 thread)"))
    out.append(C.comparison(8, f"D-TX throughput rises to {4 * mid} clients then drops at {4 * hi}", [
        Difference(f"thr D-TX {4 * mid} > {4 * hi} clients", g(thr, "dtx", mid), g(thr, "dtx", hi), ">"),
        Difference(f"thr D-TX {4 * mid} > {4 * lo} clients", g(thr, "dtx", mid), g(thr, "dtx", lo), ">")],
        what="throughput per seed"))
    out.append(C.comparison(8, f"D-TXNI scales better than D-TX: thr D-TXNI({4 * hi}) > thr D-TX({4 * hi})", [
        Difference(f"{4 * hi} clients: D-TXNI > D-TX", g(thr, "dtxni", hi), g(thr, "dtx", hi), ">")],
        what="throughput per seed at the most clients"))
    return out


def claims_9(ms: dict[str, list[dict[str, Any]]]) -> list[C.Claim]:
    """``ms[variant]``: measure.rate_drop() per seed."""
    g = lambda v, k: [m[k] for m in ms.get(v, [])]  # noqa: E731
    out = []
    for v in ("dtx", "dtxni"):
        out.append(C.value(9, f"{LABEL[v]} shows a clear drop of the event rate during dispatch", g(v, "ratio"), None,
                           TOL["drop"], what="mean rate in dispatch bins / mean rate outside, per seed"))
    contrast = [c.verdict for c in out]
    no_drop = "S-TX shows no identifiable drop"
    less = "S-TX: less variance (coefficient of variation of the rate lower than D-TX's, D-TXNI's)"
    if contrast != [C.PASS, C.PASS]:
        # a contrast: "S-TX shows no drop" says something only where D-TX and D-TXNI do drop
        why = ("insufficient: no contrast -- S-TX's lack of a drop (and its lower variance) is judged only in "
               f"runs where D-TX and D-TXNI drop; here D-TX {contrast[0]}, D-TXNI {contrast[1]}")
        out.append(C.Claim(9, no_drop, "value", C.INSUFFICIENT, C.Measured.of(g("stx", "ratio")), None,
                           TOL["no_drop"].text(), why, "mean rate in dispatch bins / outside, per seed"))
        out.append(C.Claim(9, less, "comparison", C.INSUFFICIENT, C.Measured.of(_t(g("stx", "cv"))), None, "-", why,
                           "coefficient of variation of the per-second inbound rate, per seed"))
        return out
    out.append(C.value(9, no_drop, g("stx", "ratio"), None, TOL["no_drop"],
                       what="mean rate in dispatch bins / mean rate outside, per seed"))
    out.append(C.comparison(9, less, [Difference(f"CV S-TX < {LABEL[v]}", _t(g("stx", "cv")), _t(g(v, "cv")), "<")
                                      for v in ("dtx", "dtxni")],
                            what="coefficient of variation of the per-second inbound rate, per seed"))
    return out


def claims_checks(fig: int, results: list[dict[str, Any]]) -> C.Claim:
    """P1-P5 on every checked run of the figure (each item: {run, variant, checks: [...]}). A check of
    the runs, not a claim (#28 rule 3): ``analyze`` puts its row in the checks table (:func:`check_row`)."""
    holds = []
    for r in results:
        got = {c["check"]: c["passed"] for c in r["checks"]}
        holds.append(all(got.get(k, False) for k in CHECKS_REQUIRED))
    failing = sorted({c["check"] for r in results for c in r["checks"] if not c["passed"]})
    return C.shape(fig, "P1-P5 hold for the three transactional approaches", holds or [None],
                   judged=f"P1-P5 passed on each of the {len(results)} checked run(s) of the figure",
                   runs=[r["run"] for r in results], failing_checks=failing)


def check_row(c: C.Claim, name: str) -> dict[str, Any]:
    """A figure-level check of the runs as a row of the checks table (``ctx.checks``)."""
    failing = c.measured.detail.get("failing_checks") or []
    return {"run": f"fig{c.figure}", "check": name, "passed": c.verdict == C.PASS,
            "violations": sum(1 for h in c.measured.detail.get("holds_per_seed", []) if not h),
            "description": c.judged, "examples": list(failing)[:3]}


def claims_wait(fig: int, rows: list[dict[str, Any]]) -> list[C.Claim]:
    """The search rows of the configurations of a figure."""
    out = [C.shape(fig, "the BL-WAIT wait found passes P2 and wait - 50 ms fails it",
                   [r.get("confirmed") if r.get("wait_ms") is not None else False for r in rows] or [None],
                   judged="per configuration: the probe at the wait found passed P2 and P9, the probe at wait - 50 ms "
                          "failed",
                   samples=[r.get("wait_ms") for r in rows],
                   by_config={r["config"]: r.get("wait_ms") for r in rows})]
    for r in rows:
        out.append(C.information(fig, f"BL-WAIT wait found for {r['config']}", [r.get("wait_ms")],
                                 "not stated (found by search from 2000 ms)",
                                 "the configuration's wait (its samples at that wait: runs.csv, 'passed')",
                                 probes={p["wait_ms"]: p["passed"] for p in r.get("probes", [])}))
    return out


# Why a claim does not hold here, rendered with this reproduction's numbers (grid.Explanation):
# each cites what the same reproduction measured -- the transactions per run (``ctx.measure``),
# the load average the runs recorded -- or the report says "not explained".
_FEW = ("{tx_per_run} transactions per run and {n} seeds (the runs' 1-minute load average up to {load_1m_max:.1f} "
        "on {cpus} cores)")
# Figs 7 and 8 under concurrency: the brokers' queues (analyze.concurrency_evidence, measured on
# the figure's runs) and BL-WAIT's searched waits
_QUEUES = ("a message waited {stx_qwait_n:.0f} ms on average in S-TX's busiest broker's queue (that broker "
           "busy {stx_busy_n:.2f} of the time; 1.0 = never idle), {stx_qwait_1:.0f} ms sequentially (busy {stx_busy_1:.2f})")
_Q_CITES = ("stx_qwait_n", "stx_busy_n", "stx_qwait_1", "stx_busy_1")
_STX_THR = Explanation(
    "S-TX's busiest broker was busy {stx_busy_1:.2f} of the sequential workload and {stx_busy_n:.2f} at {most}: a broker "
    "busy {stx_busy_1:.2f} of the time can serve at most 1/{stx_busy_1:.2f} = {stx_bound:.2f} times the messages, and "
    "S-TX's throughput rose x{mean:.2f}", ("stx_busy_1", "stx_busy_n", "stx_bound"))
_STX_LAT = Explanation("S-TX's latency rose x{mean:.2f}; at {most} " + _QUEUES, _Q_CITES)
_BL_LAT = Explanation(
    "BL-WAIT's latency includes its wait, which the search set at {blwait_wait_1} ms sequentially and {blwait_wait_n} ms "
    "at {most} (the smallest whose probe routed every op 5 correctly), while a message waited {blwait_qwait_n:.0f} ms "
    "in its busiest broker's queue there (busy {blwait_busy_n:.2f}) against {blwait_qwait_1:.0f} ms sequentially",
    ("blwait_wait_1", "blwait_wait_n", "blwait_qwait_n", "blwait_busy_n", "blwait_qwait_1"))
_BL_THR = Explanation(
    "BL-WAIT's latency rose x{blwait_lat_ratio:.2f} (its searched wait {blwait_wait_1} -> {blwait_wait_n} ms), so "
    "{par} side by side give at most {blwait_thr_bound:.2f}x the throughput; measured x{mean:.2f}",
    ("blwait_lat_ratio", "blwait_wait_1", "blwait_wait_n", "blwait_thr_bound"))
_ORDER = Explanation(
    "at {most} " + _QUEUES + "; BL-WAIT's busiest broker was busy {blwait_busy_n:.2f} with {blwait_qwait_n:.0f} ms per "
    "message, D-TX's {dtx_busy_n:.2f} with {dtx_qwait_n:.0f} ms", (*_Q_CITES, "blwait_busy_n", "blwait_qwait_n",
                                                                    "dtx_busy_n", "dtx_qwait_n"))
# Fig 6 on the overlays: what one sequential transaction cost the brokers at the smallest and the
# largest overlay (analyze.overlay_evidence: the messages served and the service time per
# transaction, summed over the brokers) and BL-WAIT's searched waits
def _work(v: str, tag: str) -> str:
    return (f"{{{v}_work_{tag}:.0f}} ms of service ({{{v}_msgs_{tag}:.1f}} messages served at "
            f"{{{v}_ms_per_msg_{tag}:.1f}} ms)")


def _work_cites(v: str, *tags: str) -> tuple[str, ...]:
    return tuple(f"{v}_{k}_{t}" for t in tags for k in ("work", "msgs", "ms_per_msg"))


def _growth(v: str) -> Explanation:
    wait = (" and its searched wait went {blwait_wait_lo} -> {blwait_wait_hi} ms" if v == "blwait" else "")
    return Explanation(
        f"{LABEL[v]}'s latency grew x{{mean:.2f}} from {{lo}} to {{hi}} brokers: a transaction cost the brokers "
        + _work(v, "lo") + " on {lo} broker and " + _work(v, "hi") + f" on {{hi}}, x{{{v}_work_ratio:.2f}}" + wait,
        (*_work_cites(v, "lo", "hi"), f"{v}_work_ratio", "lo", "hi",
         *(("blwait_wait_lo", "blwait_wait_hi") if v == "blwait" else ())))


def _absolute(v: str, tag: str) -> Explanation:
    return Explanation(f"{LABEL[v]} took {{mean:.0f}} ms at {{{tag}}} broker(s), where a transaction cost the brokers "
                       + _work(v, tag) + " at the per-message cost calibrated on D-TX's 570 ms on the line of 3 "
                       "(Fig 5)", (*_work_cites(v, tag), tag))


EXPLAINED = {
    C.claim_id(6, "order S-TX < BL-WAIT < D-TXNI at every size"): Explanation(
        "BL-WAIT waits its searched wait in every transaction, {blwait_wait_lo} ms on {lo} broker and {blwait_wait_hi} "
        "ms on {hi}, while a D-TXNI transaction cost the brokers " + _work("dtxni", "lo") + " on {lo} broker and "
        + _work("dtxni", "hi") + " on {hi}, an S-TX one " + _work("stx", "lo") + " and " + _work("stx", "hi"),
        ("blwait_wait_lo", "blwait_wait_hi", *_work_cites("dtxni", "lo", "hi"), *_work_cites("stx", "lo", "hi"),
         "lo", "hi")),
    C.claim_id(6, "the 9-broker / 1-broker latency ratio is smallest for S-TX"): Explanation(
        "the latency grew x{stx_lat_ratio:.2f} for S-TX (its broker service per transaction x{stx_work_ratio:.2f}), "
        "x{blwait_lat_ratio:.2f} for BL-WAIT (x{blwait_work_ratio:.2f}; its searched wait {blwait_wait_lo} -> "
        "{blwait_wait_hi} ms), x{dtxni_lat_ratio:.2f} for D-TXNI (x{dtxni_work_ratio:.2f}) and x{dtx_lat_ratio:.2f} "
        "for D-TX (x{dtx_work_ratio:.2f}) from {lo} to {hi} brokers",
        ("stx_lat_ratio", "stx_work_ratio", "blwait_lat_ratio", "blwait_work_ratio", "blwait_wait_lo",
         "blwait_wait_hi", "dtxni_lat_ratio", "dtxni_work_ratio", "dtx_lat_ratio", "dtx_work_ratio", "lo", "hi")),
    **{C.claim_id(6, f"{LABEL[v]} latency 9 / 1 brokers about {paper}x"): _growth(v)
       for v, paper in (("dtx", 2.22), ("blwait", 2.6), ("stx", 1.9))},
    C.claim_id(6, "D-TX about 410 ms at 1 broker"): _absolute("dtx", "lo"),
    C.claim_id(6, "D-TX about 911 ms at 9 brokers"): _absolute("dtx", "hi"),
    C.claim_id(6, "S-TX about 60 ms at 9 brokers"): _absolute("stx", "hi"),
    C.claim_id(7, "order S-TX < BL-WAIT < D-TX, D-TXNI at every thread count"): _ORDER,
    C.claim_id(8, "S-TX best everywhere"): _ORDER,
    C.claim_id(7, "latency ratio 1 -> 10 threads: BL-WAIT < S-TX < D-TX"): Explanation(
        "at {most} " + _QUEUES + "; D-TX's busiest broker was busy {dtx_busy_n:.2f} with {dtx_qwait_n:.0f} ms per message "
        "({dtx_busy_1:.2f} and {dtx_qwait_1:.0f} ms sequentially)", (*_Q_CITES, "dtx_busy_n", "dtx_qwait_n",
                                                                      "dtx_busy_1", "dtx_qwait_1")),
    C.claim_id(7, "throughput ratio 1 -> 10 threads: BL-WAIT > S-TX > D-TX > 1"): Explanation(
        "S-TX's throughput can rise at most x{stx_bound:.2f} before its busiest broker is never idle (busy "
        "{stx_busy_1:.2f} sequentially, {stx_busy_n:.2f} at {most}); D-TX's busiest was busy {dtx_busy_1:.2f} "
        "sequentially (at most x{dtx_bound:.2f})", ("stx_bound", "stx_busy_1", "stx_busy_n", "dtx_busy_1", "dtx_bound")),
    C.claim_id(7, "S-TX throughput x3.7 from 1 to 10 threads"): _STX_THR,
    C.claim_id(8, "S-TX throughput x7 at 40 clients"): _STX_THR,
    C.claim_id(7, "S-TX latency x3.0 from 1 to 10 threads"): _STX_LAT,
    C.claim_id(8, "S-TX latency +50% at 40 clients"): _STX_LAT,
    C.claim_id(7, "BL-WAIT latency x1.5 from 1 to 10 threads"): _BL_LAT,
    C.claim_id(8, "BL-WAIT latency +50% at 40 clients"): _BL_LAT,
    C.claim_id(7, "BL-WAIT throughput x7.0 from 1 to 10 threads"): _BL_THR,
    C.claim_id(8, "BL-WAIT throughput x7 at 40 clients"): _BL_THR,
    C.claim_id(6, "D-TXNI better than D-TX on large overlays: lat(D-TXNI) < lat(D-TX) at 9"): Explanation(
        "the difference of the means ({mean:.0f} ms) is inside the seeds' spread ({spread:.0f} ms) with " + _FEW,
        ("tx_per_run", "load_1m_max", "cpus")),
    C.claim_id(6, "D-TXNI <= D-TX at every size"): Explanation(
        "D-TXNI's worst excess over D-TX was {mean:.2f} [{ci_low:.2f}, {ci_high:.2f}] of D-TX's latency (n={n}): "
        "the interval crosses the 0.15 margin with " + _FEW, ("tx_per_run", "load_1m_max", "cpus")),
    C.claim_id(9, "D-TX shows a clear drop of the event rate during dispatch"): Explanation(
        "the rate in dispatch bins / outside was {mean:.3f} [{ci_low:.3f}, {ci_high:.3f}] (n={n}) at "
        "{regular_rate} regular events/s", ("regular_rate",)),
    C.claim_id(9, "D-TXNI shows a clear drop of the event rate during dispatch"): Explanation(
        "the rate in dispatch bins / outside was {mean:.3f} [{ci_low:.3f}, {ci_high:.3f}] (n={n}) at "
        "{regular_rate} regular events/s", ("regular_rate",)),
}
