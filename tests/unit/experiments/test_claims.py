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
