"""The mobility paper's claims as pure functions of per-run summaries: each can pass and fail."""

from __future__ import annotations

import math

import pytest

from testbed.protocols.mobility import experiments as P
from testbed.experiments.grid import figure_list
from testbed.protocols.mobility.experiments import MOVEMENTS, WORKLOADS, Rows


def _stats(lat: float, msgs: float = 24.0, commits: int = 100, std: float = 1.0) -> dict:
    return {"lat_mean_ms": lat, "msgs_per_move": msgs, "commits": commits, "lat_std_ms": std, "moves": commits,
            "msgs_total": msgs * commits}


def _run(movement: str, repeat: int, lat: dict[str, float], *, early: float, routes=(1.0, 1.0), std=None,
         msgs=None, commits=None, **x) -> dict:
    std = std or {}
    msgs = msgs or {}
    commits = commits or {}
    by_w = {w: _stats(lat[w], msgs.get(w, 24.0), commits.get(w, 100), std.get(w, 1.0)) for w in WORKLOADS}
    mean = sum(lat.values()) / len(lat)
    return {"movement": movement, "repeat": repeat, **_stats(mean + repeat * 0.1), "early": _stats(early),
            "by_workload": by_w, "by_route": {"1-13": _stats(mean * routes[0]), "2-14": _stats(mean * routes[1])},
            **x}


def paper_like() -> Rows:
    rows = []
    for r in range(3):
        rows.append(_run("reconfiguration", r, {w: 20.0 + r for w in WORKLOADS}, early=60.0 + r))
        rows.append(_run("covering", r, {"distinct": 300.0 + r, "chained": 400.0 + r, "tree": 900.0 + r,
                                         "covered": 3000.0 + 10 * r}, early=9000.0 + r, routes=(1.5, 0.6),
                         std={"chained": 1.0 + r, "covered": 500.0 + r},
                         msgs={"covered": 40.0 + r, "tree": 60.0 + r},
                         commits={"distinct": 100 + r, "tree": 60 + r, "covered": 40 + r}))
    return Rows(rows)


def _verdicts(claims) -> dict[str, str]:
    return {c.sentence: c.verdict for c in claims}


def test_fig8_and_9_claims_pass_on_the_papers_shape():
    v = _verdicts(P.claims_8(paper_like()) + P.claims_9(paper_like()))
    judged = {s: x for s, x in v.items() if x not in ("info", "by construction")}
    assert judged and set(judged.values()) == {"pass"}, v
    # reconfiguration's fixed messages per move decide this one: by construction, with the invariant
    c = next(c for c in P.claims_9(paper_like()) if c.sentence.startswith("reconfiguration: stable message"))
    assert c.verdict == "by construction" and "24 per move" in c.reason and c.measured.n == 3


def test_fig8_and_9_claims_fail_when_covering_is_as_fast():
    rows = []
    for r in range(3):
        lat = {w: 20.0 + r for w in WORKLOADS}
        rows.append(_run("reconfiguration", r, lat, early=20.0 + r))
        rows.append(_run("covering", r, lat, early=19.0 + r))
    v = _verdicts(P.claims_8(Rows(rows)) + P.claims_9(Rows(rows)))
    assert v["reconfiguration more than an order of magnitude faster than covering"] == "fail"
    assert v["early movements slower than steady state (joining load)"] == "fail"
    assert v["covering: latency rises with covering, worst for covered"] == "fail"
    assert v["reconfiguration: little variation in latency across workloads"] == "pass"  # flat either way


def test_a_difference_inside_the_seeds_spread_is_not_a_pass():
    rows = []
    for r, noise in enumerate((0.0, 400.0, -400.0)):
        lat = {w: 20.0 for w in WORKLOADS}
        rows.append(_run("reconfiguration", r, lat, early=20.0))
        rows.append(_run("covering", r, {**lat, "covered": 300.0 + noise, "distinct": 200.0}, early=20.0))
    c = next(c for c in P.claims_9(Rows(rows)) if c.sentence.startswith("covering: latency rises"))
    assert c.verdict == "fail"


def test_two_seeds_are_insufficient_for_a_comparison():
    rows = [r for r in paper_like().rows if r["repeat"] < 2]
    c = next(c for c in P.claims_8(Rows(rows)) if c.sentence.startswith("early movements"))
    assert c.verdict == "insufficient"


def test_no_runs_give_no_data_never_a_pass():
    for c in P.claims_8(Rows([])) + P.claims_9(Rows([])) + P.claims_11(Rows([])) + P.claims_14(Rows([]), Rows([])):
        assert c.verdict in ("no data", "info", "by construction"), c


def _xrows(x: str, xs, lat_of, msgs_of=lambda m, x: 24.0, total_of=None) -> Rows:
    rows = []
    for r in range(3):
        for m in MOVEMENTS:
            for v in xs:
                s = _stats(lat_of(m, v) + r, msgs_of(m, v))
                if total_of:
                    s["msgs_total"] = total_of(m, v)
                rows.append({"movement": m, "repeat": r, x: v, **s})
    return Rows(rows, x)


def test_fig10_paradox_and_flatness():
    cl = _xrows("clients", [40, 100], lambda m, n: 20.0 if m == "reconfiguration" else n * 10.0,
                total_of=lambda m, n: 5000.0 if m == "reconfiguration" else 3000.0)
    v = _verdicts(P.claims_10(cl))
    assert v.pop("reconfiguration messages per movement stable with more clients") == "by construction"
    assert set(v.values()) == {"pass"}, v
    cl = _xrows("clients", [40, 100], lambda m, n: n * 1.0, total_of=lambda m, n: 100.0)
    v = _verdicts(P.claims_10(cl))
    assert v["reconfiguration latency stable with more clients"] == "fail"
    assert v["reconfiguration faster despite more total messages (the 'paradox')"] == "fail"


def test_fig12_slopes():
    lat = {1: 100.0, 2: 300.0, 3: 400.0, 4: 350.0, 5: 300.0}
    msg = {1: 80.0, 2: 80.0, 3: 70.0, 4: 60.0, 5: 50.0}
    inc = _xrows("step", P.STEPS, lambda m, k: 20.0 if m == "reconfiguration" else lat[k],
                 lambda m, k: 24.0 if m == "reconfiguration" else msg[k])
    assert set(_verdicts(P.claims_12(inc)).values()) == {"pass"}
    inc = _xrows("step", P.STEPS, lambda m, k: 20.0 if m == "reconfiguration" else 100.0 * k)
    v = _verdicts(P.claims_12(inc))
    assert v["covering: moving leaves (step 4) and distinct (step 5) reduce the average latency"] == "fail"


def test_fig13_flat_over_sizes():
    flat = {c.sentence: c.verdict for c in P.claims_13(_xrows("brokers", [14, 32], lambda m, b: 20.0))}
    # reconfiguration's messages per move are fixed by the protocol (24): by construction, never judged
    assert flat.pop("topology size affects reconfiguration messages per movement not drastically") == "by construction"
    assert set(flat.values()) == {"pass"}
    grows = {c.sentence: c.verdict for c in P.claims_13(_xrows("brokers", [14, 32], lambda m, b: b * 1.0,
                                                              lambda m, b: b * 3.0))}
    for m in MOVEMENTS:
        assert grows[f"topology size affects {m} mean latency not drastically"] == "fail"
    assert grows["topology size affects covering messages per movement not drastically"] == "fail"


def test_fig14_wide_area_slower_is_by_construction_and_its_ab_panels_go_through_the_report(tmp_path):
    import inspect

    wide = _xrows("clients", [None], lambda m, x: 500.0 if m == "covering" else 300.0)
    local = _xrows("clients", [None], lambda m, x: 50.0 if m == "covering" else 20.0)
    cl = {c.sentence: c for c in P.claims_14(Rows(wide.rows), Rows(local.rows))}
    both = cl["both take longer than in the local environment"]
    assert both.verdict == "by construction" and "50 +- 10 ms" in both.reason
    assert cl["wide-area movement latency (reconfiguration, mean ms)"].unit == "ms"
    src = inspect.getsource(P.analyze)
    assert 'fig_dir / "fig14ab.png"' not in src and 'ctx.figure_path(14, "ab")' in src


def test_warmup_is_the_first_move_window_at_quick_scale_and_30s_at_paper_scale():
    plan = {"params": {"settle": 2.0, "mobile": {"a": {"pause": 4.0, "first_move": None}, "b": {"pause": 3.0}}}}
    assert P.warmup_s(plan, "quick") == 4.0 and P.warmup_s(plan, "paper") == 30.0


def test_paper_is_registered_with_every_figure():
    from testbed.experiments import papers

    paper = papers()["mobility"]
    assert figure_list(paper, None) == [8, 9, 10, 11, 12, 13, 14]
    assert {g.name for g in paper.grids_for([8])} == {"mix", "check-reconfiguration", "check-covering"}
    for g in paper.grids:
        for scale in ("quick", "paper"):
            assert g.points[scale] and g.repeats_at("quick") >= (1 if g.name.startswith("check") else 3)


@pytest.mark.parametrize("scale", ["quick", "paper"])
def test_every_grid_point_plans(scale):
    from testbed.experiments import topologies
    from testbed.topology.loader import plans

    paper = P.PAPER
    for g in paper.grids:
        path = topologies.find("mobility", g.topology_name(scale))
        for pt in g.points[scale]:
            ps = plans(str(path), {**g.set, **pt, **({"scale": scale} if g.pass_scale else {})}, None)
            assert len(ps) == 1 and ps[0].params["movement"] == pt["movement"]
            if "clients" in pt:
                assert sum(x["count"] for x in ps[0].params["mobile"].values()) == pt["clients"]
            if "brokers" in pt:
                assert sum(1 for n in ps[0].nodes.values() if n.kind == "node") == pt["brokers"]
    assert not math.isnan(P.warmup_s({"params": {"mobile": {}}}, scale))


# ------------------------------------------------------------------------------ explanations (rule 7)
def _measured(rows: Rows) -> Rows:
    """The numbers a run records beside its moves: moving clients, path length, the plan's settle and pause."""
    out = []
    for r in rows.rows:
        cov = r["movement"] == "covering"
        cong = {"busy_mean_max": 0.7 if cov else 0.45, "queue_max": 49.0 if cov else 9.0,
                "wait_ms_mean": 20.0 if cov else 3.0, "cpu_max": 0.05, "recv_per_s_max": 130.0}
        r = dict(r, movers=10, path_len=6.0, settle_s=2.0, pause_s=3.0, join_s=4.0, service_ms=5.0,
                 group_size={w: 10 for w in WORKLOADS}, cong=cong, cong_late=cong,
                 cong_early=dict(cong, busy_mean_max=0.3))
        if "by_workload" in r:
            r["by_workload"] = {w: dict(v, msgs_max=404 if w == "covered" else 24) for w, v in r["by_workload"].items()}
        out.append(r)
    return Rows(out, rows.x)


LOAD = {"load_1m_max": 11.5, "load_1m_mean": 7.0, "cpus": 2, "load_runs": 24}


def test_every_explanation_is_measured_and_attached_to_a_claim_the_module_makes():
    from testbed.experiments.grid import Explanation

    fast = Rows([dict(r, movement=r["movement"]) for r in paper_like().rows])
    ids = {c.id for c in P.claims_8(fast) + P.claims_9(fast) + P.claims_11(fast) + P.claims_14(fast, fast)}
    ids |= {c.id for c in P.claims_10(_xrows("clients", [40, 100], lambda m, n: 20.0))}
    ids |= {c.id for c in P.claims_12(_xrows("step", P.STEPS, lambda m, k: 20.0))}
    ids |= {c.id for c in P.claims_13(_xrows("brokers", [14, 32], lambda m, b: 20.0))}
    assert P.EXPLAINED and all(isinstance(e, Explanation) and e.cites for e in P.EXPLAINED.values())
    assert set(P.EXPLAINED) <= ids, sorted(set(P.EXPLAINED) - ids)  # no static strings, no prefix keys


def test_explanations_render_with_the_reproductions_numbers():
    from testbed.experiments.runner import _explained

    rows = []
    for r in range(3):  # covering as fast as reconfiguration: Figs 8-9's claims fail
        lat = {w: 20.0 + r for w in WORKLOADS}
        rows.append(_run("reconfiguration", r, lat, early=20.0 + r))
        rows.append(_run("covering", r, lat, early=19.0 + r, msgs={"covered": 80.0}))
    mix = _measured(Rows(rows))
    ev = {**P.evidence(mix), **LOAD}
    assert ev["movers_max"] == 10 and ev["settle_s"] == 2.0 and ev["covered_msgs_max"] == 404
    failed = [c for c in P.claims_8(mix) + P.claims_9(mix) if c.verdict == "fail" and c.id in P.EXPLAINED]
    assert len(failed) >= 4
    for c in failed:
        d = _explained(P.PAPER, c, {c.figure: ev})
        assert d["explanation"] and "{" not in d["explanation"] and not d.get("not_measured"), (c.id, d)
    order = next(c for c in failed if c.sentence.startswith("reconfiguration more than an order"))
    text = _explained(P.PAPER, order, {8: ev})["explanation"]
    assert text.startswith("covering / reconfiguration was 1.00") and "at most 11.5 on 2 cores" in text
    early = next(c for c in failed if c.sentence.startswith("early movements"))
    t8 = _explained(P.PAPER, early, {8: ev})["explanation"]
    assert "joined over the first 4 s after t0" in t8 and "busy 30% / 30% (reconfiguration / covering) then" in t8
    assert "busy 70% of the time under covering against 45%, its longest queue 49 messages against 9" in text
    # Fig 14's wide area against Fig 8's local runs: what the links added, per protocol
    wide = _measured(_xrows("clients", [None], lambda m, x: 1400.0 if m == "reconfiguration" else 1100.0))
    local = _measured(_xrows("clients", [None], lambda m, x: 20.0))
    f14 = next(c for c in P.claims_14(wide, local) if c.sentence.startswith("wide area: reconfiguration performs"))
    assert f14.verdict == "fail"
    t14 = _explained(P.PAPER, f14, {14: {**P.evidence(wide, local), **LOAD}})["explanation"]
    assert "added 1380 ms to reconfiguration's moves (6.0-link paths) and 1080 ms to covering's" in t14


def test_a_cause_not_measured_shows_not_explained():
    from testbed.experiments.runner import _explained

    rows = []
    for r in range(3):
        lat = {w: 20.0 + r for w in WORKLOADS}
        rows.append(_run("reconfiguration", r, lat, early=20.0 + r))
        rows.append(_run("covering", r, lat, early=19.0 + r))
    mix = Rows(rows)  # no settle recorded, no load average in the manifests
    order, early = (next(c for c in P.claims_8(mix) if c.sentence.startswith(s))
                    for s in ("reconfiguration more than", "early movements"))
    assert order.verdict == early.verdict == "fail"
    d = _explained(P.PAPER, order, {8: P.evidence(_measured(mix))})  # the runs' load was not recorded
    assert d["explanation"] is None and {"load_1m_max", "cpus"} <= set(d["not_measured"])  # the cited causes (and the sentence's other numbers)
    d = _explained(P.PAPER, order, {8: {**P.evidence(mix), **LOAD}})  # no queue measured (no service time)
    assert d["explanation"] is None and {"service_ms", "cov_busy", "reconf_queue_max"} <= set(d["not_measured"])
    d = _explained(P.PAPER, early, {8: {**P.evidence(mix), **LOAD}})  # no join window, no queue in the rows
    assert d["explanation"] is None and {"join_s", "cov_early_busy"} <= set(d["not_measured"])
    assert _explained(P.PAPER, order, {})["explanation"] is None  # nothing measured at all


def test_a_runs_summary_records_the_costliest_move_its_movers_and_path_length():
    import pandas as pd

    from testbed.protocols.mobility.analysis.measure import summary

    df = pd.DataFrame({"client": ["a", "a", "b", "c"], "outcome": ["commit"] * 4, "begin": [1.0, 5.0, 6.0, 7.0],
                       "dur_ms": [10.0, 20.0, 30.0, 40.0], "msgs": [24, 24, 404, 24], "path_len": [6, 6, 6, 4]})
    s = summary(df, 3.0)  # the move begun at 1 s is a warm-up move
    assert (s["moves"], s["movers"], s["msgs_max"], s["path_len"]) == (3, 3, 404, pytest.approx(16 / 3))
    assert s["early"]["movers"] == 1 and s["early"]["msgs_max"] == 24
    empty = summary(df.iloc[:0], 3.0)
    assert empty["movers"] == 0 and empty["msgs_max"] is None and math.isnan(empty["path_len"])


def test_the_warm_up_is_the_join_window_when_clients_join_during_the_run():
    def plan(join):
        g = {"count": 10, "pause": 3.0, "first_move": 3.0}
        return {"params": {"mobile": {"a": dict(g, join=join), "b": g}}}

    assert P.warmup_s(plan(4.0), "quick") == 4.0  # the moves begun while clients join: Fig 8's "early"
    assert P.warmup_s(plan(0.0), "quick") == 3.0  # pre-joined clients: the first-move window, as before
    assert P.warmup_s(plan(0.0), "paper") == 30.0 and P.warmup_s(plan(45.0), "paper") == 45.0
    assert P.join_s(plan(4.0)) == 4.0 and P.join_s({}) == 0.0


# ------------------------------------------------------------------------------ Fig 9: one run per workload
def _workload_runs(lat: dict[str, dict[str, float]], msgs: dict[str, float] | None = None,
                   commits: dict[str, dict[str, int]] | None = None, seeds: int = 3) -> Rows:
    """The workload grid's rows: one run per (movement, workload, seed), each run's counted moves all
    of its workload (its ``by_workload`` has that one key, as ``measure.summary`` gives)."""
    rows = []
    for r in range(seeds):
        for m in MOVEMENTS:
            for w in WORKLOADS:
                s = _stats(lat[m][w] + r, (msgs or {}).get(w, 24.0) if m == "covering" else 24.0,
                           ((commits or {}).get(m) or {}).get(w, 100))
                rows.append({"movement": m, "repeat": r, "workload": w, "run": f"/runs/{m}-{w}-{r}", **s,
                             "by_workload": {w: dict(s)}, "group_size": {w: 40}})
    return Rows(rows, "workload")


PAPER_9 = {"reconfiguration": {w: 20.0 for w in WORKLOADS},
           "covering": {"distinct": 300.0, "chained": 400.0, "tree": 900.0, "covered": 3000.0}}


def test_fig9_reads_each_workload_from_its_own_run():
    wl = _workload_runs(PAPER_9, msgs={"covered": 40.0, "tree": 60.0},
                        commits={"covering": {"distinct": 100, "tree": 60, "covered": 40}})
    merged = P.per_workload(wl)
    assert len(merged.rows) == 6 and merged.seeds == [0, 1, 2]  # (movement, seed), the workloads merged
    row = merged.by[("covering", None, 1)]
    assert set(row["by_workload"]) == set(WORKLOADS) and row["by_workload"]["covered"]["lat_mean_ms"] == 3001.0
    assert row["by_workload"]["tree"]["lat_mean_ms"] == 901.0  # each workload's numbers from its own run
    v = _verdicts(P.claims_9(merged))
    judged = {s: x for s, x in v.items() if x not in ("info", "by construction")}
    assert judged and set(judged.values()) == {"pass"}, v
    ev = P.evidence_9(wl, merged)
    assert ev["covered_group"] == 40 and ev["cov_by_workload"].startswith("distinct 301, chained 401")
    assert ev["reconf_ms"] == pytest.approx(21.0) and ev["commit_ratio_by_workload"].startswith("distinct 1.00")


def test_fig9_from_per_workload_runs_fails_when_covering_is_flat_over_the_workloads():
    flat = {m: {w: 20.0 for w in WORKLOADS} for m in MOVEMENTS}
    v = _verdicts(P.claims_9(P.per_workload(_workload_runs(flat))))
    assert v["covering: latency rises with covering, worst for covered"] == "fail"
    assert v["covering almost two orders of magnitude worse in the worst case"] == "fail"
    assert v["covering performs fewer movements with the tree and covered workloads"] == "fail"


def test_fig9_with_a_workload_missing_has_no_pass_for_its_comparisons():
    wl = _workload_runs(PAPER_9)
    only = Rows([r for r in wl.rows if r["workload"] != "covered"], "workload")
    v = _verdicts(P.claims_9(P.per_workload(only)))
    assert v["covering: latency rises with covering, worst for covered"] != "pass"
    assert v["covering: covered has fewer messages per movement than tree but a longer latency"] != "pass"


def test_fig9_is_drawn_from_the_workload_grid_and_fig8_from_the_mixed_runs():
    paper = P.PAPER
    assert paper.figure(9).grids == ("workload",) and paper.figure(8).grids == ("mix",)
    g = paper.grid("workload")
    assert g.topology == "fig09-{scale}.yaml" and g.repeats_at("quick") == g.repeats_at("paper") == 3
    assert sorted((p["movement"], p["workload"]) for p in g.points["paper"]) == sorted(
        (m, w) for m in MOVEMENTS for w in WORKLOADS)
