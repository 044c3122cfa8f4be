"""``tally``: several counts in one Spark job, equal to counting each frame alone."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from testbed.analysis.checks import tally

pytestmark = pytest.mark.spark


def _jobs(sc, group, fn):
    sc.setJobGroup(group, group)
    try:
        out = fn()
        return out, sc.statusTracker().getJobIdsForGroup(group)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)


@pytest.mark.parametrize("adaptive", ["false", "true"])
def test_tally_equals_the_counts_one_by_one_in_the_jobs_of_one_count(spark, adaptive):
    # as many jobs as one grouped count: one, or two under adaptive execution (a large run's
    # setting, session.tune_for_input), where the shuffle's map stage is a job of its own
    spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    df = spark.createDataFrame([("a", 1), ("a", 2), ("b", 3), (None, 4)], "k string, v int")
    frames = {"all": df, "big": df.where(F.col("v") > 2), "none": df.where(F.col("v") > 9),
              "by_k": (df, "k"), "by_v": (df.where(F.col("v") < 3), "v"), "empty_by": (df.limit(0), "k")}
    sc = spark.sparkContext
    got, jobs = _jobs(sc, f"test-tally-{adaptive}", lambda: tally(frames))
    _, one = _jobs(sc, f"test-one-count-{adaptive}", lambda: df.groupBy("k").count().collect())
    assert got == {"all": 4, "big": 2, "none": 0, "by_k": {"a": 2, "b": 1, None: 1},
                   "by_v": {"1": 1, "2": 1}, "empty_by": {}}
    assert got["all"] == df.count() and got["big"] == df.where(F.col("v") > 2).count()
    assert got["by_k"] == {r["k"]: r["count"] for r in df.groupBy("k").count().collect()}
    assert len(jobs) == len(one) == (1 if adaptive == "false" else 2)


def test_tally_of_nothing_is_empty():
    assert tally({}) == {}
