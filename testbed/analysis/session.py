"""One local SparkSession per analysis: cheap to start, quiet, UTC, private scratch space.

``spark_session()`` is the only place the analysis builds a session. Spark's own
log goes to ``<scratch>/spark.log`` (log4j2 at WARN), never to the terminal.
If a session is already active in this process (a test fixture, a notebook),
it is returned as is: Spark allows one per JVM and its settings cannot change.

With a cluster master (``--spark-master spark://host:7077``) the driver converts
the logs to Parquet (pyarrow, ``testbed.analysis.ingest``) and the executors read
that Parquet, so the run directory must be on a filesystem every executor sees at
the same path (NFS, or copy it there first).

The master is, in order: the ``master`` argument, :func:`configure` (the CLI's
``--spark-master``), ``TESTBED_SPARK_MASTER``, else ``local[2]``. Extra Spark
settings come from :func:`configure` (the CLI's repeatable ``--spark-conf k=v``)
and the ``conf`` argument (which wins). A ``spark://`` master that does not
accept a TCP connection is a one-line :class:`AnalysisError`, before any JVM starts.
"""

from __future__ import annotations

import atexit
import math
import os
import shutil
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from pyspark.sql import SparkSession

from testbed.errors import AnalysisError
from testbed.runs import scratch

DEFAULT_MASTER = "local[2]"
MASTER_ENV = "TESTBED_SPARK_MASTER"
SHUFFLE_PARTITIONS = 4
# Shuffle partitions follow the input (see shuffle_partitions_for; AQE coalesces small ones further).
BYTES_PER_SHUFFLE_PARTITION = 48 << 20
SMALL_INPUT_BYTES = 16 << 20
FILE_SPLITS_PER_CORE = 4
# Process-wide defaults set by the CLI (--spark-master, --spark-conf); see configure().
_CONFIGURED: dict = {"master": None, "conf": {}}

# For tiny inputs (tests, quick looks) planning, code generation and JIT cost more than the
# data: these change speed only, never results. Pass as spark_session(conf=..., java_opts=...).
SMALL_DATA_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    # no Java code generated and compiled (Janino) for projections, predicates and orderings: Spark's
    # interpreted versions instead. On the unit tests' histories this cut the JVM CPU time of the
    # history checks by about 30 % (docs/testing.md, benchmarks/bench_check_jobs.py)
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
SMALL_DATA_JAVA_OPTS = "-XX:+UseSerialGC"
# One short-lived JVM per analysis: C1-only JIT halves the cold start of the first jobs (measured:
# ingest of the smoke run 21 s -> 10 s) and costs little on run-sized data. For very large runs put
# TESTBED_SPARK_JAVA_OPTS="-XX:TieredStopAtLevel=4" (appended last, so it wins) to get C2 back.
# C1-only JVMs get a 48 MB code cache; a long session (a batch of runs, a 1M-event benchmark) filled
# it on the base code ("CodeCache is full. Compiler has been disabled.") and ran interpreted from then on.
DEFAULT_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# Measured under load on the 1.17M-event benchmark (docs/benchmarks.md): C2 halves the ingest
# (45 s vs 101 s) but the many short check queries got slower (205 s vs 144 s in all), so C1 stays.

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


# Class-data sharing (CDS): the driver JVM maps the classes an earlier session loaded from an archive
# instead of loading them again. Measured on the 1.17M-event benchmark: session start-up 4.7 s ->
# 2.4 s, the analysis 12.2 s -> 11.4 s (docs/benchmarks.md). The first session on a machine writes
# the archive when its JVM exits (once per pyspark and Java install, about 180 MB under
# ~/.cache/testbed); TESTBED_SPARK_CDS=0 turns it off.
CDS_ENV = "TESTBED_SPARK_CDS"
_CDS_QUIET = "-Xlog:cds*=off -Xlog:class+path*=off"  # a stale archive is ignored, not reported


def _beside(arch: Path, what: str) -> Path:
    """A record kept next to the archive: ``size`` (what a clean exit wrote), ``writer`` (the pid
    writing it), ``pyspark`` (the install it belongs to)."""
    return arch.with_name(f"{arch.name}.{what}")


def cds_archive() -> Path | None:
    """Where this pyspark and Java's class archive is (made or not), or None when turned off."""
    import hashlib

    import pyspark

    if os.environ.get(CDS_ENV, "1") == "0":
        return None
    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if os.environ.get("JAVA_HOME") \
        else shutil.which("java")
    if not java:
        return None
    java = os.path.realpath(java)
    key = f"{pyspark.__version__}|{os.path.dirname(pyspark.__file__)}|{java}|{os.stat(java).st_mtime_ns}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "testbed"
    return cache / f"spark-cds-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def _cds_options() -> tuple[str, Path | None]:
    """(driver JVM options, the archive this JVM writes at exit or None)."""
    arch = cds_archive()
    if arch is None:
        return "", None
    size = _beside(arch, "size")
    if arch.is_file():
        try:
            if int(size.read_text()) == arch.stat().st_size:
                return f"-XX:SharedArchiveFile={arch} {_CDS_QUIET}", None
        except (OSError, ValueError):
            pass
        arch.unlink(missing_ok=True)  # not the archive a clean exit left: never map it
    if _conf_dir_in_use():
        # spark-class puts the Spark conf directory on the class path; the JVM cannot archive a class
        # path with a non-empty directory and says so on stdout at exit ("Cannot have non-empty
        # directory in paths"), in the middle of the caller's output: no archive written then
        return "", None
    lock = _beside(arch, "writer")  # one writer at a time: the pid of the session writing it
    try:
        arch.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                os.kill(int(lock.read_text().strip() or 0), 0)
                return "", None  # another session is writing it
            except (ProcessLookupError, ValueError):
                lock.unlink(missing_ok=True)  # its writer is gone
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except PermissionError:
                return "", None
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
    except OSError:
        return "", None
    return f"-XX:ArchiveClassesAtExit={_beside(arch, f'{os.getpid()}.tmp')} {_CDS_QUIET}", arch


def _conf_dir_in_use() -> bool:
    """Whether the driver's class path will hold a non-empty Spark conf directory ($SPARK_CONF_DIR,
    else $SPARK_HOME/conf)."""
    d = os.environ.get("SPARK_CONF_DIR") or (os.path.join(os.environ["SPARK_HOME"], "conf")
                                             if os.environ.get("SPARK_HOME") else "")
    if not d:
        import pyspark

        d = os.path.join(os.path.dirname(pyspark.__file__), "conf")
    try:
        return os.path.isdir(d) and any(os.scandir(d))
    except OSError:
        return False


def _finish_cds(proc, arch: Path) -> None:
    """At exit: let the JVM exit (it writes its archive then) and keep the archive only if it did so
    cleanly (a truncated archive would crash the next JVM)."""
    tmp = _beside(arch, f"{os.getpid()}.tmp")
    try:
        if proc.poll() is None:
            try:
                proc.stdin.close()  # the gateway exits on EOF
            except OSError:
                pass
            proc.wait(timeout=120)
        if proc.returncode == 0 and tmp.is_file() and tmp.stat().st_size > 0 and not arch.exists():
            _beside(arch, "size").write_text(str(tmp.stat().st_size))
            import pyspark

            _beside(arch, "pyspark").write_text(os.path.dirname(pyspark.__file__))
            os.replace(tmp, arch)
            _drop_orphan_archives(arch.parent)
    except Exception:  # noqa: BLE001 - a cache: never fail an exit for it
        pass
    finally:
        tmp.unlink(missing_ok=True)
        _beside(arch, "writer").unlink(missing_ok=True)


def _drop_orphan_archives(cache: Path) -> None:
    """Delete the archives (and their records) of pyspark installs that are gone (a removed
    virtualenv or clone): about 180 MB each, and nothing could use them."""
    for rec in cache.glob("spark-cds-*.jsa.pyspark"):
        try:
            if os.path.isdir(rec.read_text().strip()):
                continue
        except OSError:
            continue
        base = rec.name[: -len(".pyspark")]
        for suffix in ("", ".size", ".pyspark"):
            (cache / (base + suffix)).unlink(missing_ok=True)


def _scratch_dir() -> Path:
    d = scratch.make("testbed-spark")  # its pid in the name: `testbed wipe` finds it if killed
    atexit.register(shutil.rmtree, d, True)
    return d


def configure(master: str | None = None, conf: dict[str, str] | None = None) -> None:
    """Process-wide defaults for every later :func:`spark_session` (the CLI's --spark-master/--spark-conf)."""
    _CONFIGURED["master"] = master or None
    _CONFIGURED["conf"] = dict(conf or {})


def parse_conf(items: list[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` (``--spark-conf``, repeatable) -> dict; a one-line error for a malformed item."""
    out = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep or not k.strip() or not k.strip().startswith("spark."):
            raise AnalysisError(f"--spark-conf {it!r}: expected spark.KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


def resolve_master(master: str | None = None) -> str:
    """The master URL a session would use (argument > configure() > TESTBED_SPARK_MASTER > local[2])."""
    return master or _CONFIGURED["master"] or os.environ.get(MASTER_ENV) or DEFAULT_MASTER


def check_master(master: str, timeout_s: float = 5.0) -> None:
    """For ``spark://host:port[,host2:port2]``: AnalysisError unless one of the masters accepts a TCP connection."""
    if not master.startswith("spark://"):
        return
    errors = []
    for hp in master[len("spark://"):].split(","):
        u = urlsplit(f"spark://{hp}")
        try:
            host, port = u.hostname, u.port or 7077
        except ValueError:
            raise AnalysisError(f"spark master {master}: not a valid URL (spark://HOST:PORT)") from None
        if not host:
            raise AnalysisError(f"spark master {master}: not a valid URL (spark://HOST:PORT)")
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as e:
            errors.append(f"{host}:{port}: {e.strerror or e}")
    raise AnalysisError(f"spark master {master} cannot be reached ({'; '.join(errors)}); "
                        f"is the master running? (--spark-master / {MASTER_ENV})")


def shuffle_partitions_for(input_bytes: int, cores: int = 2) -> int:
    """Shuffle partitions for an input of ``input_bytes`` of JSON lines on ``cores`` executor cores.

    A small input (under ``SMALL_INPUT_BYTES``) gets one (no per-task overhead); a larger one at
    least one per core (every core busy after a shuffle), one per ``BYTES_PER_SHUFFLE_PARTITION``,
    at most 8 per core.
    """
    cores = max(cores, 1)
    if input_bytes < SMALL_INPUT_BYTES:
        return 1
    return max(cores, min(8 * cores, math.ceil(input_bytes / BYTES_PER_SHUFFLE_PARTITION)))


def tune_for_input(spark: SparkSession, input_bytes: int) -> int:
    """Set the session's shuffle partitions for this input (a runtime SQL setting); returns the value.

    A value given explicitly (``--spark-conf spark.sql.shuffle.partitions=N``) is kept.
    """
    small = input_bytes < SMALL_INPUT_BYTES
    # a small run (most runs of a reproduce grid): no adaptive re-planning and no whole-stage code
    # generation, which cost more than the data (SMALL_DATA_CONF); a large one gets both back.
    # Speed only, never results; a value given with --spark-conf is kept.
    cores = spark.sparkContext.defaultParallelism
    for k, v in (("spark.sql.adaptive.enabled", "false" if small else "true"),
                 ("spark.sql.codegen.wholeStage", "false" if small else "true"),
                 # a large run's scans in FILE_SPLITS_PER_CORE pieces per core (its Parquet row groups are
                 # small: convert._ROWS_PER_FLUSH), so that no core waits for another's larger share
                 ("spark.sql.files.minPartitionNum", str(1 if small else FILE_SPLITS_PER_CORE * cores)),
                 ("spark.sql.files.openCostInBytes", str(4 << 20 if small else 1 << 20))):
        if k not in _CONFIGURED["conf"]:
            spark.conf.set(k, v)
    if "spark.sql.shuffle.partitions" in _CONFIGURED["conf"]:
        return int(_CONFIGURED["conf"]["spark.sql.shuffle.partitions"])
    n = shuffle_partitions_for(input_bytes, cores)
    spark.conf.set("spark.sql.shuffle.partitions", str(n))
    return n


def java_error(e: BaseException) -> str:
    """The useful line of a (Py4J-wrapped) Java exception: its message, without the wrapper and stack."""
    import re

    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for ln in lines:
        m = re.match(r"^:?\s*[\w.$]+(?:Exception|Error): (.+)$", ln)
        if m:
            return m.group(1)
    return lines[0] if lines else type(e).__name__


def spark_session(master: str | None = None, app: str = "testbed", *,
                  conf: dict[str, str] | None = None, java_opts: str = "") -> SparkSession:
    """A SparkSession for one analysis (master: see the module doc; e.g. ``spark://h:7077``).

    ``conf`` overrides Spark settings; ``java_opts`` is appended to the driver JVM's options
    (``TESTBED_SPARK_JAVA_OPTS`` too), e.g. ``-XX:TieredStopAtLevel=1`` for short test sessions.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    master = resolve_master(master)
    check_master(master)
    scratch = _scratch_dir()
    log4j = scratch / "log4j2.properties"
    log4j.write_text(_LOG4J2.format(log=scratch / "spark.log"))
    extra = " ".join(x for x in (DEFAULT_JAVA_OPTS, java_opts, os.environ.get("TESTBED_SPARK_JAVA_OPTS", "")) if x)
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j} -Dlog4j.configurationFile=file:{log4j} {extra}".strip()
    # pyspark workers must run this interpreter (the venv), not whatever `python3` is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    cds, writes = _cds_options() if not master.startswith("spark://") else ("", None)

    def build(driver_opts: str):
        builder = (
            SparkSession.builder.master(master)
            .appName(app)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
            .config("spark.local.dir", str(scratch / "local"))
            .config("spark.driver.extraJavaOptions", f"{java_opts} {driver_opts}".strip())
            .config("spark.executor.extraJavaOptions", java_opts)
            .config("spark.sql.adaptive.enabled", "true")
            .config("spark.driver.memory", os.environ.get("TESTBED_SPARK_DRIVER_MEMORY", "2g"))
        )
        if master.startswith("spark://") and urlsplit(master.split(",")[0]).hostname in ("127.0.0.1", "localhost"):
            # a cluster on loopback: executors must reach the driver there too
            builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        for k, v in {**_CONFIGURED["conf"], **(conf or {})}.items():
            builder = builder.config(k, v)
        return builder.getOrCreate()

    try:
        try:
            spark = build(cds)
        except Exception:  # noqa: BLE001 - an unusable class archive: drop it, start without it
            if not cds or writes is not None:
                raise
            arch = cds_archive()
            if arch is not None:
                arch.unlink(missing_ok=True)
                _beside(arch, "size").unlink(missing_ok=True)
            cds, writes = "", None
            spark = build("")
    except Exception as e:  # noqa: BLE001 - a JVM/cluster start failure is one line for the user
        if writes is not None:
            _beside(writes, "writer").unlink(missing_ok=True)
        raise AnalysisError(f"spark ({master}): cannot start a session: {java_error(e)[:300]}") from None
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    if writes is not None:
        if proc is not None:
            atexit.register(_finish_cds, proc, writes)
        else:
            _beside(writes, "writer").unlink(missing_ok=True)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def activate(spark: SparkSession) -> None:
    """Make ``spark`` the active session of the calling thread (the JVM keeps the active session
    per thread): a worker thread of a reproduction then finds the reproduction's session as
    ``getActiveSession()``, reuses it and does not stop it (``api.analyze_runs``)."""
    jvm = spark.sparkContext._jvm
    if jvm is not None:
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
