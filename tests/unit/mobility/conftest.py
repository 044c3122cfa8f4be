import pytest


@pytest.fixture(scope="session")
def spark():
    from testbed.analysis.session import spark_session

    s = spark_session(app="testbed-mobility-tests")
    for k, v in {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false",
                 "spark.sql.codegen.wholeStage": "false"}.items():
        s.conf.set(k, v)
    yield s
