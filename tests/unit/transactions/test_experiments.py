"""The transactions paper (protocols/transactions/experiments/): the wait search's bisection, the grids,
and every claim judged on good and on broken data."""

import math

import pytest

from testbed import api
from testbed.protocols.transactions.analysis.measure import rate_drop, throughput
from testbed.experiments import claims as C
from testbed.experiments import papers, topologies
from testbed.protocols.transactions import experiments as T
from testbed.experiments.runner import plan_work


# ------------------------------------------------------------------------------ the wait search
def _oracle(threshold):
    calls = []

    def ok(w):
        calls.append(w)
        return w >= threshold

    return ok, calls


@pytest.mark.parametrize("threshold", [0, 1, 50, 130, 150, 399, 400, 401, 900, 2000])
def test_bisect_finds_the_smallest_passing_multiple_and_probed_the_one_below(threshold):
    ok, calls = _oracle(threshold)
    w, tried = T.bisect_wait(ok, 400)
    want = math.ceil(threshold / 50) * 50
    assert w == want
    assert tried[w] is True
    if w > 0:
        assert tried[w - 50] is False  # the confirmation is part of the search
    assert all(c % 50 == 0 for c in calls) and len(calls) == len(set(calls))  # multiples of 50, each once
    assert len(calls) <= 10  # doubling, then a bisection over at most 32 multiples


def test_bisect_gives_up_past_the_limit_and_counts_probes():
    ok, calls = _oracle(10**6)
    w, tried = T.bisect_wait(ok, 400, limit=3200)
    assert w is None and calls == [400, 800, 1600, 3200] and not any(tried.values())
    ok, calls = _oracle(130)
    assert T.bisect_wait(ok, 400)[0] == 150 and calls == [400, 150, 50, 100]


@pytest.mark.parametrize("start", [0, 50, 100, 150, 200, 400, 1000])
@pytest.mark.parametrize("threshold", [0, 1, 50, 130, 150, 399, 900, 2000])
def test_search_from_a_nearby_wait_gives_the_bisection_s_answer(threshold, start):
    ok, calls = _oracle(threshold)
    w, tried = T.search_from(ok, start)
    assert w == T.bisect_wait(_oracle(threshold)[0], 400)[0] == math.ceil(threshold / 50) * 50
    assert tried[w] is True and (w == 0 or tried[w - 50] is False)  # the same rule: w passes, w - 50 failed
    assert all(c % 50 == 0 for c in calls) and len(calls) == len(set(calls))


def test_search_from_the_right_wait_takes_two_probes():
    ok, calls = _oracle(130)
    assert T.search_from(ok, 150) == (150, {150: True, 100: False}) and calls == [150, 100]
    ok, calls = _oracle(130)
    assert T.search_from(ok, 100)[0] == 150 and calls == [100, 150]
    ok, calls = _oracle(10**6)
    assert T.search_from(ok, 400, limit=3200)[0] is None and calls == [400, 450, 550, 750, 1150, 1950, 3200]


def _paired(threshold):
    """A pair prober over the oracle: records each round (the waits probed at once)."""
    ok, calls = _oracle(threshold)
    rounds = []

    def pair(ws):
        rounds.append(list(ws))
        return {w: ok(w) for w in ws}

    def one(w):
        rounds.append([w])
        return ok(w)

    return one, pair, calls, rounds


@pytest.mark.parametrize("start", [0, 50, 100, 150, 200, 400, 1000])
@pytest.mark.parametrize("threshold", [0, 1, 50, 130, 150, 399, 900, 2000, 10**6])
def test_probes_two_at_a_time_give_the_same_answer_in_no_more_rounds(threshold, start):
    one, pair, calls, rounds = _paired(threshold)
    w, tried = T.search_from(one, start, limit=3200, pair=pair)
    seq_calls = _oracle(threshold)
    assert w == T.search_from(seq_calls[0], start, limit=3200)[0]
    assert w is None or (tried[w] is True and (w == 0 or tried[w - 50] is False))
    assert len(rounds) <= len(seq_calls[1]) and len(calls) == len(set(calls))
    assert set(seq_calls[1]) <= set(calls)  # every probe of the one-at-a-time search was made
    one, pair, calls, rounds = _paired(threshold)
    w, tried = T.bisect_wait(one, 400, limit=3200, pair=pair)
    seq_calls = _oracle(threshold)
    assert w == T.bisect_wait(seq_calls[0], 400, limit=3200)[0]
    assert len(rounds) <= len(seq_calls[1]) and set(seq_calls[1]) <= set(calls)


def test_paired_probes_from_the_right_wait_take_one_round():
    one, pair, calls, rounds = _paired(130)
    assert T.search_from(one, 150, pair=pair) == (150, {150: True, 100: False}) and rounds == [[150, 100]]
    # from 400: 400 with the bisection's 150, then 50 with the probe after it if it passes (0);
    # 50 fails, so 100 alone: 3 rounds against 4 probes one at a time
    one, pair, calls, rounds = _paired(130)
    assert T.bisect_wait(one, 400, pair=pair)[0] == 150 and rounds == [[400, 150], [50, 0], [100]]


def test_the_paper_makes_quick_runs_two_at_a_time():
    assert T.PAPER.parallel_at("quick") == 2 and T.PAPER.parallel_at("paper") == 1


def test_the_nearest_configuration_s_wait():
    found = {"line3": 150, "tree9": 200, "t5": 100, "i10": None}
    assert T.nearest_wait("tree5", found) == 150  # overlays: 3 and 9 are 2 and 4 away from 5
    assert T.nearest_wait("single", found) == 150
    assert T.nearest_wait("t10", found) == 100  # the same family first
    assert T.nearest_wait("i5", found) == 150  # no instance count found yet: the line of 3
    assert T.nearest_wait("line3", {"line3": 150}) is None  # not its own
    assert T.nearest_wait("line3", {}) is None


def test_a_reproduce_plan_names_its_point():
    path = str(topologies.find("transactions", "reproduce.yaml"))
    sv = {"scale": "quick", "variant": "blwait", "overlay": "tree5", "placement": 2, "threads": 5,
          "instances": 2, "transactions": 12, "wait_ms": 150}
    [plan] = api.plans(path, sv)
    assert T.point_of(plan) == {k: v for k, v in sv.items() if k != "wait_ms"}
    assert plan.params["wait"] == pytest.approx(0.15) and plan.params["timeout"] == 5
    brokers = [n for n in plan.nodes.values() if n.role == "broker"]
    assert len(brokers) == 5
    # the paper's costs (costs.j2): every broker has the calibrated service time, links are a LAN
    assert {n.service["mean_s"] for n in brokers} == {0.015} and {n.service["distribution"] for n in brokers} == {
        "exponential"}
    assert {lk.delay_ms for lk in plan.links.values()} == {0.25}
    [fast] = api.plans(path, {**sv, "service_ms": 0})
    assert all(n.service is None for n in fast.nodes.values())
    with pytest.raises(ValueError, match="reproduce.yaml"):
        T.point_of(api.plans(str(topologies.find("transactions", "fig5-dtx.yaml")))[0])


def test_the_settle_covers_the_subscriptions_propagation_under_the_broker_cost():
    """reproduce all (2026-11-27): at 10 instances on the line of 3 with 15 ms per message, the
    brokers' 120 routing messages each converged 3-4 s after the brokers started, but the first
    transaction began 1.5 s after (settle 1 s): every instance on b3 lost its first transaction
    (P2/P3/P4 failed in all 6 Fig 8 runs of D-TX and S-TX). The settle now grows with the
    instances, the broker cost and the overlay's depth; without a cost it stays 1 s."""
    path = str(topologies.find("transactions", "reproduce.yaml"))
    sv = {"scale": "quick", "variant": "stx", "overlay": "line3", "instances": 10, "transactions": 20}
    [i10] = api.plans(path, sv)
    assert i10.params["settle"] >= 4.0  # beyond the measured 3-4 s
    [i1] = api.plans(path, {**sv, "instances": 1})
    assert 1.0 < i1.params["settle"] < i10.params["settle"]
    [fast] = api.plans(path, {**sv, "service_ms": 0})
    assert fast.params["settle"] == 1.0
    # the run's upper bound grows with it: the TXC still has its transactions' time after the settle
    [i10_fast] = api.plans(path, {**sv, "service_ms": 0})
    assert i10.duration_s - i10.params["settle"] >= i10_fast.duration_s - i10_fast.params["settle"] - 1


def test_the_settle_covers_the_dispatchers_standing_subscriptions_at_paper_scale():
    """Paper scale (2026-11-29): D subscribes to each of the run's 1000 transactions' spaces before
    the workload; under 15 ms per message b2 held them 15 s (E's advertisement queued behind them),
    then b1 and b3 15 s more: with a settle of 1.6 s D-TX's first 5 transactions timed out and the
    6th began at 27 s. The settle now counts one routing message per transaction too."""
    path = str(topologies.find("transactions", "reproduce.yaml"))
    sv = {"scale": "paper", "variant": "dtx", "overlay": "line3", "transactions": 1000}
    [p] = api.plans(path, sv)
    assert p.params["settle"] >= 2 * 1000 * 0.015  # the two stages measured: 30 s
    [few] = api.plans(path, {**sv, "transactions": 100})
    assert few.params["settle"] < p.params["settle"]
    # the run's upper bound still leaves the TXC its transactions' time after the settle
    assert p.duration_s - p.params["settle"] >= 1000 * 0.5


def test_grids_cover_every_figure_at_both_scales():
    p = papers()["transactions"]
    for scale in ("quick", "paper"):
        work = plan_work(p, scale, [5], None)
        assert {w.grid.name for w, _, _ in work} == {"base", "wait-line3"}
        assert sum(1 for w, _, _ in work if w.grid.name == "base") == 3 * 3
        allw = plan_work(p, scale, [5, 6, 7, 8, 9], None)
        waits = [pt for w, pt, _ in allw if w.grid.name.startswith("wait-")]
        assert all(pt["variant"] == "blwait" for pt in waits)
        names = {T.config_name(pt.get("overlay", "line3"), pt.get("threads", 1), pt.get("instances", 1)) for pt in waits}
        assert names == {c.name for c in T.configs(scale)}
        for w, pt, _ in allw:
            if w.grid.name != "fig9":
                assert T.point_of(w.plan)["scale"] == scale


# ------------------------------------------------------------------------------ claims
def _v(c):
    return {x.sentence: x.verdict for x in c if x.kind not in ("information", "construction")}


def test_fig5_claims_hold_on_the_paper_shape_and_fail_on_a_swapped_order():
    lat = {"stx": (50, 52, 51), "blwait": (190, 195, 185), "dtxni": (560, 555, 565), "dtx": (570, 575, 565)}
    thr = {v: tuple(1000 / x for x in xs) for v, xs in lat.items()}
    tl = {v: (1.0, 1.05, 0.95) for v in lat}
    good = _v(T.claims_5(lat, thr, tl))
    assert set(good.values()) == {C.PASS}, good
    four = "S-TX about 20 tx/s beats BL-WAIT about 5 tx/s: thr(S-TX) / thr(BL-WAIT) about 4"
    assert good[four] == C.PASS  # 3.7x
    # S-TX faster than BL-WAIT but by 1.3x, not about 4x: the old "> 1" passed this, the paper's 4x fails
    near = {**thr, "stx": tuple(1.3 * x for x in thr["blwait"])}
    assert _v(T.claims_5(lat, near, tl))[four] == C.FAIL
    assert all(c.unit in ("ms", "tx/s") for c in T.claims_5(lat, thr, tl) if c.kind == "information")
    bad_lat = {**lat, "stx": (300, 310, 305), "dtxni": (300, 310, 305)}
    bad = _v(T.claims_5(bad_lat, {v: tuple(1000 / x for x in xs) for v, xs in bad_lat.items()},
                        {v: (2.0, 2.0, 2.0) for v in lat}))
    for name in ("BL-WAIT latency about 190 ms", "BL-WAIT throughput about 5 tx/s"):  # unchanged in bad_lat
        bad.pop(name)
    assert set(bad.values()) == {C.FAIL}, bad
    assert _v(T.claims_5({"stx": (1, 2)}, {}, {}))["lat(S-TX) < lat(BL-WAIT) < lat(D-TXNI), lat(D-TX)"] == C.NO_DATA


def test_fig5_absolute_numbers_of_the_calibrated_model():
    """D-TX's 570 ms is the calibration point (by construction, whatever was measured); the paper's
    other absolute numbers are judged within a factor 1.5, and fail outside it."""
    lat = {"stx": (50, 52, 51), "blwait": (190, 195, 185), "dtxni": (560, 555, 565), "dtx": (570, 575, 565)}
    thr = {v: tuple(1000 / x for x in xs) for v, xs in lat.items()}
    tl = {v: (1.0, 1.0, 1.0) for v in lat}
    for dtx in ((570, 575, 565), (100, 110, 105)):
        c = {x.sentence: x for x in T.claims_5({**lat, "dtx": dtx}, thr, tl)}["D-TX latency about 570 ms"]
        assert c.verdict == C.BY_CONSTRUCTION and "calibrated on this point" in c.reason
    good = _v(T.claims_5(lat, thr, tl))
    for name in ("BL-WAIT latency about 190 ms", "S-TX throughput about 20 tx/s", "BL-WAIT throughput about 5 tx/s"):
        assert good[name] == C.PASS, name
    slow = {**lat, "blwait": (400, 410, 405), "stx": (150, 155, 160)}  # BL-WAIT 2.1x the paper's, S-TX 6.6 tx/s
    bad = _v(T.claims_5(slow, {v: tuple(1000 / x for x in xs) for v, xs in slow.items()}, tl))
    for name in ("BL-WAIT latency about 190 ms", "S-TX throughput about 20 tx/s", "BL-WAIT throughput about 5 tx/s"):
        assert bad[name] == C.FAIL, name
    assert T.calibrated_tol(190).band(190) == pytest.approx((190 / 1.5, 285.0))


def _sweep(vals, jitter=(0.0, 1.0, -1.0)):
    """vals[variant][x] = mean -> 3 samples around it."""
    return {v: {x: tuple(m + j for j in jitter) for x, m in xs.items()} for v, xs in vals.items()}


def test_fig6_claims():
    good = _sweep({"stx": {1: 30, 3: 45, 9: 60}, "blwait": {1: 70, 3: 190, 9: 180},
                   "dtxni": {1: 400, 3: 560, 9: 850}, "dtx": {1: 410, 3: 570, 9: 911}})
    good["blwait"][9] = (182.0, 183.0, 181.0)
    res = _v(T.claims_6(good))
    assert res.pop("the 9-broker / 1-broker latency ratio is smallest for S-TX") == C.PASS
    assert set(res.values()) == {C.PASS}, res
    flat = _sweep({"stx": {1: 60, 9: 60}, "blwait": {1: 50, 9: 200}, "dtxni": {1: 400, 9: 950},
                   "dtx": {1: 410, 9: 911}})
    res = _v(T.claims_6(flat))
    assert res["order S-TX < BL-WAIT < D-TXNI at every size"] == C.FAIL
    assert res["all degrade with size: latency rises with the number of brokers"] == C.FAIL
    # D-TXNI 4% above D-TX at 9 brokers: inside the spec's 'similar' margin (0.15), shown by the interval
    assert res["D-TXNI <= D-TX at every size"] == C.PASS
    assert res["D-TXNI better than D-TX on large overlays: lat(D-TXNI) < lat(D-TX) at 9"] == C.FAIL
    # D-TXNI 32% above D-TX at 9 brokers: the statement is false, fails
    above = _sweep({"stx": {1: 60, 9: 60}, "blwait": {1: 50, 9: 200}, "dtxni": {1: 400, 9: 1200},
                    "dtx": {1: 410, 9: 911}})
    assert _v(T.claims_6(above))["D-TXNI <= D-TX at every size"] == C.FAIL
    # the burden of proof is on the claim: noise that could hide an excess is not a pass
    noisy = _sweep({"stx": {1: 60, 9: 60}, "blwait": {1: 50, 9: 200}, "dtxni": {1: 400, 9: 911},
                    "dtx": {1: 410, 9: 911}})
    noisy["dtxni"][9] = (911.0, 1061.0, 761.0)  # the mean equal, one seed 16% above
    assert T.ratio_tol(4.0).band(4.0) == (3.0, 5.5) and T.ratio_tol(1.5).low > 1.0
    assert _v(T.claims_6(noisy))["D-TXNI <= D-TX at every size"] == C.INSUFFICIENT
    # the paper's overlay ratios (2.22x, 2.6x, 1.9x) are judged: all flat (1x) fails each
    ratios = _v(T.claims_6(_sweep({v: {1: 100, 9: 100} for v in ("stx", "blwait", "dtxni", "dtx")})))
    for name in ("D-TX latency 9 / 1 brokers about 2.22x", "BL-WAIT latency 9 / 1 brokers about 2.6x",
                 "S-TX latency 9 / 1 brokers about 1.9x"):
        assert ratios[name] == C.FAIL, name
    # the calibrated model's absolute numbers at 1 and 9 brokers: judged, and fail when far off
    assert res["D-TX about 410 ms at 1 broker"] == C.PASS and res["S-TX about 60 ms at 9 brokers"] == C.PASS
    off = _v(T.claims_6(_sweep({"stx": {1: 30, 9: 200}, "blwait": {1: 70, 9: 180}, "dtxni": {1: 150, 9: 850},
                                "dtx": {1: 150, 9: 2000}})))
    for name in ("D-TX about 410 ms at 1 broker", "D-TX about 911 ms at 9 brokers", "S-TX about 60 ms at 9 brokers"):
        assert off[name] == C.FAIL, name


def test_fig7_and_fig8_claims():
    lat7 = _sweep({"blwait": {1: 200, 10: 300}, "stx": {1: 50, 10: 150}, "dtx": {1: 570, 10: 2280},
                   "dtxni": {1: 560, 10: 2200}})
    thr7 = _sweep({"blwait": {1: 5, 10: 35}, "stx": {1: 20, 10: 74}, "dtx": {1: 1.75, 10: 4}, "dtxni": {1: 1.8, 10: 4}},
                  (0.0, 0.01, -0.01))
    assert set(_v(T.claims_7(lat7, thr7)).values()) == {C.PASS}
    bad = _v(T.claims_7(_sweep({"blwait": {1: 200, 10: 900}, "stx": {1: 50, 10: 60}, "dtx": {1: 570, 10: 600},
                                "dtxni": {1: 560, 10: 600}}), thr7))
    assert bad["latency ratio 1 -> 10 threads: BL-WAIT < S-TX < D-TX"] == C.FAIL
    assert bad["order S-TX < BL-WAIT < D-TX, D-TXNI at every thread count"] == C.FAIL
    # the paper's seven thread ratios are judged: idle brokers (every ratio 1x) fail each
    one = _sweep({v: {1: 100, 10: 100} for v in ("blwait", "stx", "dtx", "dtxni")})
    r7 = _v(T.claims_7(one, one))
    for name in ("BL-WAIT latency x1.5 from 1 to 10 threads", "S-TX latency x3.0 from 1 to 10 threads",
                 "D-TX latency x4.0 from 1 to 10 threads", "D-TXNI latency x4.0 from 1 to 10 threads",
                 "BL-WAIT throughput x7.0 from 1 to 10 threads", "S-TX throughput x3.7 from 1 to 10 threads",
                 "D-TX throughput x2.3 from 1 to 10 threads"):
        assert r7[name] == C.FAIL, name
    lat8 = _sweep({"stx": {1: 50, 5: 60, 10: 70}, "blwait": {1: 200, 5: 250, 10: 280},
                   "dtx": {1: 570, 5: 700, 10: 2000}, "dtxni": {1: 560, 5: 650, 10: 1500}})
    thr8 = _sweep({"stx": {1: 20, 5: 90, 10: 150}, "blwait": {1: 5, 5: 20, 10: 38},
                   "dtx": {1: 1.75, 5: 6, 10: 4}, "dtxni": {1: 1.8, 5: 6.5, 10: 5}}, (0.0, 0.01, -0.01))
    good = _v(T.claims_8(lat8, thr8, lat7, thr7))
    assert set(good.values()) == {C.PASS}, good
    thr8["dtx"][10] = (8.0, 8.01, 7.99)
    bad = _v(T.claims_8(lat8, thr8, lat7, thr7))
    assert bad["D-TX throughput rises to 20 clients then drops at 40"] == C.FAIL
    assert bad["D-TXNI scales better than D-TX: thr D-TXNI(40) > thr D-TX(40)"] == C.FAIL
    # the paper's four instance ratios are judged: all 1x fails each
    one8 = _sweep({v: {1: 100, 5: 100, 10: 100} for v in ("stx", "blwait", "dtx", "dtxni")})
    r8 = _v(T.claims_8(one8, one8, lat7, thr7))
    for name in ("S-TX latency +50% at 40 clients", "BL-WAIT latency +50% at 40 clients",
                 "S-TX throughput x7 at 40 clients", "BL-WAIT throughput x7 at 40 clients"):
        assert r8[name] == C.FAIL, name


def test_fig9_claims_and_rate_drop():
    steady = {b: 1000.0 for b in range(20)}
    windows = [(5.2, 6.4), (11.0, 12.5)]
    m = rate_drop(steady, windows)
    assert m["ratio"] == pytest.approx(1.0) and m["cv"] == pytest.approx(0.0) and m["bins_in"] == 4
    dropped = {b: (400.0 if b in (5, 6, 11, 12) else 1000.0) for b in range(20)}
    d = rate_drop(dropped, windows)
    assert d["ratio"] == pytest.approx(0.4) and d["cv"] > 0.2
    noisy = {b: 1000.0 + (30 if b % 2 else -30) for b in range(20)}
    n = rate_drop(noisy, windows)
    good = _v(T.claims_9({"dtx": [d] * 3, "dtxni": [d] * 3, "stx": [m, n, m]}))
    assert set(good.values()) == {C.PASS}, good
    bad = {x.sentence: x for x in T.claims_9({"dtx": [m] * 3, "dtxni": [m] * 3, "stx": [d] * 3})}
    assert {k: x.verdict for k, x in bad.items() if not k.startswith("S-TX")} == {
        "D-TX shows a clear drop of the event rate during dispatch": C.FAIL,
        "D-TXNI shows a clear drop of the event rate during dispatch": C.FAIL}
    # S-TX's "no drop" is a contrast: without D-TX / D-TXNI dropping it is not judged
    stx = [x for k, x in bad.items() if k.startswith("S-TX")]
    assert len(stx) == 2 and all(x.verdict == C.INSUFFICIENT and "no contrast" in x.reason for x in stx)
    # where D-TX and D-TXNI drop, S-TX dropping too fails it
    also = _v(T.claims_9({"dtx": [d] * 3, "dtxni": [d] * 3, "stx": [d] * 3}))
    assert also["S-TX shows no identifiable drop"] == C.FAIL
    assert math.isnan(rate_drop({b: 0.0 for b in range(5)}, windows)["ratio"])


def test_checks_of_the_runs_are_rows_of_the_checks_table_not_claims():
    ok = {"run": "a", "checks": [{"check": c, "passed": True} for c in T.CHECKS_REQUIRED]}
    broken = {"run": "b", "checks": [{"check": c, "passed": c != "transactions.p3_atomicity"}
                                     for c in T.CHECKS_REQUIRED]}
    row = T.check_row(T.claims_checks(6, [ok, broken]), "transactions.p1_p5_per_figure")
    assert row == {**row, "run": "fig6", "check": "transactions.p1_p5_per_figure", "passed": False, "violations": 1,
                   "examples": ["transactions.p3_atomicity"]}
    import inspect

    src = inspect.getsource(T.analyze)
    assert "ctx.add(claims_checks" not in src and "ctx.add(*claims_wait" not in src


def test_one_throughput_definition_for_every_point():
    import inspect

    from testbed.protocols.transactions.experiments.grids import THROUGHPUT

    assert THROUGHPUT == "thr_wall"  # committed / span, the sequential points included
    src = inspect.getsource(T.analyze)
    assert 'pick("thr",' not in src and 'by_x("thr",' not in src


def test_checks_and_wait_claims():
    ok = {"run": "a", "checks": [{"check": c, "passed": True} for c in T.CHECKS_REQUIRED]}
    broken = {"run": "b", "checks": [{"check": c, "passed": c != "transactions.p3_atomicity"}
                                     for c in T.CHECKS_REQUIRED]}
    assert T.claims_checks(5, [ok, ok]).verdict == C.PASS
    c = T.claims_checks(5, [ok, broken])
    assert c.verdict == C.FAIL and c.measured.detail["failing_checks"] == ["transactions.p3_atomicity"]
    row = {"config": "line3", "wait_ms": 100, "confirmed": True,
           "probes": [{"wait_ms": 50, "passed": False}, {"wait_ms": 100, "passed": True}]}
    assert T.claims_wait(5, [row])[0].verdict == C.PASS
    assert T.claims_wait(5, [{**row, "confirmed": False}])[0].verdict == C.FAIL
    assert T.claims_wait(5, [{**row, "wait_ms": None}])[0].verdict == C.FAIL


def test_throughput_definitions():
    assert throughput({"threads": 1, "instances": 1, "lat_mean_ms": 250.0, "thr_wall": 3.0}) == 4.0
    assert throughput({"threads": 5, "instances": 1, "lat_mean_ms": 250.0, "thr_wall": 3.0}) == 3.0


def test_a_search_run_that_failed_to_come_up_is_tried_again(monkeypatch, tmp_path):
    """As the runner does (RUN_ATTEMPTS): a probe whose run raised (e.g. a port taken by another
    process before the node bound it) is made once more, and the failed attempt is in the row."""
    import types

    import testbed.analysis.session as S
    import testbed.protocols.transactions.analysis.measure as M
    from testbed.errors import ProviderError

    monkeypatch.setenv("TESTBED_RUNS", str(tmp_path))
    monkeypatch.setattr(S, "spark_session", lambda *a, **k: None)
    monkeypatch.setattr(M, "check_run", lambda spark, run, fns: [{"check": f, "passed": True, "violations": 0}
                                                                for f in fns])
    calls = []

    def run_one(p, path, sv, root, *a):
        calls.append(sv["wait_ms"])
        if len(calls) == 1:
            raise ProviderError("node b1: exited during start-up: address already in use")
        return types.SimpleNamespace(path=tmp_path / f"run{len(calls)}")

    monkeypatch.setattr(api, "run_one", run_one)
    from testbed.experiments.runner import ComputeContext

    path = str(topologies.find("transactions", "reproduce.yaml"))
    [plan] = [p for p in api.plans(path, {"scale": "quick", "variant": "blwait", "transactions": 4})
              if p.repeat_index == 0]
    row = T.search(plan, ComputeContext(scale="quick", runs_dir=tmp_path, get_spark=lambda: None))
    assert calls[:2] == [400, 400] and row["wait_ms"] == 0  # every probe passes here: down to 0
    assert row["failed_attempts"] == [{"wait_ms": 400, "placement": 0, "repeat": 0,
                                       "error": "ProviderError: node b1: exited during start-up: address already in use"}]


# Figs 7-8 as this machine measured them at paper scale (docs/transactions.md): S-TX saturates its
# busiest broker, BL-WAIT's wait grows with the threads
_SAT_LAT = {"blwait": {1: 317, 10: 948}, "stx": {1: 241, 10: 1535}, "dtx": {1: 660, 10: 2728},
            "dtxni": {1: 628, 10: 2581}}
_SAT_THR = {"blwait": {1: 3.16, 10: 10.35}, "stx": {1: 4.14, 10: 5.32}, "dtx": {1: 1.52, 10: 3.52},
            "dtxni": {1: 1.59, 10: 3.66}}
_SAT_EVIDENCE = {"most": "10 threads", "par": "10 threads", "stx_busy_1": 0.63, "stx_busy_n": 0.94,
                 "stx_qwait_1": 11.0, "stx_qwait_n": 284.0, "stx_bound": 1 / 0.63, "dtx_busy_1": 0.37,
                 "dtx_busy_n": 0.91, "dtx_qwait_1": 1.0, "dtx_qwait_n": 60.0, "dtx_bound": 1 / 0.37,
                 "blwait_busy_n": 0.8, "blwait_qwait_1": 3.0, "blwait_qwait_n": 45.0, "blwait_wait_1": 250,
                 "blwait_wait_n": 750, "blwait_lat_ratio": 2.99, "blwait_thr_bound": 10 / 2.99}


_WORK_EVIDENCE = {"lo": 1, "hi": 9, "blwait_wait_lo": 250, "blwait_wait_hi": 350,
                  **{f"{v}_{k}": x for v, (w1, w9) in {"dtx": (180.0, 810.0), "dtxni": (170.0, 790.0),
                                                         "stx": (90.0, 330.0), "blwait": (20.0, 60.0)}.items()
                     for k, x in (("work_lo", w1), ("work_hi", w9), ("msgs_lo", w1 / 15), ("msgs_hi", w9 / 15),
                                  ("ms_per_msg_lo", 15.0), ("ms_per_msg_hi", 15.0), ("work_ratio", w9 / w1),
                                  ("lat_ratio", w9 / w1))}}


def test_explanations_attach_to_claims_and_cite_measured_causes():
    from testbed.experiments.runner import _explained

    lat6 = _sweep({"stx": {1: 60, 9: 60}, "blwait": {1: 50, 9: 200}, "dtxni": {1: 400, 9: 950}, "dtx": {1: 410, 9: 911}})
    steady = rate_drop({b: 1000.0 for b in range(20)}, [(5.2, 6.4)])
    lat7, thr7 = _sweep(_SAT_LAT), _sweep(_SAT_THR, (0.0, 0.01, -0.01))
    ids = ({c.id for c in T.claims_6(lat6)} | {c.id for c in T.claims_9({"dtx": [steady] * 3, "dtxni": [steady] * 3,
                                                                        "stx": [steady] * 3})}
           | {c.id for c in T.claims_7(lat7, thr7)} | {c.id for c in T.claims_8(lat7, thr7, lat7, thr7)})
    assert set(T.EXPLAINED) <= ids
    # Figs 7-8: every failing claim with an explanation renders from the brokers' measured queues ...
    failed = [c for c in T.claims_7(lat7, thr7) + T.claims_8(lat7, thr7, lat7, thr7)
              if c.verdict == C.FAIL and c.id in T.EXPLAINED]
    assert len(failed) >= 10
    for c in failed:
        d = _explained(T.PAPER, c, {c.figure: _SAT_EVIDENCE})
        assert d.get("explanation") and not d.get("not_measured"), (c.sentence, d)
    stx = next(c for c in failed if c.sentence == "S-TX throughput x3.7 from 1 to 10 threads")
    assert "busy 0.63 of the sequential workload and 0.94 at 10 threads" in _explained(
        T.PAPER, stx, {7: _SAT_EVIDENCE})["explanation"]
    assert "1/0.63 = 1.59 times the messages, and S-TX's throughput rose x1.28" in _explained(
        T.PAPER, stx, {7: _SAT_EVIDENCE})["explanation"]
    # ... and is "not explained" when the queues were not measured (runs without a service time)
    nan = dict(_SAT_EVIDENCE, stx_busy_1=math.nan, stx_bound=math.nan)
    assert "stx_busy_1" in _explained(T.PAPER, stx, {7: nan})["not_measured"]
    # Fig 6: every failing claim on the overlays renders from the brokers' measured work per transaction
    bad6 = _sweep({"stx": {1: 118, 9: 362}, "blwait": {1: 280, 9: 420}, "dtxni": {1: 216, 9: 979},
                   "dtx": {1: 223, 9: 998}})
    failed6 = [c for c in T.claims_6(bad6) if c.verdict == C.FAIL and c.id in T.EXPLAINED]
    assert {c.sentence for c in failed6} >= {"D-TX latency 9 / 1 brokers about 2.22x", "S-TX about 60 ms at 9 brokers",
                                             "D-TX about 410 ms at 1 broker", "order S-TX < BL-WAIT < D-TXNI at every size"}
    for c in failed6:
        d = _explained(T.PAPER, c, {6: _WORK_EVIDENCE})
        assert d.get("explanation") and not d.get("not_measured"), (c.sentence, d)
    dtx = next(c for c in failed6 if c.sentence == "D-TX latency 9 / 1 brokers about 2.22x")
    assert ("a transaction cost the brokers 180 ms of service (12.0 messages served at 15.0 ms) on 1 "
            "broker and 810 ms of service (54.0 messages served at 15.0 ms) on 9, x4.50") in _explained(T.PAPER, dtx, {6: _WORK_EVIDENCE})["explanation"]
    assert "dtx_work_hi" in _explained(T.PAPER, dtx, {6: dict(_WORK_EVIDENCE, dtx_work_hi=math.nan)})["not_measured"]
    c = next(c for c in T.claims_9({"dtx": [steady] * 3, "dtxni": [steady] * 3, "stx": [steady] * 3})
             if c.sentence.startswith("D-TX shows"))
    d = _explained(T.PAPER, c, {9: {"regular_rate": "1000/s"}})
    assert d["verdict"] == C.FAIL and "1.000 [1.000, 1.000] (n=3) at 1000/s regular events/s" in d["explanation"]
    assert _explained(T.PAPER, c, {})["not_measured"] == ["regular_rate"]


def test_a_sample_failing_at_the_wait_found_fails_the_wait_search():
    """Issue #30: the wait found on one probe must hold on the configuration's other seeds and
    placements; a sample that fails P2 or P9 at it fails the figure's wait-search row."""
    from testbed.protocols.transactions.experiments.analyze import samples_fail_wait_search

    cfg_figs = {c.name: c.figs for c in T.configs("quick")}

    def rows():
        return [{"run": f"fig{f}", "check": "transactions.blwait_wait_search", "passed": True, "violations": 0,
                 "examples": [], "description": "probes"} for f in (5, 6, 7, 8)]

    good = {"wait-line3/blwait/line3/p0/t1/i1/r1": True, "wait-threads/blwait/line3/p0/t5/i1/r2": True}
    checks = rows()
    samples_fail_wait_search(checks, good, cfg_figs)
    assert all(r["passed"] and r["samples_failing"] == [] for r in checks)
    bad = {**good, "wait-threads/blwait/line3/p0/t5/i1/r2": False,
           "wait-overlays/blwait/tree9/p2/t1/i1/r0": False}
    checks = rows()
    samples_fail_wait_search(checks, bad, cfg_figs)
    by = {r["run"]: r for r in checks}
    assert by["fig5"]["passed"] and by["fig8"]["passed"]  # t5 is Fig 7's configuration, tree9 Fig 6's
    assert not by["fig6"]["passed"] and by["fig6"]["samples_failing"] == ["wait-overlays/blwait/tree9/p2/t1/i1/r0"]
    assert not by["fig7"]["passed"] and by["fig7"]["violations"] == 1
    assert "every sample at the wait found passed P2 and P9" in by["fig7"]["description"]


def test_a_reused_wait_entry_puts_its_search_back_for_the_next_configuration():
    """Resuming a reproduction: the line of 3's search, taken from the run index, is back in the memo
    (``wait.restore``), so the 2-thread configuration's search starts from its wait as in one sitting."""
    from testbed import api
    from testbed.experiments import topologies
    from testbed.experiments.runner import ComputeContext
    from testbed.protocols.transactions.experiments.resume import restore
    from testbed.protocols.transactions.experiments.wait import nearest_wait

    path = str(topologies.find("transactions", "reproduce.yaml"))
    [plan] = [p for p in api.plans(path, {"scale": "paper", "variant": "blwait", "transactions": 1000})
              if p.repeat_index == 0]
    ctx = ComputeContext(scale="paper")
    row = {"config": "line3", "wait_ms": 250, "start_ms": 2000, "probes": [{"wait_ms": 250, "passed": True}],
           "sample": {"wait_ms": 250, "run": "/r"}, "failed_attempts": [{"error": "x"}]}
    restore(plan, {"wait_ms": 100}, ctx)  # not a search's row: nothing
    assert ctx.memo.get("blwait_searches", {}) == {}
    restore(plan, row, ctx)
    searches = ctx.memo["blwait_searches"]
    assert list(searches) == [("paper", "line3", 1000, plan.provider)]
    got = searches[("paper", "line3", 1000, plan.provider)]
    assert got["wait_ms"] == 250 and got["samples"] == {} and "sample" not in got and "failed_attempts" not in got
    assert nearest_wait("t2", {k[1]: v["wait_ms"] for k, v in searches.items()}) == 250
    restore(plan, {**row, "wait_ms": 300}, ctx)  # a second sample of the same configuration: the first stays
    assert searches[("paper", "line3", 1000, plan.provider)]["wait_ms"] == 250
