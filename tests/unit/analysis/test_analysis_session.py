"""Session settings that need no JVM: master resolution, --spark-conf, reachability, partition sizing."""

import socket

import pytest

from testbed.analysis import session as S
from testbed.errors import AnalysisError


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.delenv(S.MASTER_ENV, raising=False)
    S.configure(None, None)
    yield
    S.configure(None, None)


def test_master_resolution_order(monkeypatch):
    assert S.resolve_master() == "local[2]"
    monkeypatch.setenv(S.MASTER_ENV, "spark://env:7077")
    assert S.resolve_master() == "spark://env:7077"
    S.configure("spark://flag:7077", {})
    assert S.resolve_master() == "spark://flag:7077"
    assert S.resolve_master("local[1]") == "local[1]"


def test_parse_conf():
    assert S.parse_conf(["spark.executor.memory=4g", " spark.a.b = x=y "]) == {
        "spark.executor.memory": "4g", "spark.a.b": "x=y"}
    for bad in ("spark.x", "=1", "foo=1"):
        with pytest.raises(AnalysisError, match="expected spark.KEY=VALUE"):
            S.parse_conf([bad])


def test_unreachable_master_is_a_one_line_error_and_a_listening_one_passes():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(AnalysisError, match=rf"spark master spark://127.0.0.1:{port} cannot be reached"):
            S.check_master(f"spark://127.0.0.1:{port}", timeout_s=2)
        s.listen()
        S.check_master(f"spark://127.0.0.1:{port}", timeout_s=2)
        S.check_master(f"spark://127.0.0.1:1,127.0.0.1:{port}", timeout_s=2)  # HA list: one is enough
    S.check_master("local[2]")  # not a standalone URL: nothing to check
    with pytest.raises(AnalysisError, match="not a valid URL"):
        S.check_master("spark://:x")


def test_shuffle_partitions_follow_the_input():
    assert S.shuffle_partitions_for(0) == 1
    assert S.shuffle_partitions_for(10 << 20) == 1  # small: one task, no overhead
    assert S.shuffle_partitions_for(32 << 20) == 2  # every core busy
    assert S.shuffle_partitions_for(32 << 20, cores=8) == 8
    assert S.shuffle_partitions_for(200 << 20) == 5
    assert S.shuffle_partitions_for(10 << 30, cores=2) == 16  # capped at 8 per core


def test_java_error_takes_the_exception_message():
    e = Exception("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
                  ": org.apache.spark.SparkIllegalArgumentException: [X] Insufficient executor memory\n"
                  "\tat org.apache.spark.SparkContext.<init>(SparkContext.scala:1)")
    assert S.java_error(e) == "[X] Insufficient executor memory"
    assert S.java_error(Exception("plain")) == "plain"

