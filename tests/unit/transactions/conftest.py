"""One SparkSession for the whole test session (Spark start-up costs seconds)."""

import pytest


@pytest.fixture(scope="session")
def spark():
    from testbed.analysis.session import SMALL_DATA_CONF, SMALL_DATA_JAVA_OPTS, spark_session

    # an already active session (e.g. started by the integration tests' fixture) is reused as is
    s = spark_session(app="testbed-tests", conf=SMALL_DATA_CONF, java_opts=SMALL_DATA_JAVA_OPTS)
    yield s
    s.stop()
