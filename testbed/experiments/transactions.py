"""Jergler et al., multi-client transactions: Figs 5-9 (EXPERIMENTS.md section B, spec
/work/shared/specs/TRANSACTIONS.md section 4) as grids and claims.

  base         reproduce.yaml: line of 3 brokers, 1 instance, sequential; D-TX, D-TXNI, S-TX x 3 seeds
               (Fig 5, and the 3-broker / 1-thread / 1-instance point of Figs 6-8)
  fig6         reproduce.yaml: overlays single, tree5, tree9 x placements (quick: 1, paper: 3) x 3 seeds
  fig7 / fig8  reproduce.yaml: TXC threads / scenario instances > 1, x 3 seeds
  fig9         fig9.yaml: regular events + dispatch rounds, D-TX, D-TXNI, S-TX x 3 seeds
  wait-*       BL-WAIT, computed entries (``search``): per configuration (line3; the other overlays;
               threads; instances) the wait search (bisection over multiples of 50 ms, the probe at
               w - 50 ms failed), then one sample per placement x seed at the wait found

Every run is read back with ``testbed.analysis.transactions.measure`` (one Spark job over all
runs); the history checks run on every run, batched (``analysis/transactions/batch.py``). Claims are judged over the seeds as experiments/claims.py says.
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable

from testbed.experiments import claims as C
from testbed.experiments.claims import Difference, Tolerance
from testbed.experiments.grid import Figure, Grid, Paper, Reference

TX_VARIANTS = ("dtx", "dtxni", "stx")
VARIANTS = ("dtx", "dtxni", "stx", "blwait")
LABEL = {"dtx": "D-TX", "dtxni": "D-TXNI", "stx": "S-TX", "blwait": "BL-WAIT"}
OVERLAYS = {"single": 1, "line3": 3, "tree5": 5, "tree9": 9}
SCALES = ("quick", "paper")
# transactions per run: sequential points (Figs 5, 6) and concurrent ones (Figs 7, 8). The spec
# proposes 100 per point at quick scale; 10 / 20 keep the whole quick reproduction near 20 min on
# the 2-core machine (docs/transactions.md, "Reproduce"): a run's fixed costs (start, settle,
# the timeout's tail, stop) dominate there.
TXS = {"quick": {"seq": 10, "conc": 20}, "paper": {"seq": 1000, "conc": 1000}}
# the paper's 1, 2, 5, 10; at quick scale 2 is left out (no claim names it: Fig 7's claims are
# about 1 -> 10 threads, Fig 8's about 4, 20 and 40 clients = 1, 5, 10 instances)
COUNTS = {"quick": [1, 5, 10], "paper": [1, 2, 5, 10]}
# Fig 6's client placements (the paper varies and averages them): at quick scale one (the
# template's even spread), x 3 seeds; at paper scale 3 placements x 3 seeds
PLACEMENTS = {"quick": [0], "paper": [0, 1, 2]}
SEEDS = 3
STEP_MS = 50
WAIT_START_MS = {"quick": 400, "paper": 2000}  # the search's first probe (the paper starts at 2000 ms)
FIG9 = {"quick": {"regular_rate": "1000/s", "round_size": 2000, "transactions": 20, "duration": "20s"},
        "paper": {}}  # paper: fig9.yaml's own (20k events per round, 300 s)
# Runs made at a time. A quick run keeps a fifth to two fifths of one core busy (measured idle,
# load 1-5, every node process and the controller, reaped under a subreaper: Fig 5's D-TX /
# D-TXNI / S-TX / BL-WAIT runs 1.5-1.7 s of CPU in 7-8 s; Fig 6's tree of 9 3.0 s in 9.3 s;
# Fig 7's 10 threads and Fig 8's 10 instances 1.6-1.9 s in 6-6.5 s; Fig 9 (1000 regular events/s)
# 9.5-9.7 s in 25 s): most of a run is waiting (settle, 5 ms links, BL-WAIT's wait, the drain),
# so two at a time leave the 2-core machine more than half idle, Fig 9's included (0.8 core for
# two). Made one after the other the quick runs were estimated at ~17 min of the 20 min budget.
# The BL-WAIT search makes its probes two at a time too (``_prober``: the same answer) and a
# configuration's samples in pairs. What sharing changes: a node may wait for a core a little
# more often; docs/transactions.md ("Runs at a time") compares Fig 5 made both ways. Paper-scale
# runs (1000 transactions, Fig 9's 20k events per round) run one at a time.
PARALLEL = {"quick": 2, "paper": 1}

# Every tolerance of this paper, with its reason (one place).
TOL = {
    "dtx_vs_dtxni": Tolerance("the spec: |lat(D-TX) - lat(D-TXNI)| / lat(D-TX) <= 0.15 ('D-TX and D-TXNI similar': "
                              "the same messages, D-TX adds snapshots and the commit order)", high=0.15),
    "thr_x_lat": Tolerance("the paper: throughput x latency = 1 s for sequential runs; here the TXC starts the next "
                           "transaction after the commit's acknowledgement, which the latency (until A's ack of op5) "
                           "does not include: 0.8-1.25", low=0.8, high=1.25),
    "drop": Tolerance("the spec: 'a clear drop' = the mean rate in dispatch bins < 0.9 x the rate outside them",
                      high=0.9),
    "no_drop": Tolerance("the spec: 'no identifiable drop' = the mean rate in dispatch bins >= 0.9 x the rate "
                         "outside them", low=0.9),
}
HARDWARE = ("an absolute latency / throughput set by the paper's setup (PADRES Java brokers, one VM per broker "
            "and client, a LAN) and here by 5 ms +- 1 ms emulated links on a shared 2-core machine: reported, "
            "not judged")
CHECKS_REQUIRED = ("transactions.p1_order", "transactions.p2_routing", "transactions.p3_atomicity",
                   "transactions.p4_agreement", "transactions.p5_tables")


# ------------------------------------------------------------------------------ configurations
@dataclass(frozen=True)
class Config:
    """One setup the BL-WAIT wait is searched for (the figures it belongs to)."""

    name: str
    set: dict[str, Any]
    figs: tuple[int, ...]


def configs(scale: str) -> list[Config]:
    out = [Config("line3", {"overlay": "line3", "transactions": TXS[scale]["seq"]}, (5, 6, 7, 8))]
    out += [Config(o, {"overlay": o, "transactions": TXS[scale]["seq"]}, (6,)) for o in OVERLAYS if o != "line3"]
    out += [Config(f"t{n}", {"threads": n, "transactions": TXS[scale]["conc"]}, (7, 8) if n == 10 else (7,))
            for n in COUNTS[scale] if n > 1]
    out += [Config(f"i{n}", {"instances": n, "transactions": TXS[scale]["conc"]}, (8,))
            for n in COUNTS[scale] if n > 1]
    return out


def config_name(overlay: str = "line3", threads: int = 1, instances: int = 1) -> str:
    if threads > 1:
        return f"t{threads}"
    if instances > 1:
        return f"i{instances}"
    return overlay


_NAME = re.compile(r"^tx-fig(?P<scale>quick|paper)-(?P<overlay>\w+)-p(?P<placement>\d+)-t(?P<threads>\d+)"
                   r"-i(?P<instances>\d+)-(?P<variant>\w+)$")


def point_of(plan) -> dict[str, Any]:
    """The --set values of a reproduce.yaml plan, read back from its name (the template encodes
    scale, overlay, placement, threads and instances there) and params (transactions)."""
    m = _NAME.match(plan.name)
    if not m:
        raise ValueError(f"{plan.name!r}: not a plan of topologies/transactions/reproduce.yaml")
    d = m.groupdict()
    return {"scale": d["scale"], "variant": d["variant"], "overlay": d["overlay"], "placement": int(d["placement"]),
            "threads": int(d["threads"]), "instances": int(d["instances"]),
            "transactions": int(plan.params["transactions"])}


# ------------------------------------------------------------------------------ the wait search
def _next_mid(lo: int, hi: int, step: int) -> int | None:
    """The bisection's next probe between a failing ``lo`` and a passing ``hi`` (None: done)."""
    return lo + max(1, (hi - lo) // (2 * step)) * step if hi - lo > step else None


def _prober(ok: Callable[[int], bool], tried: dict[int, bool],
            pair: Callable[[list[int]], dict[int, bool]] | None) -> Callable[..., bool]:
    """``probe(w, also=None)``: ``ok(w)``, once per wait. With ``pair`` (probes made two at a
    time), a wait not yet tried is probed together with ``also`` (the probe the search would make
    next on one of its branches): the search's path and answer are those of one probe at a time,
    ``also`` only saves a round when the search goes that way (else it is one probe more)."""

    def probe(w: int, also: int | None = None) -> bool:
        if w not in tried:
            if pair is not None and also is not None and also >= 0 and also != w and also not in tried:
                got = pair([w, also])
                tried.update({k: bool(got[k]) for k in (w, also)})
            else:
                tried[w] = bool(ok(w))
        return tried[w]

    return probe


def bisect_wait(ok: Callable[[int], bool], start: int, step: int = STEP_MS,
                limit: int = 8000, pair: Callable[[list[int]], dict[int, bool]] | None = None,
                ) -> tuple[int | None, dict[int, bool]]:
    """The smallest multiple of ``step`` at which ``ok`` holds while ``w - step`` failed.

    Probes ``start``, doubling while it fails (up to ``limit``); then bisects over multiples of
    ``step`` between the largest failing and the smallest passing wait, so that at the end
    ``w - step`` has been probed and failed (or ``w`` = 0). Returns (w or None, {wait: passed}).
    ``pair``: probe two waits at once (``_prober``; the same answer).
    """
    tried: dict[int, bool] = {}
    probe = _prober(ok, tried, pair)

    hi, lo = start, -step
    while not probe(hi, _next_mid(lo, hi, step)):
        lo = hi
        if hi >= limit:
            return None, tried
        hi = min(limit, hi * 2)
    return _bisect(probe, lo, hi, step), tried


def _bisect(probe, lo: int, hi: int, step: int) -> int:
    """Narrow (lo failed, hi passed) to one ``step``; each probe also names the wait it would try
    next on one branch (``_prober`` may make both at once). Returns the smallest passing wait."""
    while hi - lo > step:
        mid = lo + max(1, (hi - lo) // (2 * step)) * step
        nxt = _next_mid(lo, mid, step)
        if probe(mid, nxt if nxt is not None else _next_mid(mid, hi, step)):
            hi = mid
        else:
            lo = mid
    return hi


def search_from(ok: Callable[[int], bool], start: int, step: int = STEP_MS,
                limit: int = 8000, pair: Callable[[list[int]], dict[int, bool]] | None = None,
                ) -> tuple[int | None, dict[int, bool]]:
    """The same answer as :func:`bisect_wait` (the smallest multiple of ``step`` that passes,
    ``w - step`` probed and failed), searched from a wait expected to be close (the one found for
    the nearest configuration): probe ``start``; if it passes, step down (1, 2, 4, ... steps)
    until one fails, else up until one passes; then bisect the gap. Two probes when ``start`` is
    the answer, against the 4-5 of a bisection from WAIT_START_MS. ``pair``: probe two waits at
    once (``_prober``; the same answer: with ``start`` the answer, one round of two probes)."""
    tried: dict[int, bool] = {}
    probe = _prober(ok, tried, pair)

    start = max(0, min(limit, step * round(start / step)))
    d = step
    if probe(start, start - step):
        hi = start
        while True:
            if hi == 0:
                return 0, tried
            w = max(0, hi - d)
            if probe(w, max(0, w - 2 * d) if w > 0 else None):
                hi, d = w, d * 2
            else:
                lo = w
                break
    else:
        lo = start
        while True:
            if lo >= limit:
                return None, tried
            w = min(limit, lo + d)
            if probe(w, min(limit, w + 2 * d) if w < limit else None):
                hi = w
                break
            lo, d = w, d * 2
    return _bisect(probe, lo, hi, step), tried


def nearest_wait(cfg: str, found: dict[str, int | None]) -> int | None:
    """The wait found for the configuration nearest to ``cfg`` (same family - overlays, TXC
    threads, scenario instances - and the closest size; else the line of 3; else any), or None."""
    have = {c: w for c, w in found.items() if w is not None and c != cfg}
    if not have:
        return None

    def family(c: str) -> tuple[str, int]:
        if c in OVERLAYS:
            return "o", OVERLAYS[c]
        return c[0], int(c[1:])

    fam, n = family(cfg)
    same = sorted((abs(family(c)[1] - n), c) for c in have if family(c)[0] == fam)
    if same:
        return have[same[0][1]]
    if "line3" in have:
        return have["line3"]
    return have[sorted(have)[0]]


_SEARCHES: dict[tuple, dict[str, Any]] = {}  # one search per configuration per process (its samples reuse it)
_FAILED_LOCK = threading.Lock()


def search(plan) -> dict[str, Any]:
    """The computed entry of the ``wait`` grid, one per (BL-WAIT configuration, placement, seed).

    The first entry of a configuration searches its wait (each probe one run at placement 0,
    seed 0, correct = P2 and P9 hold on its logs): ``search_from`` the wait found for the nearest
    configuration already searched (``nearest_wait``), else ``bisect_wait`` from WAIT_START_MS; every entry then
    is one sample at the wait found: the probe run itself for placement 0 / seed 0, else a run at
    its placement and seed (checked with the other runs, batched, in the analysis). When the
    reproduction makes runs two or more at a time (``runner.jobs_now()``), the probes are made in
    pairs (``_prober``: the same answer) and a sample with the next seed's. (A resumed
    reproduction searches again for a configuration whose samples are not all in the run index.)"""
    from testbed import api
    from testbed.analysis.session import spark_session
    from testbed.analysis.transactions.measure import check_run
    from testbed.experiments import topologies
    from testbed.errors import TestbedError
    from testbed.experiments.runner import RUN_ATTEMPTS, runs_dir_now

    pt = point_of(plan)
    scale = pt["scale"]
    failed: list[dict[str, Any]] = []  # failed attempts of this entry's runs (tried again)
    path = str(topologies.find("transactions", "reproduce.yaml"))
    root = runs_dir_now() / f"reproduce-transactions-{scale}-wait"
    root.mkdir(parents=True, exist_ok=True)
    spark = spark_session()  # the analysis reuses (and stops) this session
    quiet = lambda *a: None  # noqa: E731

    def make(wait_ms: int, placement: int = 0, repeat: int = 0) -> str:
        sv = {"scale": scale, "variant": "blwait", "overlay": pt["overlay"], "threads": pt["threads"],
              "instances": pt["instances"], "transactions": pt["transactions"], "placement": placement,
              "wait_ms": wait_ms}
        [p] = [p for p in api.plans(path, sv, plan.provider) if p.repeat_index == 0]
        p = dataclasses.replace(p, repeat_index=repeat)
        # a run that raised (failed to come up: e.g. a port taken by another process between its
        # choice and the node's bind) is tried again, as the runner does (RUN_ATTEMPTS)
        for _ in range(1, RUN_ATTEMPTS):
            try:
                return str(api.run_one(p, path, sv, root, quiet, quiet).path)
            except TestbedError as e:
                with _FAILED_LOCK:
                    failed.append({"wait_ms": wait_ms, "placement": placement, "repeat": repeat,
                                   "error": f"{type(e).__name__}: {e}"})
        return str(api.run_one(p, path, sv, root, quiet, quiet).path)

    def judge(wait_ms: int, run: str, placement: int = 0, repeat: int = 0) -> dict[str, Any]:
        res = check_run(spark, run, ["check_scenario_routing", "check_no_aborts"])
        return {"wait_ms": wait_ms, "placement": placement, "repeat": repeat, "run": run,
                "passed": all(r["passed"] for r in res), "violations": {r["check"]: r["violations"] for r in res}}

    def trial(wait_ms: int, placement: int = 0, repeat: int = 0) -> dict[str, Any]:
        return judge(wait_ms, make(wait_ms, placement, repeat), placement, repeat)

    from testbed.experiments.runner import jobs_now

    two = jobs_now() > 1  # the reproduction makes runs two (or more) at a time (PARALLEL, --jobs)

    cfg = config_name(pt["overlay"], pt["threads"], pt["instances"])
    key = (scale, cfg, pt["transactions"], plan.provider)
    if key not in _SEARCHES:
        probes: dict[int, dict[str, Any]] = {}

        def ok(w: int) -> bool:
            probes[w] = trial(w)
            return probes[w]["passed"]

        def pair(ws: list[int]) -> dict[int, bool]:
            """Two probes: their runs at once (threads), their checks one after the other (here)."""
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(len(ws), thread_name_prefix="probe") as ex:
                runs = list(ex.map(make, ws))
            for w, run in zip(ws, runs):
                probes[w] = judge(w, run)
            return {w: probes[w]["passed"] for w in ws}

        t = time.monotonic()
        near = nearest_wait(cfg, {k[1]: v["wait_ms"] for k, v in _SEARCHES.items()
                                  if k[0] == scale and k[3] == plan.provider})
        if near is None:
            start = WAIT_START_MS[scale]
            w, _ = bisect_wait(ok, start, pair=pair if two else None)
        else:
            start = near
            w, _ = search_from(ok, start, pair=pair if two else None)
        _SEARCHES[key] = {"config": cfg, "wait_ms": w, "step_ms": STEP_MS, "start_ms": start,
                          "from": "nearest configuration's wait" if near is not None else "WAIT_START_MS",
                          "search_s": round(time.monotonic() - t, 1),
                          "probes": [probes[k] for k in sorted(probes)], "paired": two, "samples": {},
                          "confirmed": w is not None and (w == 0 or probes.get(w - STEP_MS, {}).get("passed") is False)}
    found = _SEARCHES[key]
    w = found["wait_ms"]
    sample: dict[str, Any] = {}
    if w is not None:
        at = (pt["placement"], plan.repeat_index)
        if at == (0, 0):
            sample = next(p for p in found["probes"] if p["wait_ms"] == w)
        elif f"{at[0]}/{at[1]}" in found["samples"]:  # made with the one before it
            sample = found["samples"].pop(f"{at[0]}/{at[1]}")
        elif two and at[1] + 1 < SEEDS:
            # this sample and the next seed's (the runner asks for it next) two at a time
            from concurrent.futures import ThreadPoolExecutor

            nxt = (at[0], at[1] + 1)
            with ThreadPoolExecutor(2, thread_name_prefix="sample") as ex:
                runs = list(ex.map(lambda a: make(w, *a), [at, nxt]))
            sample = {"wait_ms": w, "placement": at[0], "repeat": at[1], "run": runs[0]}
            found["samples"][f"{nxt[0]}/{nxt[1]}"] = {"wait_ms": w, "placement": nxt[0], "repeat": nxt[1],
                                                      "run": runs[1]}
        else:
            sample = {"wait_ms": w, "placement": at[0], "repeat": at[1], "run": make(w, *at)}
    return {**{k: v for k, v in found.items() if k != "samples"}, "sample": sample,
            **({"failed_attempts": failed} if failed else {})}


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


# ------------------------------------------------------------------------------ analyze
# The history checks run on every run (batched: analysis/transactions/batch.py).
CHECKED = {"quick": "every run (P1-P7, P9 batched over the runs; P8 batched over the Fig 9 runs)",
           "paper": "every run (P1-P7, P9 batched over the runs; P8 batched over the Fig 9 runs)"}


def analyze(ctx) -> None:
    import csv

    from testbed.analysis.transactions import figures as FG
    from testbed.analysis.transactions import measure as M

    scale = ctx.scale
    # every run and its (figure role, variant, x, sample)
    dirs: dict[str, str] = {}
    tagged: list[dict[str, Any]] = []  # {key, grid, variant, overlay, threads, instances, sample}
    waits: dict[str, dict[str, Any]] = {}  # config -> its search
    for grid in ("base", "fig6", "fig7", "fig8", *WAIT_GRIDS):
        for e in ctx.entries(grid):
            pt = e.point
            run = e.run
            if grid in WAIT_GRIDS:
                if not e.row:
                    continue
                waits.setdefault(e.row["config"], e.row)
                run = e.row.get("sample", {}).get("run")
            if run is None:
                continue
            key = (f"{grid}/{pt.get('variant')}/{pt.get('overlay', 'line3')}/p{pt.get('placement', 0)}"
                   f"/t{pt.get('threads', 1)}/i{pt.get('instances', 1)}/r{e.repeat}")
            dirs[key] = str(run)
            tagged.append({"key": key, "grid": grid, "variant": pt.get("variant"),
                           "overlay": pt.get("overlay", "line3"), "threads": pt.get("threads", 1),
                           "instances": pt.get("instances", 1), "placement": pt.get("placement", 0),
                           "sample": pt.get("placement", 0) * SEEDS + e.repeat})
    t_measure = time.monotonic()
    rows = M.tx_rows(ctx.spark, dirs) if dirs else {}
    timings = ctx.numbers.setdefault("timings", {})
    timings["measure_s"] = round(time.monotonic() - t_measure, 1)
    table = [{**t, **rows.get(t["key"], {})} for t in tagged]
    if table:
        cols: list[str] = []
        for r in table:
            cols += [c for c in r if c not in cols]
        with open(ctx.data_dir / "runs.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(table)

    def pick(metric: str, **want) -> dict[str, tuple[float, ...]]:
        """variant -> the metric per sample (sample order) among the rows matching ``want``."""
        out: dict[str, list[tuple[int, float]]] = {}
        for r in table:
            if all(r.get(k) == v for k, v in want.items()):
                out.setdefault(r["variant"], []).append((r["sample"], r.get(metric, math.nan)))
        return {v: tuple(x for _, x in sorted(xs)) for v, xs in out.items()}

    def by_x(metric: str, key: str, xs: list, extra: dict[str, Any]) -> dict[str, dict[int, tuple[float, ...]]]:
        out: dict[str, dict[int, tuple[float, ...]]] = {}
        for x in xs:
            for v, vals in pick(metric, **{key: x}, **extra).items():
                out.setdefault(v, {})[x] = vals
        return out

    seq = {"threads": 1, "instances": 1}
    base = {**seq, "overlay": "line3"}
    if ctx.wants(5):
        lat, thr, tl = pick("lat_mean_ms", **base), pick("thr", **base), pick("thr_x_lat_s", **base)
        FG.approaches(ctx.figure_path(5), f"Fig 5: latency and throughput per approach (3 brokers, {scale})",
                      lat, thr, [("dtx", 570, "paper", "latency"), ("blwait", 190, "paper", "latency"),
                                 ("stx", 20, "paper", "throughput"), ("blwait", 5, "paper", "throughput")])
        ctx.add(*claims_5(lat, thr, tl))
    if ctx.wants(6):
        lat6: dict[str, dict[int, tuple[float, ...]]] = {}
        thr6: dict[str, dict[int, tuple[float, ...]]] = {}
        for o, n in OVERLAYS.items():
            for v, vals in pick("lat_mean_ms", overlay=o, **seq).items():
                lat6.setdefault(v, {})[n] = vals
            for v, vals in pick("thr", overlay=o, **seq).items():
                thr6.setdefault(v, {})[n] = vals
        FG.sweep(ctx.figure_path(6), f"Fig 6: overlay size (1 broker, a line of 3, trees of 5 and 9; {scale})",
                 "brokers", lat6, thr6, [(1, 410, "paper D-TX", "latency", "dtx"), (9, 911, "paper D-TX", "latency", "dtx"),
                                         (9, 60, "paper S-TX", "latency", "stx")])
        ctx.add(*claims_6(lat6))
    lat7 = by_x("lat_mean_ms", "threads", COUNTS[scale], {"instances": 1, "overlay": "line3"})
    thr7 = by_x("thr", "threads", COUNTS[scale], {"instances": 1, "overlay": "line3"})
    if ctx.wants(7):
        FG.sweep(ctx.figure_path(7), f"Fig 7: TXC threads (3 brokers, 1 instance; {scale})", "TXC threads",
                 lat7, thr7)
        ctx.add(*claims_7(lat7, thr7))
    if ctx.wants(8):
        lat8 = by_x("lat_mean_ms", "instances", COUNTS[scale], {"threads": 1, "overlay": "line3"})
        thr8 = by_x("thr", "instances", COUNTS[scale], {"threads": 1, "overlay": "line3"})
        FG.sweep(ctx.figure_path(8), f"Fig 8: scenario instances (x4 clients; 3 brokers; {scale})",
                 "scenario instances", lat8, thr8)
        ctx.add(*claims_8(lat8, thr8, lat7, thr7))
    ms9: dict[str, list[dict[str, Any]]] = {}
    fig9_dirs: dict[str, str] = {}
    if ctx.wants(9):
        for e in ctx.entries("fig9"):
            if e.run is not None:
                fig9_dirs[f"fig9/{e.point.get('variant')}/r{e.repeat}"] = str(e.run)
        inb = M.inbound(ctx.spark, fig9_dirs)
        first: dict[str, dict[str, Any]] = {}
        rows9 = []
        for k in sorted(inb):
            v, r = k.split("/")[1], int(k.rsplit("/r", 1)[1])
            m = M.rate_drop(inb[k]["bins"], inb[k]["windows"], inb[k]["bin_s"])
            ms9.setdefault(v, []).append(m)
            rows9.append({"variant": v, "repeat": r, "run": fig9_dirs[k], "windows": len(inb[k]["windows"]), **m})
            if r == 0:
                first[v] = inb[k]
        if rows9:
            with open(ctx.data_dir / "fig9.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows9[0]))
                w.writeheader()
                w.writerows(rows9)
        FG.inbound_rate(ctx.figure_path(9), f"Fig 9: regular events at the agents, dispatch windows shaded "
                        f"(seed 0, {scale})", first)
        ctx.add(*claims_9(ms9))
    # the wait search, per figure
    cfg_figs = {c.name: c.figs for c in configs(scale)}
    for f in ctx.figs:
        rs = [w for c, w in sorted(waits.items()) if f in cfg_figs.get(c, ())]
        if rs:
            ctx.add(*claims_wait(f, rs))
    ctx.numbers["blwait_wait_ms"] = {c: w.get("wait_ms") for c, w in sorted(waits.items())}
    ctx.numbers["blwait_search"] = {c: {str(p["wait_ms"]): p["passed"] for p in w.get("probes", [])}
                                    for c, w in sorted(waits.items())}
    # the history checks, on every run: P1-P7 and P9 batched (one Spark job per check and group of
    # runs, analysis/transactions/batch.py), the pub/sub core's (P8) batched over the runs with
    # regular traffic (Fig 9; analysis/batch_checks.py)
    from testbed.analysis.transactions.batch import check_runs

    t = time.monotonic()
    run_dirs = {**dirs, **fig9_dirs}
    variant_of = {r["key"]: r["variant"] for r in table}
    variant_of.update({k: k.split("/")[1] for k in fig9_dirs})
    per_run = check_runs(ctx.spark, run_dirs, ctx.progress) if run_dirs else {}
    from testbed.analysis.batch import ensure_ingested, m_events
    from testbed.analysis.batch_checks import PUBSUB  # the pub/sub core's checks (P8)

    metas = ensure_ingested(ctx.spark, list(run_dirs.values())) if run_dirs else {}
    regular = [k for k in sorted(run_dirs) if k in fig9_dirs or any(
        m_events(metas.get(Path(run_dirs[k]).resolve().name, {})).get(e) for e in ("publish", "deliver"))]
    if regular:  # P8 on every run with regular traffic at once (one batched pass, not a run at a time)
        ctx.progress(f"transactions: the pub/sub checks (P8) on {len(regular)} run(s) at once")
        p8 = M.pubsub_check_runs(ctx.spark, {k: run_dirs[k] for k in regular}, ctx.progress)
    for key in sorted(run_dirs):
        if key in regular:
            per_run[key] = per_run.get(key, []) + p8[key]
        else:  # no regular traffic in the run (its ingest counted no publish/deliver): nothing to check
            per_run[key] = per_run.get(key, []) + [
                {"check": n, "passed": True, "violations": 0, "applies": False, "examples": [],
                 "why": "no regular traffic (publish/deliver) in the run"} for n in PUBSUB.values()]
    per_fig: dict[int, list[dict[str, Any]]] = {}
    for key in sorted(per_run):
        res = per_run[key]
        for c in res:
            ctx.checks.append({"run": key, "run_dir": run_dirs[key], **c})
        if variant_of.get(key) not in TX_VARIANTS:
            continue  # BL-WAIT: its P2/P9 are in checks.json (the search's probes decide its wait)
        for f in _figs_of_key(key):
            if ctx.wants(f):
                per_fig.setdefault(f, []).append({"run": key, "checks": res})
    for f in sorted(per_fig):
        ctx.add(claims_checks(f, per_fig[f]))
    bl = [(k, res) for k, res in per_run.items() if variant_of.get(k) == "blwait"]
    if bl:
        ok = [all(c["passed"] for c in res if c["check"] in ("transactions.p2_routing", "transactions.p9_no_aborts"))
              for _, res in bl]
        for f in sorted({f for k, _ in bl for f in _figs_of_key(k) if ctx.wants(f)}):
            ctx.add(C.information(f, "BL-WAIT samples at the wait found that pass P2 and P9 (every seed / placement)",
                                  [sum(ok)], len(ok), "the wait is searched on one seed (the spec's rule); another "
                                  "seed may need more: reported, not judged",
                                  failing=[k for (k, _), o in zip(bl, ok) if not o]))
    ctx.numbers["checked_runs"] = {"which": CHECKED[scale], "runs": len(per_run)}
    timings["checks_s"] = round(time.monotonic() - t, 1)
    # where the wall time went (printed at the end; result.json numbers.timings)
    probes = {p["run"] for w in waits.values() for p in w.get("probes", []) if p.get("run")}
    every = sorted(set(run_dirs.values()) | probes)
    timings["runs"] = M.phase_totals(every)
    timings["blwait_search_s"] = round(sum(w.get("search_s") or 0 for w in waits.values()), 1)
    timings["blwait_probes"] = len(probes)
    ph = timings["runs"]
    ctx.progress(f"transactions: {ph['runs']} runs: bring-up {ph['up_s']:.0f} s, settle {ph['settle_s']:.0f} s, "
                 f"workload {ph['workload_s']:.0f} s, drain + collect {ph['drain_collect_s']:.0f} s, stop "
                 f"{ph['down_s']:.0f} s; BL-WAIT searches {timings['blwait_search_s']:.0f} s ({len(probes)} probes); "
                 f"analysis: numbers {timings['measure_s']:.0f} s, checks {timings['checks_s']:.0f} s")


def _figs_of_key(key: str) -> list[int]:
    grid = key.split("/")[0]
    if grid == "base":
        return [5, 6, 7, 8]
    if grid == "wait-line3":
        return [5, 6, 7, 8]
    if grid in ("wait-threads",):
        return [7, 8] if "/t10/" in key else [7]
    return {"fig6": [6], "wait-overlays": [6], "fig7": [7, 8] if "/t10/" in key else [7], "fig8": [8],
            "wait-instances": [8], "fig9": [9]}.get(grid, [])


# ------------------------------------------------------------------------------ the paper
_STATED = {
    5: "D-TX about 570 ms, BL-WAIT about 190 ms; D-TX and D-TXNI similar; S-TX about 20 tx/s beats BL-WAIT about "
       "5 tx/s (about 4x); throughput x latency = 1 s (sequential)",
    6: "all degrade with size; D-TX about 410 ms (1 broker) -> about 911 ms (9), about 2.5x; BL-WAIT about 2.6x; "
       "S-TX about 1.9x and about 60 ms at 9 brokers; D-TXNI better than D-TX on large overlays; order S-TX < "
       "BL-WAIT < D-TXNI <= D-TX everywhere",
    7: "order S-TX < BL-WAIT < D-TX, D-TXNI; latency 1->10 threads: BL-WAIT +50%, S-TX 3x, D-TX/D-TXNI about 4x; "
       "throughput: BL-WAIT 7x, S-TX 3.7x, D-TX 2.3x",
    8: "S-TX best everywhere; S-TX and BL-WAIT latency +50% and throughput 7x at 40 clients; D-TX throughput rises "
       "to 20 clients then drops at 40; D-TXNI scales better than D-TX",
    9: "D-TX and D-TXNI show a clear drop of the event rate during dispatch; S-TX shows no identifiable drop and "
       "less variance",
}


def _points(scale: str, key: str | None, xs: list, kind: str) -> list[dict[str, Any]]:
    out = []
    for v in TX_VARIANTS:
        for x in xs:
            p = {"variant": v, "transactions": TXS[scale][kind]}
            if key:
                p[key] = x
            out.append(p)
    return out


def _fig6_points(scale: str) -> list[dict[str, Any]]:
    return [{"variant": v, "overlay": o, "placement": p, "transactions": TXS[scale]["seq"]}
            for v in TX_VARIANTS for o in OVERLAYS if o != "line3" for p in PLACEMENTS[scale]]


# the BL-WAIT configurations, grouped by the figures that need them
WAIT_GROUPS = {"wait-line3": lambda c: c.name == "line3", "wait-overlays": lambda c: c.name in OVERLAYS and c.name != "line3",
               "wait-threads": lambda c: re.fullmatch(r"t\d+", c.name) is not None,
               "wait-instances": lambda c: re.fullmatch(r"i\d+", c.name) is not None}
WAIT_GRIDS = tuple(WAIT_GROUPS)


def _wait_points(group: str, scale: str) -> list[dict[str, Any]]:
    out = []
    for c in configs(scale):
        if WAIT_GROUPS[group](c):
            for p in (PLACEMENTS[scale] if group == "wait-overlays" else [0]):
                out.append({"variant": "blwait", **c.set, "placement": p})
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


PAPER = Paper(
    name="transactions",
    title="Jergler et al., multi-client transactions in distributed publish/subscribe systems",
    notes="docs/transactions.md",
    explained=EXPLAINED,
    figures=(
        Figure(5, "latency and throughput of the four approaches (3 brokers, sequential)",
               ("base", "wait-line3"), _STATED[5],
               (Reference(570, None, "D-TX", "D-TX about 570 ms"), Reference(190, None, "BL-WAIT", "BL-WAIT about 190 ms"))),
        Figure(6, "latency and throughput vs overlay size (1, 3, 5, 9 brokers)", ("base", "fig6", "wait-line3", "wait-overlays"),
               _STATED[6], (Reference(410, 1, "D-TX", "D-TX about 410 ms"), Reference(911, 9, "D-TX", "about 911 ms"),
                            Reference(60, 9, "S-TX", "S-TX about 60 ms"))),
        Figure(7, "latency and throughput vs TXC threads", ("base", "fig7", "wait-line3", "wait-threads"), _STATED[7]),
        Figure(8, "latency and throughput vs scenario instances (4-40 clients)",
               ("base", "fig7", "fig8", "wait-line3", "wait-threads", "wait-instances"), _STATED[8]),
        Figure(9, "inbound regular-event rate at the agents over time, dispatch windows", ("fig9",), _STATED[9]),
    ),
    grids=(
        Grid("base", "reproduce.yaml", points={s: _points(s, None, [0], "seq") for s in SCALES},
             repeats={s: SEEDS for s in SCALES}),
        Grid("fig6", "reproduce.yaml", points={s: _fig6_points(s) for s in SCALES}, repeats={s: SEEDS for s in SCALES}),
        Grid("fig7", "reproduce.yaml", points={s: _points(s, "threads", [n for n in COUNTS[s] if n > 1], "conc")
                                               for s in SCALES}, repeats={s: SEEDS for s in SCALES}),
        Grid("fig8", "reproduce.yaml", points={s: _points(s, "instances", [n for n in COUNTS[s] if n > 1], "conc")
                                               for s in SCALES}, repeats={s: SEEDS for s in SCALES}),
        Grid("fig9", "fig9.yaml", points={s: [{"variant": v, **FIG9[s]} for v in TX_VARIANTS] for s in SCALES},
             repeats={s: SEEDS for s in SCALES}),
        *(Grid(g, "reproduce.yaml", points={s: _wait_points(g, s) for s in SCALES}, repeats={s: SEEDS for s in SCALES},
               compute=search) for g in WAIT_GRIDS),
    ),
    analyze=analyze,
    parallel=PARALLEL,
)
