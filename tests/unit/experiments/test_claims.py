"""The claims engine: comparisons need >= 3 seeds and a difference beyond the spread; information never passes."""

import math

import pytest

from testbed.experiments import claims as C
from testbed.experiments.claims import Difference, Tolerance


def test_comparison_passes_only_when_the_difference_exceeds_the_spread():
    clear = C.comparison(9, "a below b", [Difference("x", (10, 11, 12), (20, 21, 22), "<")], what="w")
    assert clear.verdict == C.PASS and clear.kind == "comparison"
    assert clear.measured.mean == pytest.approx(-10) and clear.measured.spread == pytest.approx(2.0)
    # the means differ (a < b) but by less than the seeds' spread: not a result
    noisy = C.comparison(9, "a below b", [Difference("x", (10, 20, 30), (14, 24, 34), "<")], what="w")
    assert noisy.verdict == C.FAIL
    wrong_way = C.comparison(9, "a below b", [Difference("x", (30, 31, 32), (10, 11, 12), "<")], what="w")
    assert wrong_way.verdict == C.FAIL


def test_comparison_needs_three_seeds_and_every_point():
    two = C.comparison(5, "rises", [Difference("x", (10, 11), (1, 2), ">")], what="w")
    assert two.verdict == C.INSUFFICIENT and not two.passed
    mixed = C.comparison(9, "below at every rate",
                         [Difference("r=1", (1, 1.1, 0.9), (5, 5.1, 4.9), "<"),
                          Difference("r=2", (6, 6.1, 5.9), (5, 5.1, 4.9), "<")], what="w")
    assert mixed.verdict == C.FAIL and mixed.measured.detail["worst"] == "r=2"
    assert C.comparison(9, "x", [], what="w").verdict == C.NO_DATA
    exempt = C.comparison(7, "below", [Difference("k=1", (1, 1, 1), (1, 1, 1), "<", exempt=True),
                                       Difference("k=2", (2, 2.1, 1.9), (9, 9, 9), "<")], what="w")
    assert exempt.verdict == C.PASS


def test_information_is_never_a_pass():
    c = C.information(9, "latency < 300 ms", [12.0, 13.0, 14.0], "< 300 ms", "set by the paper's hardware")
    assert c.verdict == C.INFO and not c.passed and c.reason
    with pytest.raises(ValueError):
        C.Claim(9, "x", "information", C.PASS, C.Measured.of([1]))


def test_value_claim_judges_the_mean_against_the_tolerance():
    tol = Tolerance("why 30%", rel=0.3)
    assert C.value(7, "about 46", [40, 44, 48], 46, tol).verdict == C.PASS
    assert C.value(7, "about 46", [12, 13, 12], 46, tol).verdict == C.FAIL
    assert C.value(7, "about 46", [], 46, tol).verdict == C.NO_DATA
    band = Tolerance("a band", low=1.5, high=4.0)
    assert C.value(6, "about 2 s", [3.3, 3.4, 3.5], 2.0, band).verdict == C.PASS
    assert C.value(6, "about 2 s", [4.3, 4.4, 4.5], 2.0, band).verdict == C.FAIL
    assert band.text() == "in [1.5, 4]" and tol.text() == "within 30% of the paper"


def test_shape_holds_only_on_every_seed_and_round_trips():
    assert C.shape(8, "no nacks", [True, True, True], judged="j").verdict == C.PASS
    c = C.shape(8, "no nacks", [True, False, True], judged="j", samples=[0, 3, 0])
    assert c.verdict == C.FAIL and c.measured.n == 3
    assert C.shape(8, "no nacks", [None], judged="j").verdict == C.NO_DATA
    d = c.to_dict()
    assert d["verdict"] == "fail" and d["measured"]["detail"]["holds_per_seed"] == [True, False, True]
    back = C.Claim.from_dict(d)
    assert back.verdict == c.verdict and back.measured.n == 3
    assert math.isnan(C.mean([])) and C.spread([5.0]) == 0.0


def test_value_claim_uses_the_t_interval_pass_inside_fail_outside_insufficient_across():
    tol = Tolerance("a 2.5x ratio, 20%", rel=0.2)  # band [2.0, 3.0]
    inside = C.value(5, "about 2.5x", [2.4, 2.5, 2.6], 2.5, tol)
    assert inside.verdict == C.PASS and inside.measured.ci == pytest.approx((2.2516, 2.7484), abs=1e-3)
    assert inside.measured.ci_method == C.CI_METHOD
    outside = C.value(5, "about 2.5x", [1.0, 1.1, 1.2], 2.5, tol)  # the paper's statement is false
    assert outside.verdict == C.FAIL
    # the mean (2.9) is inside the band but the interval crosses its edge: not a result either way
    across = C.value(5, "about 2.5x", [2.6, 2.9, 3.2], 2.5, tol)
    assert across.verdict == C.INSUFFICIENT and not across.passed
    lone = C.value(5, "about 2.5x", [2.5], 2.5, tol)  # one seed says nothing about the spread
    assert lone.verdict == C.INSUFFICIENT and lone.measured.ci == (-math.inf, math.inf)
    # a pure computation (no seed noise) is judged on its value, and must really be noise-free
    assert C.value(7, "about 46", [45.0, 45.0], 46, Tolerance("r", rel=0.1), exact=True).verdict == C.PASS
    assert C.value(7, "about 46", [25.0], 46, Tolerance("r", rel=0.1), exact=True).verdict == C.FAIL
    with pytest.raises(ValueError, match="exact"):
        C.value(7, "about 46", [45.0, 47.0], 46, Tolerance("r", rel=0.1), exact=True)
    assert C.t_quantile(2) == pytest.approx(4.303) and C.t_quantile(60) == pytest.approx(2.000, abs=2e-3)


def test_by_construction_names_what_decides_it_and_is_never_judged():
    c = C.by_construction(6, "a 100 ms gap", [100.1, 99.9], decided_by="log_force.gap_ms = 100",
                          predicted=[100.0, 100.0])
    assert c.verdict == C.BY_CONSTRUCTION and c.kind == "construction" and not c.is_judged and not c.passed
    assert c.reason == "log_force.gap_ms = 100" and c.measured.detail["predicted"]["mean"] == 100.0
    with pytest.raises(ValueError, match="decides"):
        C.by_construction(6, "a 100 ms gap", [100.0], decided_by="")
    with pytest.raises(ValueError):
        C.Claim(6, "x", "value", C.BY_CONSTRUCTION, C.Measured.of([1]))
    back = C.Claim.from_dict(c.to_dict())
    assert back.verdict == C.BY_CONSTRUCTION and back.id == c.id == "fig6:a-100-ms-gap"


def test_information_is_for_absolute_numbers_only():
    assert C.information(9, "< 300 ms", [12.0], "< 300 ms", "hardware", unit="ms").unit == "ms"
    for unit in ("x", "ratio", ""):
        with pytest.raises(ValueError, match="absolute numbers only"):
            C.information(5, "about 4x", [4.0], 4, "a ratio", unit=unit)


def test_summary_counts_judged_claims_and_reproduced_is_passes_over_judged():
    tol = Tolerance("r", rel=0.2)
    cs = [C.value(1, "a", [1.0, 1.0, 1.0], 1.0, tol), C.value(1, "b", [5.0, 5.1, 4.9], 1.0, tol),
          C.value(1, "c", [1.0], 1.0, tol), C.information(1, "d", [3.0], 3, "hw", unit="ms"),
          C.by_construction(1, "e", [24], decided_by="24 messages per move, fixed")]
    s = C.summary(cs)
    assert s == {"judged": 3, "pass": 1, "fail": 1, "insufficient": 1, "no data": 0, "by construction": 1,
                 "info": 1, "reproduced": pytest.approx(1 / 3, abs=1e-4)}
    assert C.summary([c.to_dict() for c in cs]) == s
    both = C.add_summaries([s, s])
    assert both["judged"] == 6 and both["pass"] == 2 and both["reproduced"] == pytest.approx(1 / 3, abs=1e-4)
    assert C.summary([])["reproduced"] is None


def test_a_claim_is_added_once(tmp_path):
    from testbed.experiments.grid import Paper
    from testbed.experiments.runner import Context

    ctx = Context(Paper("p", "P", (), (), lambda c: None), "quick", [], tmp_path, {}, lambda s: None)
    ctx.add(C.shape(3, "no nacks", [True], judged="j"), C.shape(4, "no nacks", [True], judged="j"))
    with pytest.raises(ValueError, match="added twice"):
        ctx.add(C.shape(3, "no nacks", [True, True], judged="j"))
    ctx.add(C.shape(3, "no nacks", [True], judged="j", cid="fig3:no-nacks-at-k=2"))  # its own id


def test_claim_ids_of_long_sentences_that_differ_at_the_end_differ():
    a = C.claim_id(7, "grows toward the maximum (1000) as subscriptions grow (shape 0.901)")
    b = C.claim_id(7, "grows toward the maximum (1000) as subscriptions grow (shape 0.349)")
    assert a != b and a.startswith("fig7:grows-toward-the-maximum") and len(a) <= 5 + 60
    assert C.claim_id(9, "a below b") == "fig9:a-below-b"
