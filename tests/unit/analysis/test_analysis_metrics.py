"""metrics.latency_stats: the summary and the CDF quantiles in one aggregation, equal to the two apart."""

import random

from testbed.analysis.metrics import latency_quantiles, latency_stats, latency_summary


def test_latency_stats_is_the_summary_and_the_quantiles(spark):
    rnd = random.Random(3)
    rows = [(rnd.choice(["rome", "oslo"]), rnd.choice(["rome", "oslo", "?"]), rnd.expovariate(0.1), 1.0)
            for _ in range(3000)]
    lat = spark.createDataFrame(rows, "pub_site string, sub_site string, latency_ms double, deliver_s double")
    both = {(r["pub_site"], r["sub_site"]): r.asDict() for r in latency_stats(lat).collect()}
    summary = {(r["pub_site"], r["sub_site"]): r.asDict() for r in latency_summary(lat).collect()}
    quant = {(r["pub_site"], r["sub_site"]): r["quantiles"] for r in latency_quantiles(lat).collect()}
    assert len(both) == 6 and set(both) == set(summary) == set(quant)
    for k, d in both.items():
        assert {x: v for x, v in d.items() if x != "quantiles"} == summary[k]
        assert d["quantiles"] == quant[k]
        assert d["count"] == sum(1 for r in rows if (r[0], r[1]) == k)
