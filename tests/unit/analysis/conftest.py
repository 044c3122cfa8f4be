"""One SparkSession for the whole test session (Spark start-up costs seconds)."""

import pytest

# Tiny test histories: planning and code generation cost more than the data. These
# settings change only speed, never results (production keeps AQE, 4 partitions, codegen).
TEST_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
}


@pytest.fixture(scope="session")
def spark():
    from testbed.analysis.session import spark_session

    s = spark_session(app="testbed-tests")
    for k, v in TEST_CONF.items():
        s.conf.set(k, v)
    yield s
    s.stop()
