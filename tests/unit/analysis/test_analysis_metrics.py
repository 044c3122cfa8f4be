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


def test_fault_columns_attribute_as_the_join_does(spark):
    """completeness attributes a miss with a column expression; the join-based attribute_to_faults
    (mobility's) is the reference: the lowest-index fault whose window holds pub_s, else null."""
    from testbed.protocols.pubsub.analysis.checks import attribute_to_faults, fault_columns
    from pyspark.sql import functions as F

    windows = [(2, 5.0, 9.0, "pause b1"), (0, 8.0, 12.0, "cut"), (1, 20.0, 21.0, "crash"), (3, 4.0, 4.5, "x")]
    missing = spark.createDataFrame([("c", f"p{i}", "pub", i / 2) for i in range(50)] + [("c", "pn", "pub", None)],
                                    "client string, pub_id string, publisher string, pub_s double")
    w = spark.createDataFrame(windows, "fault int, lo double, hi double, source string")
    want = {r["pub_id"]: (r["fault"], r["fault_source"]) for r in attribute_to_faults(missing, w).collect()}
    fault, source = fault_columns(F.col("pub_s"), windows)
    got = {r["pub_id"]: (r["f"], r["s"]) for r in missing.select("pub_id", fault.alias("f"), source.alias("s")).collect()}
    assert got == want
    assert got["p17"] == (0, "cut") and got["p12"] == (2, "pause b1") and got["p30"] == (None, None)
    none_f, none_s = fault_columns(F.col("pub_s"), [])
    assert missing.select(none_f.alias("f")).where("f is not null").count() == 0
