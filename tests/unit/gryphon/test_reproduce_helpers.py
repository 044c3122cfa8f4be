"""Pure helpers of the Gryphon reproduction: claims, recovery time, check aggregation, report."""

import math

import pandas as pd

from testbed.analysis.gryphon.reproduce import aggregate_checks, claim, recovery_s, render


def test_recovery_time_ignores_a_stray_slow_delivery():
    recv = [4.0 + 0.1 * i for i in range(60)]
    lat = [20.0] * 10 + [2500.0 - 100 * i for i in range(20)] + [20.0] * 30
    lat[50] = 400.0  # one stray slow delivery long after the recovery
    df = pd.DataFrame({"broker": ["s1"] * 60, "recv_s": recv, "lat_ms": lat})
    r = recovery_s(df, "s1", 5.0, window=5)
    assert 1.5 < r < 2.5  # the sawtooth ends about 2 s after the fault; the stray one is ignored
    assert recovery_s(df, "s2", 5.0) == 0.0


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
