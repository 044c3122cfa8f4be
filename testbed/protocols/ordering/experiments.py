"""Baldoni et al., notification ordering: Figs 7-14 (EXPERIMENTS.md section A) as grids and claims.

* Figs 7-8 (timestamp size vs total subscribed topics) are a pure function of the subscriptions:
  for every point of ``fig07-<scale>.yaml`` the subscriptions are re-drawn exactly as the client
  hosts draw them and the sequencing groups computed with the topic managers' rule (computed grid).
* Figs 9-12 run ``fig09-<scale>.yaml`` (shape x rate), Figs 13-14 ``fig13-<scale>.yaml``
  (shape x topics per client); one Spark job reads every run (``protocols/ordering/analysis/runs.py``).
* The history checks run on two runs of ``smoke.yaml`` (reliable and unreliable ENS).

Every point is run ``repeats`` times (different node seeds); comparisons are judged over the seeds.

What each judged claim tests (docs/ordering.md, "Claims", lists kind, band and reason):

* Fig 7 "about 46 / 17" and "grows toward the maximum": the sequencing-group rule of the topic
  managers (the overlap of the subscriptions each shape's popularity law draws) -- computed at
  the paper's 10,000 clients at every scale (``fig07-paper.yaml``: a pure computation);
  "0.901 always below 0.349": the same rule, across shapes.
* Fig 9: the timestamp path (servers' sequencing chains over the configured WAN hops) and its
  queueing; "< 300 ms" below the knee (rates the system keeps up with).
* Fig 10: the servers' capacity (the knee) and how it depends on the shape's chains.
* Figs 11-12: which topic managers forward timestamps (the precedence order of the groups);
  "server 1 forwards nothing" is by construction (tm1 holds the highest-precedence topics).
* Figs 13-14: how the timestamp size (k) loads the servers, judged only at points both shapes
  keep up with (else ``insufficient: saturated``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from testbed.experiments import claims as C
from testbed.experiments.claims import Difference, Tolerance
from testbed.experiments.grid import Explanation, Figure, Grid, Paper, Reference

SHAPES = (0.901, 0.349)
LABEL = {0.901: "0.901 (geographic)", 0.349: "0.349 (spray-and-diffuse)"}
BW_RATE = {"quick": 1000, "paper": 5000}  # the rate point Figs 11-12 are drawn at
# the rate of the pipeline grid (deviation 9 on and off): each scale's lowest sweep rate, where both
# shapes keep up, so the difference is the chains' route, not queueing
PIPELINE_RATE = {"quick": 250, "paper": 1000}
# The cores a check run keeps busy (the smoke topology: 0.12-0.13 measured from its nodes' cpu
# events in the reproduction of 2026-11-27 13:40, main 305d2aa), plus the controller's share.
CHECK_CPU = 0.2
CHECK_SET = {"reliable": {"ens": "reliable", "duration": "6s"},
             "unreliable": {"ens": "unreliable", "duration": "6s", "loss": "3%", "retry": "500ms",
                            "ttl": "5ms", "jitter": "15ms", "reorder": "true"}}

# Every tolerance of this paper, with its reason (one place).
TOL = {
    "fig7_max": Tolerance("'toward the maximum': the largest sweep point reaches 80% of the topics "
                          "(as a fraction of the topic count)", low=0.8),
    "fig10_knee": Tolerance("the knee: the system keeps up with an offered rate while its throughput is at least "
                            "0.9x that rate (issue #12: sweep until throughput < 0.9x offered); the knee is the "
                            "last rate kept up with before the first that is not", low=0.9),
    "fig11_negligible": Tolerance("'negligible': under 1% of the server's timestamp bytes", high=1.0),
    "fig11_order": Tolerance("'non-decreasing with the server index' up to the 'negligible' level: a server may "
                             "forward less than the one before it by under 1 point (the same 1% as 'negligible')",
                             high=1.0),
    "fig13_flat": Tolerance("'does not affect': the relative change over the subscription sweep under 25%",
                            high=0.25),
    "fig7_size": Tolerance("'about 46' / 'about 17' are read off the paper's curve at 10 topics/subscriber (its "
                           "popularity law is given only by its concentration): within 20% of the paper's value, "
                           "computed at the paper's 10,000 clients", rel=0.2),
    "fig9_300ms": Tolerance("'less than 300 ms ... up to 10000 events/sec' with 0.901: the latency below the knee is "
                            "the configured WAN hops the sequencing chains cross plus the servers' service time; "
                            "judged on each seed's highest mean latency among the rates it keeps up with",
                            high=300.0),
}
# The fig 7 grid is computed at the paper's setup (10,000 clients) at every scale: it takes seconds
FIG7_TOPOLOGY = "fig07-paper.yaml"
FIG8_NOTE = "Fig 8's text says only 'reported alongside Fig 7': a figure, no claim (rule 3: no bookkeeping claims)"
# The smallest k the Fig 7 comparison is judged at, and why (Sec 5.3).
FIG7_K_MIN = (10, "the paper's Fig 7 starts at 10 topics per subscriber ('The leftmost point of both curves "
                  "represents the case where each of the 10000 available clients ... subscribe 10 topics'); below "
                  "it the paper only says both sizes 'would both decrease to 0': plotted and reported, not judged")
# Which average Fig 7 is judged on, and why (Sec 5.3).
FIG7_AVERAGE = ("size_mean", "over topics: the paper's sizes 'would both decrease to 0 by further reducing the "
                "amount of subscribed topics to 1 for subscriber as there would be no intersections among "
                "subscriptions', and 0.901 is smaller 'as less popular topics are rarely subscribed by more than one "
                "subscriber': both read the mean over the topics' sequencing groups, not over publications (which "
                "would hardly move with the unpopular topics)")
ABSOLUTE_FIG7 = ("the absolute size depends on the number of subscribers (the quick scale's 1000 clients against "
                 "the paper's 10,000) and on the popularity law's form, which the paper gives only by its "
                 "concentration (0.5% / 40% of the topics get 80% of the picks): reported, not judged")
HARDWARE = ("an absolute latency/throughput set by the paper's servers (here: Python processes on a 2-core "
            "machine shared with other jobs); reported, not judged")


def _tssize_row(plan: Any, ctx: Any = None) -> dict[str, Any]:
    from testbed.protocols.ordering.analysis.tssize import size_stats

    return {"shape": plan.point["shape"], "k": plan.point["k"], **size_stats(plan)}


def _seeds(rows: list[dict[str, Any]], x: str, y: str) -> dict[float, dict[Any, list[float]]]:
    """shape -> x -> the seeds' values of y."""
    out: dict[float, dict[Any, list[float]]] = {s: defaultdict(list) for s in SHAPES}
    for r in sorted(rows, key=lambda r: r.get("repeat", 0)):
        if r.get(y) is not None and r["shape"] in out:
            out[r["shape"]][r[x]].append(float(r[y]))
    return {s: dict(v) for s, v in out.items()}


def _per_seed(rows: list[dict[str, Any]], x: str, y: str) -> dict[float, dict[int, dict[Any, float]]]:
    """shape -> repeat -> x -> y."""
    out: dict[float, dict[int, dict[Any, float]]] = {s: defaultdict(dict) for s in SHAPES}
    for r in rows:
        if r.get(y) is not None and r["shape"] in out:
            out[r["shape"]][r.get("repeat", 0)][r[x]] = float(r[y])
    return out


def _refs(ctx, n: int) -> list[tuple[float | None, float, str]]:
    return [(r.x, r.y, r.label(), r.series) for r in ctx.references(n)]


# ------------------------------------------------------------------------------ claims (pure)
def claims_fig7(rows: list[dict[str, Any]], topics: int, numbers: dict[str, Any] | None = None) -> list[C.Claim]:
    """Fig 7's claims; what is not a sentence of the paper (the sizes below 10 topics/subscriber,
    the publication-weighted average) goes to ``numbers`` (the report's numbers), not the claims."""
    numbers = {} if numbers is None else numbers
    judged_col, why = FIG7_AVERAGE
    s = _seeds(rows, "k", judged_col)
    pub = _seeds(rows, "k", "size_mean_pub")
    out = []
    for shape, paper in ((0.349, 46), (0.901, 17)):
        out.append(C.value(7, f"at 10 topics/subscriber: about {paper} (shape {shape})",
                           s[shape].get(10, []), paper, TOL["fig7_size"],
                           publication_weighted=C.mean(pub[shape].get(10, []))))
    per = _per_seed(rows, "k", judged_col)
    for shape in SHAPES:
        holds, last = [], []
        for _, pts in sorted(per[shape].items()):
            ys = [pts[k] for k in sorted(pts)]
            holds.append(bool(ys) and len(ys) > 1 and all(b >= a - 1e-9 for a, b in zip(ys, ys[1:]))
                         and ys[-1] > ys[0] and TOL["fig7_max"].accepts(ys[-1] / topics, None))
            last.append(ys[-1] / topics if ys else None)
        out.append(C.shape(7, f"grows toward the maximum ({topics}) as subscriptions grow (shape {shape})",
                           holds, judged="the whole curve: non-decreasing in k at every point, rising overall, "
                                         "the largest k at >= 80% of the topics",
                           samples=last, tol=TOL["fig7_max"]))

    def below(col: dict[float, dict[Any, list[float]]]) -> list[Difference]:
        diffs = []
        for k in sorted(set(col[0.901]) & set(col[0.349])):
            if k < FIG7_K_MIN[0]:
                continue
            a, b = col[0.901][k], col[0.349][k]
            ma, mb = C.mean(a), C.mean(b)
            extreme = (ma == mb == 1.0) or (ma >= 0.99 * topics and mb >= 0.99 * topics)
            diffs.append(Difference(f"k={k}", tuple(a), tuple(b), "<", exempt=extreme))
        return diffs

    small = {k: (tuple(s[0.901][k]), tuple(s[0.349][k])) for k in sorted(set(s[0.901]) & set(s[0.349]))
             if k < FIG7_K_MIN[0]}
    if small:
        numbers["below_k_min"] = {"why": FIG7_K_MIN[1], "what": "0.901 - 0.349 mean size per k",
                                  "by": {f"k={k}": Difference(f"k={k}", a, b, "<").to_dict()
                                         for k, (a, b) in small.items()}}
    out.append(C.comparison(7, "0.901 always below 0.349", below(s),
                            what="mean timestamp size averaged " + why.split(":")[0] + " (the average the "
                                 "paper's text supports, see FIG7_AVERAGE), at every k of the paper's range "
                                 "(FIG7_K_MIN; equal only where both are at an extreme: size 1 or saturated)"))
    # The other averaging, reported with its per-k verdicts but not judged (it is not the paper's).
    other = below(pub)
    if other:
        worst = C.comparison(7, "0.901 always below 0.349", other, what="")
        numbers["publication_average"] = {"why": why, "what": "0.901 always below 0.349, averaged over "
                                          "publications instead (not the paper's average: reported only)",
                                          "verdict_if_judged": worst.verdict,
                                          "by": {d.label: d.to_dict() for d in other}}
    return out


def claims_fig8(rows: list[dict[str, Any]]) -> list[C.Claim]:
    """None: the paper says only that Fig 8 is 'reported alongside Fig 7' (``FIG8_NOTE``)."""
    return []


def claims_rate(rows: list[dict[str, Any]], figs: list[int]) -> list[C.Claim]:
    out = []
    lat = _seeds(rows, "rate", "latency_mean_ms")
    thr_seed = _per_seed(rows, "rate", "throughput_per_s")
    if 9 in figs:
        common = sorted(set(lat[0.901]) & set(lat[0.349]))
        out.append(C.comparison(9, "0.901 lower than 0.349 (mean latency, at every rate)",
                                [Difference(f"rate={r}", tuple(lat[0.901][r]), tuple(lat[0.349][r]), "<")
                                 for r in common], what="mean latency at every rate of the sweep"))
        lat_seed = _per_seed(rows, "rate", "latency_mean_ms")[0.901]
        below_knee, knees = [], {}
        for rep, pts in sorted(lat_seed.items()):
            k = knee(thr_seed[0.901].get(rep, {}))
            kept = [r for r in pts if k is not None and (k["saturated"] is None or r < k["saturated"])]
            knees[rep] = None if k is None else k["saturated"]
            below_knee.append(max(pts[r] for r in kept) if kept else None)
        out.append(C.value(9, "latency < 300 ms with 0.901 up to 10000 events/s", below_knee, None,
                           TOL["fig9_300ms"], what="per seed, the highest mean latency of 0.901 among the rates "
                           "below its first saturated rate", first_saturated_rate=knees))
    if 10 in figs:
        same, knee901, knee349 = [], [], []
        for r in sorted(set(thr_seed[0.901]) & set(thr_seed[0.349])):
            ka, kb = knee(thr_seed[0.901][r]), knee(thr_seed[0.349][r])
            same.append(None if ka is None or kb is None else (ka["knee"] is not None
                                                               and ka["knee"] == kb["knee"]))
            knee901.append(ka)
            knee349.append(kb)
        out.append(C.shape(10, "peak at the same request rate for both shapes", same,
                           judged="the knee (the last offered rate with throughput >= 0.9x offered, before the "
                                  "first rate below 0.9x) is the same sweep point for both shapes; a sweep that "
                                  "never falls below 0.9x has no knee and fails",
                           samples=[k["knee"] for k in knee901 if k and k["knee"] is not None],
                           tol=TOL["fig10_knee"], knees={"0.901": knee901, "0.349": knee349}))
        out.append(C.information(10, "the peak is at 5000 requests/s",
                                 [k["knee"] for k in knee901 if k and k["knee"] is not None], 5000, HARDWARE,
                                 what="the 0.901 knee per seed"))
        p901 = [max(v.values()) for _, v in sorted(thr_seed[0.901].items()) if v]
        p349 = [max(v.values()) for _, v in sorted(thr_seed[0.349].items()) if v]
        out.append(C.comparison(10, "0.901 reaches the best peak throughput",
                                [Difference("peak", tuple(p901), tuple(p349), ">")],
                                what="peak throughput of the sweep, per seed"))
        out.append(C.information(10, "0.901 peaks above 4k timestamps/s", p901, "> 4000/s", HARDWARE))
    return out


def knee(pts: dict[Any, float]) -> dict[str, Any] | None:
    """One seed's throughput sweep (offered rate -> timestamps/s) -> its knee: ``saturated`` is the
    first offered rate whose throughput is below ``TOL['fig10_knee'].low`` x offered, ``knee`` the
    rate before it (None if even the first rate is saturated, or if no rate is: then the sweep
    did not reach the knee)."""
    if not pts:
        return None
    f = TOL["fig10_knee"].low
    rates = sorted(pts)
    prev = None
    for r in rates:
        if pts[r] < f * float(r):
            return {"knee": prev, "saturated": r}
        prev = r
    return {"knee": None, "saturated": None}


SERVER1 = ("structural invariant of the ordering: tm1 (server 1) is the topic manager of the highest-precedence "
           "sequencing groups, so a timestamp is never forwarded from it (every chain ends there); the predictor "
           "(`testbed predict`, the plan alone) gives 0% for tm1 on every seed")


def claims_bw(bw: dict[float, list[dict[str, float]]], figs: list[int],
              predicted_tm1: list[float] = ()) -> list[C.Claim]:
    """``bw``: shape -> one {server: outgoing %} per seed; ``predicted_tm1``: the predictor's tm1
    forwarding share per run (both shapes), shown beside the by-construction claim."""
    out = []
    s = [f"tm{i}" for i in range(1, 6)]
    b901, b349 = bw.get(0.901, []), bw.get(0.349, [])
    if 11 in figs:
        out.append(C.by_construction(11, "server 1 forwards nothing (both shapes: 'null for servers 1 and 2'; 0.349 "
                                         "'considerably higher ... except server 1')",
                                     [d.get("tm1", 0) for d in b901 + b349], decided_by=SERVER1,
                                     predicted=list(predicted_tm1)))
        out.append(C.shape(11, "servers 1 and 2 zero (0.901)",
                           [d.get("tm1", 0) == 0 and d.get("tm2", 0) == 0 for d in b901],
                           judged="no timestamp bytes forwarded by tm1 and tm2",
                           samples=[d.get("tm1", 0) + d.get("tm2", 0) for d in b901]))
        out.append(C.value(11, "server 3 negligible (0.901)", [d.get("tm3", 0) for d in b901], None,
                           TOL["fig11_negligible"]))
        drop = TOL["fig11_order"].high
        out.append(C.shape(11, "forwarding non-decreasing with the server index (0.901: 'TMs on servers 4 and 5 "
                               "are the TMs of topics with lower precedence')",
                           [all(d.get(b, 0) >= d.get(a, 0) - drop for a, b in zip(s, s[1:])) for d in b901],
                           judged="tm(i+1) >= tm(i) - 1 point for i = 1..4",
                           samples=[min(d.get(b, 0) - d.get(a, 0) for a, b in zip(s, s[1:])) for d in b901],
                           tol=TOL["fig11_order"]))
        out.append(C.comparison(11, "only servers 4 and 5 forward to other servers (0.901)",
                                [Difference("max(tm4, tm5) vs tm3", tuple(max(d.get("tm4", 0), d.get("tm5", 0))
                                                                          for d in b901),
                                            tuple(d.get("tm3", 0) for d in b901), ">")],
                                what="the larger of servers 4-5 against server 3, % outgoing"))
    if 12 in figs:
        out.append(C.comparison(12, "0.349 considerably higher on every server except server 1",
                                [Difference(x, tuple(d.get(x, 0) for d in b349), tuple(d.get(x, 0) for d in b901),
                                            ">") for x in s[1:]] if b349 and b901 else [],
                                what="% outgoing bandwidth, servers 2-5, 0.349 against 0.901 over the seeds: the "
                                     "difference must exceed the seeds' spread ('considerably', not merely > 0)"))
    return out


KEPT_UP_THROUGHPUT = (
    "the offered rate (fig13-<scale>.yaml, the same at every subscription point): Fig 14 is judged only at the "
    "points where both shapes keep up, i.e. throughput >= 0.9x the offered rate (and no more than the clients "
    "offer), so 0.901's throughput there varies by at most 1/0.9 - 1 = 11% whatever the protocol does, inside the 25% 'does not affect' band: the selection "
    "decides it (a saturated 0.349 point, where the paper's 'it does' shows, is reported as saturated)")


def keeps_up(row: dict[str, Any]) -> bool:
    """A run keeps up with its offered rate: throughput >= TOL['fig10_knee'].low x offered."""
    thr, off = row.get("throughput_per_s"), row.get("rate_offered") or row.get("rate")
    return thr is not None and off is not None and float(thr) >= TOL["fig10_knee"].low * float(off)


def _saturated(fig: int, sentence: str, what: str, detail: dict[str, Any]) -> C.Claim:
    return C.Claim(fig, sentence, "comparison" if "than" in what else "value", C.INSUFFICIENT,
                   C.Measured.of([], **detail), None, "-",
                   "insufficient: saturated -- fewer than 2 subscription points where both shapes keep up "
                   f"(throughput >= {TOL['fig10_knee'].low:g}x offered on every seed): {what} cannot be "
                   "judged where a shape's servers are saturated", what)


def claims_subs(rows: list[dict[str, Any]], figs: list[int]) -> list[C.Claim]:
    """Figs 13-14, judged only at the subscription points where both shapes keep up with the offered
    rate on every seed (a saturated point's latency and throughput measure the machine, not k)."""
    out = []
    by_point: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_point[r["total_subscribed"]].append(r)
    ok_points = sorted(n for n, rs in by_point.items()
                       if {r["shape"] for r in rs} >= set(SHAPES) and all(keeps_up(r) for r in rs))
    saturated = sorted(set(by_point) - set(ok_points))
    kept = [r for r in rows if r["total_subscribed"] in ok_points]
    for fig, y, what in ((13, "latency_mean_ms", "latency"), (14, "throughput_per_s", "throughput")):
        if fig not in figs:
            continue
        s_flat = f"the number of subscriptions does not affect 0.901 ({what})"
        s_does = f"under 0.349 it does ({what} changes more than under 0.901)"
        if len(ok_points) < 2:
            out.append(C.by_construction(fig, s_flat, [], decided_by=KEPT_UP_THROUGHPUT, saturated_points=saturated)
                       if fig == 14 else _saturated(fig, s_flat, "relative change of 0.901 over the sweep",
                                                    {"saturated_points": saturated}))
            out.append(_saturated(fig, s_does, "0.349's relative change than 0.901's",
                                  {"saturated_points": saturated}))
            continue
        per = _per_seed(kept, "total_subscribed", y)
        ch: dict[float, list[float]] = {}
        for shape in SHAPES:
            ch[shape] = []
            for _, pts in sorted(per[shape].items()):
                v = list(pts.values())
                if len(v) > 1:
                    ch[shape].append((max(v) - min(v)) / max(min(v), 1e-9))
        if fig == 14:  # throughput where both keep up is the offered rate within 10%: it cannot move 25%
            out.append(C.by_construction(fig, s_flat, ch[0.901], decided_by=KEPT_UP_THROUGHPUT,
                                         what="relative change (max - min) / min over the points both shapes "
                                              "keep up with", points=ok_points, saturated_points=saturated))
        else:
            out.append(C.value(fig, s_flat, ch[0.901], None, TOL["fig13_flat"],
                               what="relative change (max - min) / min over the points both shapes keep up with",
                               points=ok_points, saturated_points=saturated))
        out.append(C.comparison(fig, s_does, [Difference("relative change", tuple(ch[0.349]), tuple(ch[0.901]), ">")],
                                what="relative change over the subscription points both shapes keep up with, per "
                                     f"seed (points {ok_points}; saturated, not judged: {saturated})"))
    if 13 in figs:
        lat = _seeds(rows, "total_subscribed", "latency_mean_ms")
        out.append(C.comparison(13, "the publication and subscription models affect the performance (0.901 better "
                                    "at every k)",
                                [Difference(f"subscribed={n}", tuple(lat[0.901].get(n, ())), tuple(lat[0.349].get(n, ())),
                                            "<") for n in sorted(set(lat[0.901]) | set(lat[0.349]))],
                                what="mean latency, 0.901 below 0.349 at every subscription point (throughput at a "
                                     "point both keep up with is the offered rate for both: it cannot tell them "
                                     "apart, so latency is the measure)"))
    return out


# ------------------------------------------------------------------------------ analyze
def analyze(ctx) -> None:
    import csv

    from testbed.analysis.plots import bar_plot, series_plot

    def write_csv(name: str, rows: list[dict[str, Any]]) -> None:
        cols: list[str] = []
        for r in rows:
            cols += [c for c in r if c not in cols]
        with open(ctx.data_dir / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)

    def series(rows, x, y):
        s = _seeds(rows, x, y)
        return {LABEL[sh]: s[sh] for sh in SHAPES if s[sh]}

    scale = ctx.scale
    if ctx.wants(7, 8):
        rows7 = [{**e.row, "repeat": e.repeat} for e in ctx.entries("fig7") if e.row]
        topics = rows7[0]["topics"] if rows7 else 1000
        write_csv("fig7.csv", rows7)
        if ctx.wants(7):
            series_plot(ctx.figure_path(7), f"Fig 7: mean timestamp size ({scale})",
                        "topics per subscriber (total subscribed = clients x this)",
                        "mean timestamp size (entries)", series(rows7, "k", "size_mean"),
                        _refs(ctx, 7), logx=True)
            ctx.add(*claims_fig7(rows7, topics, ctx.numbers.setdefault("fig7", {})))
        if ctx.wants(8):
            series_plot(ctx.figure_path(8), f"Fig 8: std dev of the timestamp size ({scale})",
                        "topics per subscriber (total subscribed = clients x this)", "std dev of timestamp size",
                        series(rows7, "k", "size_std"), _refs(ctx, 8), logx=True)
            ctx.add(*claims_fig8(rows7))

    from testbed.protocols.ordering.analysis.runs import run_row, spark_checks, spark_metrics

    rate_dirs, subs_dirs = ctx.run_dirs("rate"), ctx.run_dirs("subs")
    pipe_dirs = ctx.run_dirs("pipeline") if ctx.wants(9) else {}
    check_dirs = {**ctx.run_dirs("check-reliable"), **ctx.run_dirs("check-unreliable")}
    dirs = {**rate_dirs, **subs_dirs, **pipe_dirs}
    summary, bw = spark_metrics(ctx.spark, dirs) if dirs else ({}, {})
    rate_rows = [run_row(d, summary.get(k, {})) for k, d in rate_dirs.items()]
    subs_rows = [run_row(d, summary.get(k, {})) for k, d in subs_dirs.items()]
    if ctx.wants(9, 10, 11, 12):
        write_csv("fig9-12.csv", rate_rows)
    if ctx.wants(9):
        series_plot(ctx.figure_path(9), f"Fig 9: mean end-to-end latency ({scale})", "event rate (requests/s)",
                    "mean latency (ms)", series(rate_rows, "rate", "latency_mean_ms"), _refs(ctx, 9))
    if ctx.wants(10):
        series_plot(ctx.figure_path(10), f"Fig 10: throughput ({scale})", "event rate (requests/s)",
                    "timestamps/s", series(rate_rows, "rate", "throughput_per_s"), _refs(ctx, 10))
    ctx.add(*claims_rate(rate_rows, ctx.figs))
    thr_seed = _per_seed(rate_rows, "rate", "throughput_per_s")
    if thr_seed[0.901] and thr_seed[0.349]:
        ctx.measure(10, **{f"knees_{str(sh)[2:]}": [(knee(v) or {}).get("knee") for _, v in sorted(thr_seed[sh].items())]
                           for sh in SHAPES})
    per_shape: dict[float, list[dict[str, float]]] = {}
    for shape, fig in ((0.901, 11), (0.349, 12)):
        keys = [k for k, d in rate_dirs.items() if (r := run_row(d, {}))["shape"] == shape
                and r["rate"] == BW_RATE[scale]]
        per_shape[shape] = [{srv: v["outgoing_pct"] for srv, v in bw.get(k, {}).items()} for k in sorted(keys)]
    if ctx.wants(11, 12):
        write_csv("fig11-12.csv", [{"shape": sh, "seed": i, **d} for sh, ds in per_shape.items()
                                   for i, d in enumerate(ds)])
    for shape, fig in ((0.901, 11), (0.349, 12)):
        if ctx.wants(fig) and per_shape.get(shape):
            groups = {f"shape {shape}": {srv: [d.get(srv, 0.0) for d in per_shape[shape]]
                                         for srv in sorted({s for d in per_shape[shape] for s in d})}}
            if fig == 12 and per_shape.get(0.901):
                groups = {"shape 0.901": {srv: [d.get(srv, 0.0) for d in per_shape[0.901]]
                                           for srv in groups[f"shape {shape}"]}, **groups}
            bar_plot(ctx.figure_path(fig), f"Fig {fig}: % outgoing bandwidth per server ({scale}, "
                     f"{BW_RATE[scale]} req/s)", "% outgoing bandwidth", groups, _refs(ctx, fig))
    pred = _predict_runs({k: d for k, d in rate_dirs.items()
                          if (r := run_row(d, {}))["rate"] == BW_RATE[scale]}) if ctx.wants(9, 11, 12) else {}
    ctx.add(*claims_bw(per_shape, ctx.figs, [p["forwarding_pct"].get("tm1", 0.0) for p in pred.values()]))
    _measure_bw(ctx, per_shape, pred, rate_dirs, summary)
    if ctx.wants(9, 11, 12):
        rows = predicted_rows(pred, {k: run_row(d, summary.get(k, {})) for k, d in rate_dirs.items()},
                              {k: {srv: v["outgoing_pct"] for srv, v in bw.get(k, {}).items()} for k in rate_dirs},
                              BW_RATE[scale], ctx.figs)
        if pipe_dirs:
            rows += _pipeline_evidence(ctx, rate_dirs, pipe_dirs, summary)
        if rows:
            ctx.numbers["predicted"] = rows
            write_csv("predicted.csv", [{"figure": r["figure"], "series": r["series"], "quantity": r["quantity"],
                                         "seed": i, "measured": m, "predicted": p}
                                        for r in rows for i, (m, p) in enumerate(zip(r["measured"], r["predicted"]))])
    if ctx.wants(13, 14):
        write_csv("fig13-14.csv", subs_rows)
    if ctx.wants(13):
        series_plot(ctx.figure_path(13), f"Fig 13: mean latency vs subscriptions ({scale})",
                    "total subscribed topics", "mean latency (ms)",
                    series(subs_rows, "total_subscribed", "latency_mean_ms"), _refs(ctx, 13))
    if ctx.wants(14):
        series_plot(ctx.figure_path(14), f"Fig 14: throughput vs subscriptions ({scale})",
                    "total subscribed topics", "timestamps/s",
                    series(subs_rows, "total_subscribed", "throughput_per_s"), _refs(ctx, 14))
    ctx.add(*claims_subs(subs_rows, ctx.figs))

    if check_dirs:
        for run, res in spark_checks(ctx.spark, check_dirs).items():
            for r in res:
                ctx.checks.append({"run": run, "run_dir": check_dirs[run], "check": r["property"],
                                   "passed": r["passed"], "violations": r["violations"],
                                   "notifications": r.get("notifications"), "expected": r.get("expected"),
                                   "examples": r.get("examples", [])[:3]})


def _measure_bw(ctx, per_shape, pred, rate_dirs, summary) -> None:
    """Evidence for the explanations of Figs 10-12: the predictor's and the runs' forwarding shares."""
    from testbed.protocols.ordering.analysis.runs import run_row

    rows = {k: run_row(d, summary.get(k, {})) for k, d in rate_dirs.items() if k in pred}
    p901 = [pred[k] for k in sorted(pred) if rows[k]["shape"] == 0.901]
    if p901:
        ctx.measure(11, pred_tm45=[round(max(p["forwarding_pct"].get("tm4", 0), p["forwarding_pct"].get("tm5", 0)), 1)
                                   for p in p901],
                    pred_tm3=[round(p["forwarding_pct"].get("tm3", 0), 1) for p in p901])
    for sh in SHAPES:
        ps = [pred[k] for k in sorted(pred) if rows[k]["shape"] == sh]
        if ps and all("chain_servers_mean" in p for p in ps):
            ctx.measure(10, **{f"chain_{str(sh)[2:]}": round(sum(p["chain_servers_mean"] for p in ps) / len(ps), 2)})
    b901 = per_shape.get(0.901) or []
    if b901:
        ctx.measure(11, meas_tm45=[round(max(d.get("tm4", 0), d.get("tm5", 0)), 1) for d in b901],
                    meas_tm3=[round(d.get("tm3", 0), 1) for d in b901])
        ctx.measure(12, meas_901=[{k: round(v, 1) for k, v in sorted(d.items())} for d in b901])


def _pipeline_evidence(ctx, rate_dirs, pipe_dirs, summary) -> list[dict[str, Any]]:
    """Deviation 9 measured beside Fig 9: the rate grid's runs at ``PIPELINE_RATE`` (the pipeline)
    against the pipeline grid's (the paper's routing), with the predictor's values for both."""
    from testbed.protocols.ordering.analysis.runs import run_row

    rate = PIPELINE_RATE[ctx.scale]
    with_dirs = {k: d for k, d in rate_dirs.items() if run_row(d, {})["rate"] == rate}
    rows_with = {k: run_row(d, summary.get(k, {})) for k, d in with_dirs.items()}
    rows_without = {k: run_row(d, summary.get(k, {})) for k, d in pipe_dirs.items()}
    return pipeline_rows(rows_with, rows_without, _predict_runs(with_dirs), _predict_runs(pipe_dirs), rate)


def pipeline_rows(rows_with: dict[str, dict[str, Any]], rows_without: dict[str, dict[str, Any]],
                  pred_with: dict[str, dict[str, Any]], pred_without: dict[str, dict[str, Any]],
                  rate: int) -> list[dict[str, Any]]:
    """Fig 9's measured-vs-predicted rows for deviation 9 (the pipeline): per shape, the mean
    latency with the paper's routing and what the pipeline adds (with - without), one value per
    seed (a seed is a repeat: both grids draw the same subscriptions for the same repeat).

    ``rows_*``: run key -> ``run_row`` (shape, repeat, latency_mean_ms); ``pred_*``: run key -> the
    predictor's result for that run's plan (``latency_mean_ms``: chain latency without queueing)."""
    def by_seed(rows, pred, shape):
        m = {r["repeat"]: r.get("latency_mean_ms") for r in rows.values() if r["shape"] == shape}
        p = {rows[k]["repeat"]: v["latency_mean_ms"] for k, v in pred.items()
             if k in rows and rows[k]["shape"] == shape}
        return m, p

    out: list[dict[str, Any]] = []
    for shape in SHAPES:
        mw, pw = by_seed(rows_with, pred_with, shape)
        mo, po = by_seed(rows_without, pred_without, shape)
        seeds = sorted(set(mo))
        if not seeds:
            continue
        out.append({"figure": 9, "series": f"shape {shape}",
                    "quantity": f"mean latency (ms) at {rate} req/s, the paper's routing (deviation 9 off)",
                    "measured": [mo.get(s) for s in seeds], "predicted": [po.get(s) for s in seeds]})
        both = [s for s in seeds if mw.get(s) is not None and mo.get(s) is not None]
        if both:
            out.append({"figure": 9, "series": f"shape {shape}",
                        "quantity": f"latency the pipeline adds (ms) at {rate} req/s (deviation 9: with - without)",
                        "measured": [mw[s] - mo[s] for s in both],
                        "predicted": [pw[s] - po[s] if pw.get(s) is not None and po.get(s) is not None else None
                                      for s in both]})
    return out


# ------------------------------------------------------------------------------ the predictor, beside the runs
def _predict_runs(dirs: dict[str, str]) -> dict[str, dict[str, Any]]:
    """run key -> ``testbed.protocols.ordering.analysis.predict.predict`` of its plan (``plan.json``)."""
    import json
    from pathlib import Path

    from testbed.protocols.ordering.analysis.predict import predict
    from testbed.topology.plan import Plan

    out = {}
    for k, d in dirs.items():
        out[k] = predict(Plan.from_dict(json.loads((Path(d) / "plan.json").read_text())))
    return out


def predicted_rows(pred: dict[str, dict[str, Any]], rows: dict[str, dict[str, Any]],
                   bw: dict[str, dict[str, float]], bw_rate: int, figs: list[int]) -> list[dict[str, Any]]:
    """Measured against predicted, per figure, series and quantity, one value per seed each.

    ``pred``: run key -> prediction (the runs at ``bw_rate``); ``rows``: run key -> ``run_row`` of
    every rate run; ``bw``: run key -> {server: measured outgoing %}. Fig 11-12: each server's
    forwarding share at ``bw_rate``; Fig 9: the mean timestamp latency at the sweep's lowest rate
    (the predictor has no queueing, so the least loaded point is the one to compare) and at
    ``bw_rate``. The prediction depends on the shape and the seed, not on the rate.
    """
    by_seed: dict[tuple[float, int], dict[str, Any]] = {}
    for k, p in pred.items():
        r = rows.get(k)
        if r:
            by_seed[(r["shape"], r["repeat"])] = p
    out: list[dict[str, Any]] = []
    for shape, fig in ((0.901, 11), (0.349, 12)):
        if fig not in figs:
            continue
        keys = sorted(k for k in pred if rows.get(k, {}).get("shape") == shape)
        servers = sorted({s for k in keys for s in pred[k]["forwarding_pct"]})
        for srv in servers:
            out.append({"figure": fig, "series": f"shape {shape}", "quantity": f"% outgoing, {srv}",
                        "measured": [bw.get(k, {}).get(srv, 0.0) for k in keys],
                        "predicted": [pred[k]["forwarding_pct"][srv] for k in keys]})
    if 9 in figs and by_seed:
        lowest = min(r["rate"] for r in rows.values())
        for shape in SHAPES:
            seeds = sorted(rep for sh, rep in by_seed if sh == shape)
            for rate in sorted({lowest, bw_rate}):
                meas = {r["repeat"]: r.get("latency_mean_ms") for r in rows.values()
                        if r["shape"] == shape and r["rate"] == rate}
                out.append({"figure": 9, "series": f"shape {shape}",
                            "quantity": f"mean latency (ms) at {rate} req/s",
                            "measured": [meas.get(s) for s in seeds],
                            "predicted": [by_seed[(shape, s)]["latency_mean_ms"] for s in seeds]})
    return out


_STATED = {
    7: "at 10 topics/subscriber: about 46 (shape 0.349) and about 17 (shape 0.901); grows toward the maximum "
       "as subscriptions approach 1000/subscriber; 0.901 always below 0.349",
    8: "reported alongside Fig 7",
    9: "0.901 lower than 0.349; latency < 300 ms with 0.901 up to 10000 events/s",
    10: "peak at 5000 requests/s for both; 0.901 peaks above 4k timestamps/s",
    11: "only servers 4 and 5 forward to other servers; server 3 negligible; servers 1 and 2 zero",
    12: "considerably higher on every server except server 1",
    13: "number of subscriptions does not affect 0.901; under 0.349 it does",
    14: "same as 13",
}

# Why a claim does not hold here, rendered with this reproduction's numbers (grid.Explanation):
# each cites what the same reproduction measured (the runs' load average from their manifests,
# what ``analyze`` records with ``ctx.measure``); an uncited cause shows as "not explained".
EXPLAINED = {
    C.claim_id(9, "0.901 lower than 0.349 (mean latency, at every rate)"): Explanation(
        "at {worst} the difference of the means (0.901 - 0.349: {mean:.0f} ms) is inside the seeds' spread "
        "({spread:.0f} ms); the machine's 1-minute load average reached {load_1m_max:.1f} on {cpus} cores during "
        "these {load_runs} runs (mean {load_1m_mean:.1f}): a seed whose processes saturated widens the spread",
        ("worst", "load_1m_max", "cpus")),
    C.claim_id(10, "peak at the same request rate for both shapes"): Explanation(
        "the knees measured per seed differ: 0.901 {knees_901}, 0.349 {knees_349} req/s (None: never fell below "
        "0.9x offered, or saturated at the first rate); the predictor's mean chain length {chain_901} (0.901) vs "
        "{chain_349} (0.349) servers per timestamp: 0.349's longer chains saturate its servers earlier",
        ("knees_901", "knees_349", "chain_901", "chain_349")),
    C.claim_id(11, "only servers 4 and 5 forward to other servers (0.901)"): Explanation(
        "the predictor (the plan alone) gives max(tm4, tm5) forwarding {pred_tm45} % per seed against tm3 "
        "{pred_tm3} %; measured {meas_tm45} % vs {meas_tm3} %: the pattern needs two clients of a site holding the "
        "same foreign topic of higher precedence, which only some seeds' subscriptions draw",
        ("pred_tm45", "meas_tm45", "pred_tm3", "meas_tm3")),
    C.claim_id(12, "0.349 considerably higher on every server except server 1"): Explanation(
        "at {worst} the difference (0.349 - 0.901: {mean:.1f} points) does not exceed the seeds' spread "
        "({spread:.1f}); the 0.901 shares per server per seed were {meas_901}",
        ("worst", "meas_901")),
    C.claim_id(13, "the number of subscriptions does not affect 0.901 (latency)"): Explanation(
        "0.901's latency changed by {mean:.2f} [{ci_low:.2f}, {ci_high:.2f}] (relative, n={n}) over the points both "
        "shapes keep up with; the machine's 1-minute load average reached {load_1m_max:.1f} on {cpus} cores "
        "during these {load_runs} runs (mean {load_1m_mean:.1f})",
        ("load_1m_max", "cpus")),
}

PAPER = Paper(
    name="ordering",
    title="Baldoni et al., notification ordering in topic-based publish/subscribe",
    notes="docs/ordering.md",
    explained=EXPLAINED,
    figures=(
        Figure(7, "mean timestamp size vs subscriptions (topics per subscriber)", ("fig7",), _STATED[7],
               (Reference(46, 10, LABEL[0.349], "about 46 at 10 topics/subscriber, shape 0.349"),
                Reference(17, 10, LABEL[0.901], "about 17 at 10 topics/subscriber, shape 0.901"))),
        Figure(8, "std dev of the timestamp size", ("fig7",), _STATED[8]),
        Figure(9, "mean end-to-end latency vs event rate", ("rate", "pipeline"), _STATED[9],
               (Reference(300, None, LABEL[0.901], "< 300 ms with 0.901 up to 10000 events/s"),)),
        Figure(10, "throughput vs event rate", ("rate",), _STATED[10],
               (Reference(4000, 5000, LABEL[0.901], "0.901 peaks above 4k timestamps/s at 5000 requests/s"),)),
        Figure(11, "% outgoing bandwidth per server, 0.901", ("rate",), _STATED[11]),
        Figure(12, "% outgoing bandwidth per server, 0.349", ("rate",), _STATED[12]),
        Figure(13, "mean latency vs number of subscriptions", ("subs",), _STATED[13]),
        Figure(14, "throughput vs number of subscriptions", ("subs",), _STATED[14]),
    ),
    grids=(
        Grid("fig7", FIG7_TOPOLOGY, compute=_tssize_row, pass_scale=False),
        Grid("rate", "fig09-{scale}.yaml"),
        Grid("subs", "fig13-{scale}.yaml"),
        # deviation 9 measured: the sweep's lowest rate (both shapes keep up) with the paper's routing
        Grid("pipeline", "fig09-{scale}.yaml", set={"pipeline": "false"},
             points={sc: [{"shape": sh, "rate": r} for sh in SHAPES] for sc, r in PIPELINE_RATE.items()}),
        Grid("check-reliable", "smoke.yaml", set=CHECK_SET["reliable"], repeats={"quick": 1, "paper": 1},
             pass_scale=False, alone=False, cpu={"quick": CHECK_CPU, "paper": CHECK_CPU}),
        Grid("check-unreliable", "smoke.yaml", set=CHECK_SET["unreliable"], repeats={"quick": 1, "paper": 1},
             pass_scale=False, alone=False, cpu={"quick": CHECK_CPU, "paper": CHECK_CPU}),
    ),
    check_grids=("check-reliable", "check-unreliable"),
    # Alone: Figs 9-10 are throughput sweeps to the knee (the offered rate the brokers keep up with)
    # and Fig 13 the delivery rate as subscribers grow: what the machine has to spare is the
    # measurement, so each figure run has the machine to itself. The two check runs (the history
    # checks only, no figure) share it (their grids say alone=False).
    alone=True,
    analyze=analyze,
)
