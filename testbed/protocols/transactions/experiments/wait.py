"""BL-WAIT's wait search: bisection over multiples of STEP_MS, the computed entries of the wait grids
(``search(plan, ctx)``)."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable

from testbed.protocols.transactions.experiments.grids import FIG6_REPEATS, OVERLAYS, SEEDS, STEP_MS, WAIT_START_MS, config_name, point_of

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


_FAILED_LOCK = threading.Lock()


def search(plan, ctx) -> dict[str, Any]:
    """The computed entry of the ``wait`` grid, one per (BL-WAIT configuration, placement, seed).

    The first entry of a configuration searches its wait (each probe one run at placement 0,
    seed 0, correct = P2 and P9 hold on its logs): ``search_from`` the wait found for the nearest
    configuration already searched (``nearest_wait``), else ``bisect_wait`` from WAIT_START_MS; every entry then
    is one sample at the wait found: the probe run itself for placement 0 / seed 0, else a run at
    its placement and seed (checked with the other runs, batched, in the analysis). When the
    reproduction makes runs two or more at a time (``ctx.jobs``), the probes are made in
    pairs (``_prober``: the same answer) and a sample with the next seed's. ``ctx`` is the
    reproduction's :class:`testbed.experiments.runner.ComputeContext`: its runs directory, Spark
    session, ``run`` (with the runner's retry) and ``memo`` (the searches of this reproduction,
    one per configuration, which its samples reuse). (A resumed reproduction searches again for a
    configuration whose samples are not all in the run index.)"""
    from testbed import api
    from testbed.experiments import topologies
    from testbed.protocols.transactions.analysis.measure import check_run

    pt = point_of(plan)
    scale = pt["scale"]
    failed: list[dict[str, Any]] = []  # failed attempts of this entry's runs (tried again)
    path = str(topologies.find("transactions", "reproduce.yaml"))
    root = ctx.runs_dir / f"reproduce-transactions-{scale}-wait"
    root.mkdir(parents=True, exist_ok=True)
    spark = ctx.spark()  # the reproduction's session (its analysis reuses it)
    searches: dict[tuple, dict[str, Any]] = ctx.memo.setdefault("blwait_searches", {})

    def make(wait_ms: int, placement: int = 0, repeat: int = 0) -> str:
        sv = {"scale": scale, "variant": "blwait", "overlay": pt["overlay"], "threads": pt["threads"],
              "instances": pt["instances"], "transactions": pt["transactions"], "placement": placement,
              "wait_ms": wait_ms}
        [p] = [p for p in api.plans(path, sv, plan.provider) if p.repeat_index == 0]
        p = dataclasses.replace(p, repeat_index=repeat)
        # a run that raised (failed to come up: e.g. a port taken by another process between its
        # choice and the node's bind) is tried again, as the runner does
        errors: list[dict[str, Any]] = []
        try:
            return str(ctx.run(p, path, sv, root, failed=errors))
        finally:
            with _FAILED_LOCK:
                failed.extend({"wait_ms": wait_ms, "placement": placement, "repeat": repeat, **e} for e in errors)

    def judge(wait_ms: int, run: str, placement: int = 0, repeat: int = 0) -> dict[str, Any]:
        res = check_run(spark, run, ["check_scenario_routing", "check_no_aborts"])
        return {"wait_ms": wait_ms, "placement": placement, "repeat": repeat, "run": run,
                "passed": all(r["passed"] for r in res), "violations": {r["check"]: r["violations"] for r in res}}

    def trial(wait_ms: int, placement: int = 0, repeat: int = 0) -> dict[str, Any]:
        return judge(wait_ms, make(wait_ms, placement, repeat), placement, repeat)

    two = ctx.jobs > 1  # the reproduction makes runs two (or more) at a time (PARALLEL, --jobs)

    cfg = config_name(pt["overlay"], pt["threads"], pt["instances"])
    key = (scale, cfg, pt["transactions"], plan.provider)
    if key not in searches:
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
        near = nearest_wait(cfg, {k[1]: v["wait_ms"] for k, v in searches.items()
                                  if k[0] == scale and k[3] == plan.provider})
        if near is None:
            start = WAIT_START_MS[scale]
            w, _ = bisect_wait(ok, start, pair=pair if two else None)
        else:
            start = near
            w, _ = search_from(ok, start, pair=pair if two else None)
        searches[key] = {"config": cfg, "wait_ms": w, "step_ms": STEP_MS, "start_ms": start,
                          "from": "nearest configuration's wait" if near is not None else "WAIT_START_MS",
                          "search_s": round(time.monotonic() - t, 1),
                          "probes": [probes[k] for k in sorted(probes)], "paired": two, "samples": {},
                          "confirmed": w is not None and (w == 0 or probes.get(w - STEP_MS, {}).get("passed") is False)}
    found = searches[key]
    w = found["wait_ms"]
    # the runs this configuration's grid makes per placement (Fig 6's overlays: FIG6_REPEATS)
    repeats = FIG6_REPEATS[pt["scale"]] if (pt["overlay"] != "line3" and pt["threads"] == 1
                                            and pt["instances"] == 1) else SEEDS
    sample: dict[str, Any] = {}
    if w is not None:
        at = (pt["placement"], plan.repeat_index)
        if at == (0, 0):
            sample = next(p for p in found["probes"] if p["wait_ms"] == w)
        elif f"{at[0]}/{at[1]}" in found["samples"]:  # made with the one before it
            sample = found["samples"].pop(f"{at[0]}/{at[1]}")
        elif two and at[1] + 1 < repeats:
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
