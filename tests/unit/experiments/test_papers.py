"""The papers' declarations (grids resolve, seeds) and their claims judged on good and broken data."""

import math

import pandas as pd
import pytest

from testbed.errors import UsageError
from testbed.experiments import claims as C
from testbed.experiments import gryphon as G
from testbed.experiments import ordering as O
from testbed.experiments import papers, topologies
from testbed.experiments.grid import SCALES, figure_list, matches, parse_points_filter
from testbed.experiments.runner import plan_work


def test_papers_are_discovered_and_every_grid_resolves():
    have = papers()
    assert {"ordering", "gryphon"} <= set(have)
    for p in have.values():
        names = {g.name for g in p.grids}
        for f in p.figures:
            assert set(f.grids) <= names, (p.name, f.number)
        for scale in SCALES:
            work = plan_work(p, scale, [f.number for f in p.figures], None)
            keys = [w.key for w, _, _ in work]
            assert len(keys) == len(set(keys))  # every (point, repeat) is its own entry
            assert {w.grid.name for w, _, _ in work} == {g.name for g in p.grids}, (p.name, scale)
            for g in p.grids:
                if g.name not in p.check_grids:
                    assert g.repeats_at(scale) >= C.MIN_SEEDS, (p.name, g.name)


def test_points_filter_and_figure_selection():
    p = papers()["ordering"]
    work = plan_work(p, "quick", [9], None, parse_points_filter("rate=500"))
    figs = {(w.grid.name, pt.get("rate")) for w, pt, _ in work}
    assert figs == {("rate", 500), ("check-reliable", None), ("check-unreliable", None)}
    assert sum(1 for w, _, _ in work if w.grid.name == "rate") == 2 * 3  # 2 shapes x 3 seeds
    assert matches({"rate": 500, "shape": 0.9}, {"rate": 500}) and not matches({"rate": 1}, {"rate": 500})
    with pytest.raises(UsageError, match="has figures"):
        figure_list(p, [99])
    with pytest.raises(UsageError, match="key=value"):
        parse_points_filter("rate")


def test_topology_search_path_error_names_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv(topologies.ENV, str(tmp_path))
    (tmp_path / "ordering").mkdir()
    (tmp_path / "ordering" / "mine.yaml").write_text("x")
    assert topologies.find("ordering", "mine.yaml") == tmp_path / "ordering" / "mine.yaml"
    assert topologies.find("ordering", "smoke.yaml").name == "smoke.yaml"  # the checkout's
    with pytest.raises(UsageError, match="TESTBED_TOPOLOGIES"):
        topologies.find("ordering", "nope.yaml")


# ------------------------------------------------------------------------------ ordering
def _rows7(sizes901, sizes349, seeds=3):
    ks = [1, 10, 100]
    rows = []
    for r in range(seeds):
        for s, sizes in ((0.901, sizes901), (0.349, sizes349)):
            rows += [{"shape": s, "k": k, "size_mean": v + (0.1 * r if v > 1 else 0), "size_std": 1.0, "repeat": r}
                     for k, v in zip(ks, sizes)]
    return rows


def test_ordering_fig7_claims_hold_and_fail_on_data():
    good = {c.sentence: c.verdict for c in O.claims_fig7(_rows7([1, 17, 950], [1, 46, 990]), 1000)}
    assert set(good.values()) == {C.PASS}, good
    bad = {c.sentence: c.verdict for c in O.claims_fig7(_rows7([1, 60, 400], [1, 20, 300]), 1000)}
    assert {v for k, v in bad.items() if not k.startswith("the size rises")} == {C.FAIL}, bad
    flat = O.claims_fig7(_rows7([1, 1, 1], [1, 46, 990]), 1000)
    assert [c.verdict for c in flat if c.sentence == "the size rises with the subscriptions (shape 0.901)"] == [C.FAIL]
    assert O.claims_fig7(_rows7([1, 17, 950], [1, 46, 990], seeds=2), 1000)[-1].verdict == C.INSUFFICIENT


def _rate_rows(lat901, lat349, thr=((990, 4500), (980, 3000)), seeds=3):
    rows = []
    for r in range(seeds):
        for s, lat, th in ((0.901, lat901, thr[0]), (0.349, lat349, thr[1])):
            for rate, la, t in zip((1000, 5000), lat, th):
                rows.append({"shape": s, "rate": rate, "latency_mean_ms": la + r, "throughput_per_s": t + r,
                             "repeat": r})
    return rows


def test_ordering_rate_claims_compare_over_seeds_and_report_hardware_numbers():
    cl = {c.sentence: c for c in O.claims_rate(_rate_rows((20, 40), (90, 120)), [9, 10])}
    assert cl["0.901 lower than 0.349 (mean latency, at every rate)"].verdict == C.PASS
    assert cl["latency < 300 ms with 0.901 up to 10000 events/s"].verdict == C.INFO
    assert cl["0.901 peaks above 4k timestamps/s"].verdict == C.INFO
    assert cl["peak at the same request rate for both shapes"].verdict == C.PASS
    assert cl["0.901 reaches the best peak throughput"].verdict == C.PASS
    worse = {c.sentence: c for c in O.claims_rate(_rate_rows((500, 40), (90, 120)), [9])}
    assert worse["0.901 lower than 0.349 (mean latency, at every rate)"].verdict == C.FAIL


def test_ordering_bandwidth_and_subscription_claims_can_fail():
    b901 = [{"tm1": 0, "tm2": 0, "tm3": 0.1, "tm4": 5 + i, "tm5": 8} for i in range(3)]
    b349 = [{"tm1": 0, "tm2": 20 + i, "tm3": 30, "tm4": 25, "tm5": 30} for i in range(3)]
    assert all(c.verdict == C.PASS for c in O.claims_bw({0.901: b901, 0.349: b349}, [11, 12]))
    assert not any(c.verdict == C.PASS for c in O.claims_bw({0.901: b349, 0.349: b901}, [11, 12]))
    rows = [{"shape": s, "total_subscribed": n, "latency_mean_ms": lat + r * 0.5, "throughput_per_s": 1000 + r,
             "repeat": r}
            for r in range(3) for s, n, lat in ((0.901, 500, 20), (0.901, 4000, 21), (0.349, 500, 90),
                                                 (0.349, 4000, 300))]
    res = {(c.figure, c.kind): c.verdict for c in O.claims_subs(rows, [13, 14])}
    assert res[(13, "value")] == C.PASS and res[(13, "comparison")] == C.PASS
    assert res[(14, "comparison")] == C.FAIL  # throughput flat for both: "affects 0.349 more" fails


# ------------------------------------------------------------------------------ gryphon
def _m6(**over):
    m = {"first_s1_nack_after_failure_s": 3.3, "fraction_s1_nacks_to_b2": 1.0, "s1_nacks": 20,
         "s1_max_latency_ms": 3300.0, "s1_baseline_median_ms": 10.0, "s1_last_3s_median_ms": 12.0,
         "s2_max_latency_ms": 300.0, "s3_s5_max_latency_ms": 310.0, "s2_nacks": 0}
    return {**m, **over}


def test_gryphon_fig6_claims_need_every_seed():
    assert all(c.verdict == C.PASS for c in G.claims_6([_m6(), _m6(), _m6()]))
    broken = {c.sentence: c.verdict for c in G.claims_6([_m6(), _m6(s2_nacks=4), _m6(fraction_s1_nacks_to_b2=0.5)])}
    assert broken["s2 unaffected"] == C.FAIL and broken["nacks go to b2"] == C.FAIL
    assert broken["several nacks (ranges chopped)"] == C.PASS


def test_gryphon_fig45_claims_separate_judged_from_information():
    rows = []
    for r in range(3):
        for n, rem in ((10, 5.0), (400, 30.0)):
            for mode, cpu_s1, cpu_p1 in (("gd", 10.5, 8.0), ("best-effort", 10.0, 5.0)):
                rows.append({"subscribers": n, "mode": mode, "repeat": r, "cpu_s1": cpu_s1 + n / 100,
                             "cpu_p1": cpu_p1, "local_median_ms": 2.0, "remote_median_ms": rem + r * 0.1})
    cl = {c.sentence: c for c in G.claims_45(rows, [4, 5])}
    assert cl["SHB: GD - best-effort under 4%"].verdict == C.PASS
    assert cl["remote latency rises with #subscribers for both"].verdict == C.PASS
    assert cl["PHB GD overhead about 8% (logging)"].verdict == C.INFO
    assert cl["GD - best-effort about 100 ms, constant (logging delay at PHB)"].verdict == C.INFO
    assert cl["local latency flat"].verdict == C.PASS
    flat = [dict(r, remote_median_ms=5.0 + r["repeat"]) for r in rows]
    assert {c.sentence: c for c in G.claims_45(flat, [5])}[
        "remote latency rises with #subscribers for both"].verdict == C.FAIL


def test_recovery_time_ignores_a_stray_slow_delivery():
    from testbed.analysis.gryphon.measure import recovery_s

    recv = [4.0 + 0.1 * i for i in range(60)]
    lat = [20.0] * 10 + [2500.0 - 100 * i for i in range(20)] + [20.0] * 30
    lat[50] = 400.0  # one stray slow delivery long after the recovery
    df = pd.DataFrame({"broker": ["s1"] * 60, "recv_s": recv, "lat_ms": lat})
    r = recovery_s(df, "s1", 5.0, window=5)
    assert 1.5 < r < 2.5
    assert recovery_s(df, "s2", 5.0) == 0.0
    assert not math.isnan(r)
