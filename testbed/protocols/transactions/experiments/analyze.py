"""The transactions analysis: every run read back, figures drawn, claims judged (``analyze(ctx)``)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from testbed.protocols.transactions.experiments.claims import (check_row, claims_5, claims_6, claims_7, claims_8,
                                                               claims_9, claims_checks, claims_wait)
from testbed.protocols.transactions.experiments.grids import (COUNTS, FIG9, OVERLAYS, SEEDS, THROUGHPUT, TX_VARIANTS, TXS,
                                                              WAIT_GRIDS, config_name, configs, tx_count)

# ------------------------------------------------------------------------------ analyze
# The history checks run on every run (batched: protocols/transactions/analysis/batch.py).
CHECKED = {"quick": "every run (P1-P7, P9 batched over the runs; P8 batched over the Fig 9 runs)",
           "paper": "every run (P1-P7, P9 batched over the runs; P8 batched over the Fig 9 runs)"}


def analyze(ctx) -> None:
    import csv

    from testbed.protocols.transactions.analysis import figures as FG
    from testbed.protocols.transactions.analysis import measure as M

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
        lat, thr, tl = pick("lat_mean_ms", **base), pick(THROUGHPUT, **base), pick("thr_x_lat_s", **base)
        FG.approaches(ctx.figure_path(5), f"Fig 5: latency and throughput per approach (3 brokers, {scale})",
                      lat, thr, [("dtx", 570, "paper", "latency"), ("blwait", 190, "paper", "latency"),
                                 ("stx", 20, "paper", "throughput"), ("blwait", 5, "paper", "throughput")])
        ctx.add(*claims_5(lat, thr, tl))
    lat6: dict[str, dict[int, tuple[float, ...]]] = {}
    if ctx.wants(6):
        thr6: dict[str, dict[int, tuple[float, ...]]] = {}
        for o, n in OVERLAYS.items():
            for v, vals in pick("lat_mean_ms", overlay=o, **seq).items():
                lat6.setdefault(v, {})[n] = vals
            for v, vals in pick(THROUGHPUT, overlay=o, **seq).items():
                thr6.setdefault(v, {})[n] = vals
        FG.sweep(ctx.figure_path(6), f"Fig 6: overlay size (1 broker, a line of 3, trees of 5 and 9; {scale})",
                 "brokers", lat6, thr6, [(1, 410, "paper D-TX", "latency", "dtx"), (9, 911, "paper D-TX", "latency", "dtx"),
                                         (9, 60, "paper S-TX", "latency", "stx")])
        ctx.add(*claims_6(lat6))
    lat7 = by_x("lat_mean_ms", "threads", COUNTS[scale], {"instances": 1, "overlay": "line3"})
    thr7 = by_x(THROUGHPUT, "threads", COUNTS[scale], {"instances": 1, "overlay": "line3"})
    if ctx.wants(7):
        FG.sweep(ctx.figure_path(7), f"Fig 7: TXC threads (3 brokers, 1 instance; {scale})", "TXC threads",
                 lat7, thr7)
        ctx.add(*claims_7(lat7, thr7))
    lat8: dict[str, dict[int, tuple[float, ...]]] = {}
    if ctx.wants(8):
        lat8 = by_x("lat_mean_ms", "instances", COUNTS[scale], {"threads": 1, "overlay": "line3"})
        thr8 = by_x(THROUGHPUT, "instances", COUNTS[scale], {"threads": 1, "overlay": "line3"})
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
    # measured for the explanations: the transactions per run, the regular rate of Fig 9
    for f in (5, 6):
        ctx.measure(f, tx_per_run=TXS[scale]["seq"])
    conc = [tx_count(scale, "conc", n) for n in COUNTS[scale] if n > 1]
    for f in (7, 8):
        ctx.measure(f, tx_per_run=f"{min(conc)}-{max(conc)}")
    # the brokers' queues and BL-WAIT's waits, sequential and at the most threads / instances
    for f, lat in ((7, lat7), (8, lat8)):
        if ctx.wants(f):
            ctx.measure(f, **concurrency_evidence(f, table, dirs, waits, lat, COUNTS[scale]))
    if ctx.wants(6):  # the brokers' work per transaction at the smallest and the largest overlay
        ctx.measure(6, **overlay_evidence(table, dirs, waits, lat6))
    rates = sorted({M.setup(d)["regular_rate"] for d in fig9_dirs.values()} - {None})
    if rates:  # the rate the runs' plans had (fig9.yaml: 0.8 of a broker's capacity under the cost)
        ctx.measure(9, regular_rate="/".join(f"{r:g}/s" for r in rates))
    # the wait search, per figure: a check of the runs (the checks table), not a claim
    cfg_figs = {c.name: c.figs for c in configs(scale)}
    for f in ctx.figs:
        rs = [w for c, w in sorted(waits.items()) if f in cfg_figs.get(c, ())]
        if rs:
            found = claims_wait(f, rs)[0]
            ctx.checks.append(check_row(found, "transactions.blwait_wait_search") | {
                "by_config": found.measured.detail.get("by_config")})
    ctx.numbers["blwait_wait_ms"] = {c: w.get("wait_ms") for c, w in sorted(waits.items())}
    ctx.numbers["blwait_search"] = {c: {str(p["wait_ms"]): p["passed"] for p in w.get("probes", [])}
                                    for c, w in sorted(waits.items())}
    # the history checks, on every run: P1-P7 and P9 batched (one Spark job per check and group of
    # runs, protocols/transactions/analysis/batch.py), the pub/sub core's (P8) batched over the runs with
    # regular traffic (Fig 9; analysis/batch_checks.py)
    from testbed.protocols.transactions.analysis.batch import check_runs

    t = time.monotonic()
    run_dirs = {**dirs, **fig9_dirs}
    variant_of = {r["key"]: r["variant"] for r in table}
    variant_of.update({k: k.split("/")[1] for k in fig9_dirs})
    per_run = check_runs(ctx.spark, run_dirs, ctx.progress) if run_dirs else {}
    from testbed.analysis.batch import ensure_ingested, m_events
    from testbed.protocols.pubsub.analysis.batch import PUBSUB  # the pub/sub core's checks (P8)

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
    for f in sorted(per_fig):  # P1-P5 over the figure's runs: a check (every run's rows are above too)
        ctx.checks.append(check_row(claims_checks(f, per_fig[f]), "transactions.p1_p5_per_figure"))
    bl = [(k, res) for k, res in per_run.items() if variant_of.get(k) == "blwait"]
    if bl:
        ok = [all(c["passed"] for c in res if c["check"] in ("transactions.p2_routing", "transactions.p9_no_aborts"))
              for _, res in bl]
        ctx.numbers["blwait_samples_pass_p2_p9"] = {
            "passed": sum(ok), "of": len(ok), "failing": [k for (k, _), o in zip(bl, ok) if not o],
            "why": "the wait is searched on one seed (the spec's rule); another seed may need more"}
        samples_fail_wait_search(ctx.checks, {k: o for (k, _), o in zip(bl, ok)}, cfg_figs)
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


def samples_fail_wait_search(checks: list[dict[str, Any]], samples: dict[str, bool],
                             cfg_figs: dict[str, tuple[int, ...]]) -> None:
    """The wait found must hold on its samples too (issue #30): a BL-WAIT run at the wait found
    (another seed or placement of the configuration) that failed P2 or P9 fails its figures'
    ``transactions.blwait_wait_search`` row, which lists it. ``samples``: run key
    (``<grid>/blwait/<overlay>/p<placement>/t<threads>/i<instances>/r<repeat>``) -> P2 and P9 passed."""
    bad: dict[str, list[str]] = {}
    for key, passed in sorted(samples.items()):
        if not passed:
            _, _, overlay, _, t, i, _ = key.split("/")
            bad.setdefault(config_name(overlay, int(t[1:]), int(i[1:])), []).append(key)
    for row in checks:
        if row.get("check") != "transactions.blwait_wait_search":
            continue
        fig = int(str(row["run"]).removeprefix("fig"))
        failing = [k for c, ks in sorted(bad.items()) if fig in cfg_figs.get(c, ()) for k in ks]
        row["description"] = (row.get("description") or "") + "; every sample at the wait found passed P2 and P9"
        row["samples_failing"] = failing
        if failing:
            row["passed"] = False
            row["violations"] = int(row.get("violations") or 0) + len(failing)
            row["examples"] = (list(row.get("examples") or []) + failing)[:3]


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


def concurrency_evidence(fig: int, table: list[dict[str, Any]], dirs: dict[str, str], waits: dict[str, dict[str, Any]],
                         lat: dict[str, dict[int, tuple[float, ...]]], counts: list[int]) -> dict[str, Any]:
    """What Figs 7 and 8's explanations cite, measured on this reproduction's runs: per variant
    ``v``, its busiest broker's mean busy fraction and the mean wait of a message in that broker's
    queue, sequentially (``v_busy_1``, ``v_qwait_1``) and at the most threads (Fig 7) / instances
    (Fig 8) (``v_busy_n``, ``v_qwait_n``), each the mean over the runs (seeds) of the point
    (``measure.broker_queues``); ``stx_bound`` / ``dtx_bound``: the most S-TX's / D-TX's throughput can grow
    before its busiest broker is never idle (1 / ``v_busy_1``); BL-WAIT's searched waits (``blwait_wait_1``,
    ``blwait_wait_n``), its latency ratio (``blwait_lat_ratio``, mean over seeds) and the throughput
    that ratio leaves at n threads (``blwait_thr_bound`` = n / the ratio); ``most``: the point, in words;
    ``par``: the transactions run side by side there."""
    from testbed.protocols.transactions.analysis import measure as M

    key, other = ("threads", "instances") if fig == 7 else ("instances", "threads")
    hi = max(counts)
    out: dict[str, Any] = {"most": f"{hi} threads" if fig == 7 else f"{4 * hi} clients",
                           "par": f"{hi} threads" if fig == 7 else f"{hi} instances"}

    def mean(xs: list[float]) -> float:
        xs = [x for x in xs if not math.isnan(x)]
        return sum(xs) / len(xs) if xs else math.nan

    for v in ("dtx", "dtxni", "stx", "blwait"):
        for n, tag in ((1, "1"), (hi, "n")):
            qs = [M.broker_queues(dirs[r["key"]]) for r in table
                  if r["variant"] == v and r["overlay"] == "line3" and r[key] == n and r[other] == 1]
            out[f"{v}_busy_{tag}"] = mean([q["busy_mean_max"] for q in qs])
            out[f"{v}_qwait_{tag}"] = mean([q["wait_ms_busiest"] for q in qs])
    for v in ("stx", "dtx"):
        b1 = out[f"{v}_busy_1"]
        out[f"{v}_bound"] = 1.0 / b1 if b1 and not math.isnan(b1) else math.nan
    w1 = waits.get(config_name("line3", 1, 1), {}).get("wait_ms")
    wn = waits.get(config_name("line3", *((hi, 1) if fig == 7 else (1, hi))), {}).get("wait_ms")
    out["blwait_wait_1"], out["blwait_wait_n"] = w1, wn
    bl = lat.get("blwait", {})
    ratios = [b / a for a, b in zip(bl.get(1, ()), bl.get(hi, ())) if a]
    out["blwait_lat_ratio"] = mean(ratios)
    out["blwait_thr_bound"] = hi / out["blwait_lat_ratio"] if ratios and out["blwait_lat_ratio"] else math.nan
    return out


def overlay_evidence(table: list[dict[str, Any]], dirs: dict[str, str], waits: dict[str, dict[str, Any]],
                     lat: dict[str, dict[int, tuple[float, ...]]]) -> dict[str, Any]:
    """What Fig 6's explanations cite, measured on this reproduction's sequential runs at the
    smallest (``lo``) and the largest (``hi``) overlay: per variant ``v`` the messages the brokers
    served per transaction (``v_msgs_lo``, ``v_msgs_hi``) and their service time per transaction
    (``v_work_lo``, ``v_work_hi``, ms), each the mean over the point's runs (placements x seeds,
    ``measure.broker_work``), the growth of that work (``v_work_ratio`` = hi / lo), the broker time
    per served message (``v_ms_per_msg_lo``, ``v_ms_per_msg_hi``) and the latency's growth
    (``v_lat_ratio``, the mean of the per-sample ratios); BL-WAIT's searched waits at both sizes
    (``blwait_wait_lo``, ``blwait_wait_hi``); ``lo`` / ``hi``: the sizes, in brokers."""
    from testbed.protocols.transactions.analysis import measure as M

    sizes = {o: n for o, n in OVERLAYS.items()
             if any(r["overlay"] == o and r["threads"] == 1 and r["instances"] == 1 for r in table)}
    out: dict[str, Any] = {"lo": None, "hi": None, "blwait_wait_lo": None, "blwait_wait_hi": None}
    if len(sizes) < 2:
        return out
    (o_lo, lo), (o_hi, hi) = min(sizes.items(), key=lambda kv: kv[1]), max(sizes.items(), key=lambda kv: kv[1])
    out.update(lo=lo, hi=hi, blwait_wait_lo=waits.get(config_name(o_lo), {}).get("wait_ms"),
               blwait_wait_hi=waits.get(config_name(o_hi), {}).get("wait_ms"))

    def mean(xs: list[float]) -> float:
        xs = [x for x in xs if not math.isnan(x)]
        return sum(xs) / len(xs) if xs else math.nan

    for v in ("dtx", "dtxni", "stx", "blwait"):
        for o, tag in ((o_lo, "lo"), (o_hi, "hi")):
            ws = [M.broker_work(dirs[r["key"]]) for r in table
                  if r["variant"] == v and r["overlay"] == o and r["threads"] == 1 and r["instances"] == 1]
            out[f"{v}_msgs_{tag}"] = mean([w["served_per_tx"] for w in ws])
            out[f"{v}_work_{tag}"] = mean([w["service_ms_per_tx"] for w in ws])
            out[f"{v}_ms_per_msg_{tag}"] = mean([w["ms_per_msg"] for w in ws])
        a, b = out[f"{v}_work_lo"], out[f"{v}_work_hi"]
        out[f"{v}_work_ratio"] = b / a if a and not math.isnan(a) and not math.isnan(b) else math.nan
        by = lat.get(v, {})
        out[f"{v}_lat_ratio"] = mean([y / x for x, y in zip(by.get(lo, ()), by.get(hi, ())) if x])
    return out
