"""One local SparkSession per analysis: cheap to start, quiet, UTC, private scratch space.

``spark_session()`` is the only place the analysis builds a session. Spark's own
log goes to ``<scratch>/spark.log`` (log4j2 at WARN), never to the terminal.
If a session is already active in this process (a test fixture, a notebook),
it is returned as is: Spark allows one per JVM and its settings cannot change.

With a cluster master (``--spark-master spark://host:7077``) the executors read
the logs and write the Parquet themselves, so the run directory must be on a
filesystem every executor sees at the same path (NFS, or copy it there first).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"
SHUFFLE_PARTITIONS = 4

# For tiny inputs (tests, quick looks) planning, code generation and JIT cost more than the
# data: these change speed only, never results. Pass as spark_session(conf=..., java_opts=...).
SMALL_DATA_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
}
SMALL_DATA_JAVA_OPTS = "-XX:+UseSerialGC"
# One short-lived JVM per analysis: C1-only JIT halves the cold start of the first jobs (measured:
# ingest of the smoke run 21 s -> 10 s) and costs little on run-sized data. For very large runs put
# TESTBED_SPARK_JAVA_OPTS="-XX:TieredStopAtLevel=4" (appended last, so it wins) to get C2 back.
DEFAULT_JAVA_OPTS = "-XX:TieredStopAtLevel=1"

_LOG4J2 = """\
status = error
name = testbed-analysis
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %p %c{{1}}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.spark.name = org.apache.spark
logger.spark.level = warn
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""


def _scratch_dir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="testbed-spark-"))
    atexit.register(shutil.rmtree, d, True)
    return d


def spark_session(master: str | None = None, app: str = "testbed", *,
                  conf: dict[str, str] | None = None, java_opts: str = "") -> SparkSession:
    """A SparkSession for one analysis (``master`` None = ``local[2]``; else e.g. ``spark://h:7077``).

    ``conf`` overrides Spark settings; ``java_opts`` is appended to the driver JVM's options
    (``TESTBED_SPARK_JAVA_OPTS`` too), e.g. ``-XX:TieredStopAtLevel=1`` for short test sessions.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    scratch = _scratch_dir()
    log4j = scratch / "log4j2.properties"
    log4j.write_text(_LOG4J2.format(log=scratch / "spark.log"))
    extra = " ".join(x for x in (DEFAULT_JAVA_OPTS, java_opts, os.environ.get("TESTBED_SPARK_JAVA_OPTS", "")) if x)
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j} -Dlog4j.configurationFile=file:{log4j} {extra}".strip()
    # pyspark workers must run this interpreter (the venv), not whatever `python3` is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        .config("spark.local.dir", str(scratch / "local"))
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", os.environ.get("TESTBED_SPARK_DRIVER_MEMORY", "2g"))
    )
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
