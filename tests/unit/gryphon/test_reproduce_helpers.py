"""Pure helpers of the Gryphon reproduction: claims, recovery time, check aggregation, report."""

import math

import pandas as pd

from testbed.analysis.gryphon.reproduce import aggregate_checks, claim, recovery_s, render


def test_recovery_time_is_last_abnormal_delivery_after_the_fault():
    lat = pd.DataFrame({"broker": ["s1", "s1", "s1", "s2"], "recv_s": [4.0, 6.0, 9.0, 8.0],
                        "lat_ms": [500.0, 2500.0, 10.0, 3000.0]})
    assert recovery_s(lat, "s1", 5.0) == 1.0
    assert recovery_s(lat, "s1", 7.0) == 0.0


def test_claim_rounds_and_keeps_holds_from_data():
    c = claim(6, "x", {"a": 1.23456, "b": {"k": math.nan}}, 1 < 2, "p")
    assert c == {"figure": 6, "claim": "x", "paper": "p", "measured": {"a": 1.23, "b": {"k": None}},
                 "holds": True}


def test_aggregate_checks_and_render():
    docs = [("/r/a", {"checks": [{"name": "gapless", "passed": True, "violations": 0}]}),
            ("/r/b", {"checks": [{"name": "gapless", "passed": False, "violations": 3}]})]
    agg = aggregate_checks(docs)
    assert agg["gapless"]["passed"] is False and agg["gapless"]["violations"] == 3
    assert set(agg["gapless"]["runs"]) == {"a", "b"}
    md = render("quick", [6], [claim(6, "s2 unaffected", {"m": 1.0}, False, "unaffected")], agg, {}, {})
    assert "| 6 | s2 unaffected | unaffected |" in md and "**no**" in md and "fig6.png" in md
