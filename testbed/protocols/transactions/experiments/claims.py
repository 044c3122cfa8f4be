"""The transactions claims (pure: series in, claims out) and the measured explanations of failures."""

from __future__ import annotations

import math
from typing import Any

from testbed.experiments import claims as C
from testbed.experiments.claims import Difference
from testbed.protocols.transactions.experiments.grids import CHECKS_REQUIRED, HARDWARE, LABEL, TOL, VARIANTS

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
    out.append(C.comparison(5, "S-TX about 20 tx/s beats BL-WAIT about 5 tx/s: thr(S-TX) / thr(BL-WAIT) > 1", [
        Difference("thr S-TX > thr BL-WAIT", thr.get("stx", ()), thr.get("blwait", ()), ">")],
        what="sequential throughput (1 / mean latency), 3 seeds per approach", paper_value="about 4x"))
    out.append(C.information(5, "thr(S-TX) / thr(BL-WAIT) about 4", _ratio(thr.get("stx", ()), thr.get("blwait", ())),
                             4.0, HARDWARE + "; the ratio depends on how far BL-WAIT's searched wait exceeds "
                             "S-TX's dependency path"))
    for v, paper, unit in (("dtx", 570, "ms"), ("blwait", 190, "ms")):
        out.append(C.information(5, f"{LABEL[v]} latency about {paper} {unit}", lat.get(v, ()), paper, HARDWARE))
    for v, paper in (("stx", 20), ("blwait", 5)):
        out.append(C.information(5, f"{LABEL[v]} throughput about {paper} tx/s", thr.get(v, ()), paper, HARDWARE))
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
    le = [C.mean(g("dtxni", n)) - C.mean(g("dtx", n)) <= C.spread(g("dtxni", n)) + C.spread(g("dtx", n))
          if g("dtx", n) and g("dtxni", n) else None for n in sizes]
    out.append(C.shape(6, "D-TXNI <= D-TX at every size", le,
                       judged="mean(D-TXNI) - mean(D-TX) <= spread(D-TXNI) + spread(D-TX) at each size "
                              "(not above beyond the noise)",
                       samples=[C.mean(g("dtxni", n)) - C.mean(g("dtx", n)) for n in sizes]))
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
            out.append(C.information(6, f"{LABEL[v]} latency {hi} / {lo} brokers about {paper}x", ratios[v], paper,
                                     HARDWARE))
        out.append(C.information(6, f"D-TX about 410 ms at {lo} broker", g("dtx", lo), 410, HARDWARE))
        out.append(C.information(6, f"D-TX about 911 ms at {hi} brokers", g("dtx", hi), 911, HARDWARE))
        out.append(C.information(6, f"S-TX about 60 ms at {hi} brokers", g("stx", hi), 60, HARDWARE))
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
        out.append(C.information(7, f"{LABEL[v]} latency x{pl} from {lo} to {hi} threads", lr[v], pl, HARDWARE))
        if pt:
            out.append(C.information(7, f"{LABEL[v]} throughput x{pt} from {lo} to {hi} threads", tr[v], pt,
                                     HARDWARE))
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
        out.append(C.information(8, f"{LABEL[v]} latency +50% at 40 clients", r8, 1.5, HARDWARE))
        out.append(C.information(8, f"{LABEL[v]} throughput x7 at 40 clients", tr8, 7.0, HARDWARE))
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
    out.append(C.value(9, "S-TX shows no identifiable drop", g("stx", "ratio"), None, TOL["no_drop"],
                       what="mean rate in dispatch bins / mean rate outside, per seed"))
    out.append(C.comparison(9, "S-TX: less variance (coefficient of variation of the rate lower than D-TX's, "
                               "D-TXNI's)", [Difference(f"CV S-TX < {LABEL[v]}", _t(g("stx", "cv")), _t(g(v, "cv")), "<")
                                             for v in ("dtx", "dtxni")],
                            what="coefficient of variation of the per-second inbound rate, per seed"))
    return out


def claims_checks(fig: int, results: list[dict[str, Any]]) -> C.Claim:
    """P1-P5 on every checked run of the figure (each item: {run, variant, checks: [...]})."""
    holds = []
    for r in results:
        got = {c["check"]: c["passed"] for c in r["checks"]}
        holds.append(all(got.get(k, False) for k in CHECKS_REQUIRED))
    failing = sorted({c["check"] for r in results for c in r["checks"] if not c["passed"]})
    return C.shape(fig, "P1-P5 hold for the three transactional approaches", holds or [None],
                   judged=f"P1-P5 passed on each of the {len(results)} checked run(s) of the figure",
                   runs=[r["run"] for r in results], failing_checks=failing)


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


# Why claims fail at quick scale (docs/transactions.md, "Results"; 10-20 transactions per run, 3
# seeds, a 2-core machine shared with other jobs): shown in the report under a claim that fails.
# What we found, not a reason to move a tolerance or a setup.
_FEW = "10 transactions per run and 3 seeds on a loaded 2-core machine cannot separate differences this small"
_IDLE_BROKERS = ("with 5 ms links the Python brokers are far from saturated by 10 threads or 40 clients (the "
                 "paper's Java brokers on VMs were), so latency barely rises with concurrency and the ratios are ~1")
EXPLAINED = {
    (5, "S-TX about 20 tx/s beats BL-WAIT"): "S-TX's latency here (~110 ms) is twice the paper's ~50 ms (Python "
        "brokers, 12 link crossings of 5 ms) while BL-WAIT's searched wait (100-150 ms) is close to its own path",
    (6, "the "): f"the 9-broker / 1-broker ratios of S-TX and the next approach are inside the seeds' spread "
        f"(S-TX 2.16 +- 0.67 in the reproduction of docs/transactions.md): {_FEW}",
    (6, "D-TXNI <= D-TX at every size"): "D-TXNI does the same three phases as D-TX without the snapshot copy "
        "and the conflict test, which cost little with these small routing tables: the two are within tens of ms "
        f"of each other (D-TXNI above D-TX by 25 +- 27 ms over the sizes in the full quick run of docs/"
        f"transactions.md, the shape failing on 2 of its 4 judged points): {_FEW}",
    (6, "D-TXNI better than D-TX on large overlays"): f"D-TXNI was 35 ms below D-TX at 9 brokers with a spread of "
        f"85 ms: {_FEW}",
    (7, "latency ratio"): f"{_IDLE_BROKERS}; their order is noise, and BL-WAIT's ratio can fall below 1 because "
        f"its searched wait differs per configuration (150 ms at 1 thread, 100 ms at 10)",
    (7, "throughput ratio"): "the concurrent throughput counts the transactions over a short span against the "
        "sequential 1 / latency, so every ratio is large (12.3x / 9.9x / 5.6x) and their order is not the "
        f"paper's: {_IDLE_BROKERS}",
    (8, "at "): f"it compares with Fig 7's ratios and inherits Fig 7's: {_IDLE_BROKERS}",
    (8, "... and their throughput ratios"): f"it compares with Fig 7's ratios and inherits Fig 7's: {_IDLE_BROKERS}",
    (8, "D-TX throughput rises to"): "D-TX's throughput keeps rising to 40 clients: the brokers are not the "
        "bottleneck at quick scale, so there is no peak to drop from",
    (8, "D-TXNI scales better than D-TX"): f"{_IDLE_BROKERS}; {_FEW}",
    (9, "D-TX shows a clear drop"): "at 1000 regular events/s the brokers are far from capacity: the rate in "
        "dispatch bins / outside was 1.00 +- 0.01, and one D-TX run at 6000 events/s showed none either (0.998); a "
        "transaction's work at a broker (a few messages, a copy of a small routing table) is small against the "
        "regular traffic's here, unlike in PADRES",
    (9, "D-TXNI shows a clear drop"): "as for D-TX: the rate in dispatch bins / outside was 1.01 +- 0.01 at 1000 "
        "regular events/s, far from these brokers' capacity",
    (9, "S-TX: less variance"): "no approach's rate drops during dispatch here, so every coefficient of variation "
        "is ~1-3% and S-TX's is not lower",
}
