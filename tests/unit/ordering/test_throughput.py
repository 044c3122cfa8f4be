"""Fig 10's throughput (``metrics.timestamp_summary``): completed timestamps per second over the
longer of the completion span and the request span, so that a system keeping up reads as the
offered rate whatever its latency (issue #12), a saturated one as its service rate."""

import pytest

from testbed.protocols.ordering.analysis.metrics import timestamp_summary


def _summary(spark, rows):
    df = spark.createDataFrame([(1, float(lat), float(t)) for lat, t in rows], "size int, latency_ms double, t_rel_s double")
    return timestamp_summary(df).collect()[0]


def test_keeping_up_reads_the_offered_rate_whatever_the_latency(spark):
    # 500/s for 5 s, every timestamp 1 s late: the old n / (last done - first request) read 417/s
    rows = [(1000.0, 2.0 + i / 500 + 1.0) for i in range(2500)]
    r = _summary(spark, rows)
    assert r["throughput_per_s"] == pytest.approx(500, rel=0.01)


def test_saturated_reads_the_service_rate(spark):
    # 1000/s offered for 5 s, served at 400/s: completions every 2.5 ms, latency growing
    rows = [((2.0 + 0.01 + i / 400) * 1e3 - (2.0 + i / 1000) * 1e3, 2.0 + 0.01 + i / 400) for i in range(5000)]
    r = _summary(spark, rows)
    assert r["throughput_per_s"] == pytest.approx(400, rel=0.01)


def test_a_burst_after_a_stall_does_not_count_above_the_offered_rate(spark):
    # 500/s for 5 s; nothing completes for 3 s, then everything within 0.5 s
    rows = [((5.0 + 0.5 * i / 2500 - (i / 500)) * 1e3, 5.0 + 0.5 * i / 2500) for i in range(2500)]
    r = _summary(spark, rows)
    assert r["throughput_per_s"] == pytest.approx(500, rel=0.01)
