"""``tally``: several counts in one Spark job, equal to counting each frame alone."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from testbed.analysis.checks import tally

pytestmark = pytest.mark.spark


def test_tally_equals_the_counts_one_by_one_in_one_job(spark):
    df = spark.createDataFrame([("a", 1), ("a", 2), ("b", 3), (None, 4)], "k string, v int")
    frames = {"all": df, "big": df.where(F.col("v") > 2), "none": df.where(F.col("v") > 9),
              "by_k": (df, "k"), "by_v": (df.where(F.col("v") < 3), "v"), "empty_by": (df.limit(0), "k")}
    sc = spark.sparkContext
    sc.setJobGroup("test-tally", "test-tally")
    try:
        got = tally(frames)
        jobs = sc.statusTracker().getJobIdsForGroup("test-tally")
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert got == {"all": 4, "big": 2, "none": 0, "by_k": {"a": 2, "b": 1, None: 1},
                   "by_v": {"1": 1, "2": 1}, "empty_by": {}}
    assert got["all"] == df.count() and got["big"] == df.where(F.col("v") > 2).count()
    assert got["by_k"] == {r["k"]: r["count"] for r in df.groupBy("k").count().collect()}
    assert len(jobs) == 1


def test_tally_of_nothing_is_empty():
    assert tally({}) == {}
