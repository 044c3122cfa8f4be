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



def test_class_archive_is_kept_only_when_its_jvm_exited_cleanly(tmp_path, monkeypatch):
    """The first session writes the CDS archive at exit; _finish_cds keeps it only after a clean exit
    (a truncated archive would crash the next JVM), one writer at a time, and TESTBED_SPARK_CDS=0
    turns it all off."""
    import os
    import subprocess
    import sys

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)  # the suite's probe directory (tests/conftest.py)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    arch = S.cds_archive()
    assert arch is not None and arch.parent == tmp_path / "testbed"
    conf = tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert S._cds_options()[1] == arch  # an empty conf directory: archived as usual
    S._beside(arch, "writer").unlink()
    (conf / "spark-env.sh").write_text("")
    # a non-empty one is on the class path and the JVM cannot archive that (it would print
    # "Cannot have non-empty directory in paths" on the caller's stdout at exit): no writer
    assert S._cds_options() == ("", None)
    monkeypatch.delenv("SPARK_CONF_DIR")
    opts, writes = S._cds_options()
    assert writes == arch and f"-XX:ArchiveClassesAtExit={arch}.{os.getpid()}.tmp" in opts
    assert (arch.parent / (arch.name + ".writer")).read_text() == str(os.getpid())
    assert S._cds_options() == ("", None)  # a live writer holds it: no second writer
    tmp = arch.with_name(f"{arch.name}.{os.getpid()}.tmp")
    for code, kept in ((3, False), (0, True)):
        tmp.write_bytes(b"archive")
        proc = subprocess.Popen([sys.executable, "-c", f"import sys; sys.stdin.read(); sys.exit({code})"],
                                stdin=subprocess.PIPE)
        gone = arch.parent / "spark-cds-0000.jsa"  # the archive of a pyspark install removed since
        for suffix, text in (("", "x"), (".size", "1"), (".pyspark", str(tmp_path / "no-such-venv"))):
            (arch.parent / (gone.name + suffix)).write_text(text)
        S._finish_cds(proc, arch)  # closes its stdin (the gateway's signal to exit) and waits
        assert arch.is_file() is kept and not tmp.exists()
        assert gone.exists() is not kept  # dropped once an archive is written
        assert not kept or not list(arch.parent.glob("spark-cds-0000.jsa*"))
        assert not (arch.parent / (arch.name + ".writer")).exists()
    opts, writes = S._cds_options()
    assert writes is None and opts.startswith(f"-XX:SharedArchiveFile={arch} ")
    arch.chmod(0o644)
    arch.write_bytes(b"archiv")  # not the size its clean exit recorded: deleted, written anew
    assert S._cds_options()[1] == arch and not arch.exists()
    (arch.parent / (arch.name + ".writer")).write_text("999999999")  # a writer that died
    assert S._cds_options()[1] == arch  # taken over
    monkeypatch.setenv(S.CDS_ENV, "0")
    assert S.cds_archive() is None and S._cds_options() == ("", None)


@pytest.mark.spark  # a session in a subprocess
def test_a_class_archive_the_jvm_refuses_is_dropped_and_the_session_starts(tmp_path):
    """If the JVM will not start with the archive, it is deleted and the session starts without it:
    in a fresh process (this one has its session), the archive a junk file the JVM must map."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    code = ("from testbed.analysis import session as S; a = S.cds_archive(); a.parent.mkdir(parents=True); "
            "a.write_bytes(b'junk' * 1024); "
            "S._cds_options = lambda: (f'-XX:SharedArchiveFile={a} -Xshare:on', None); "
            "s = S.spark_session(conf=S.SMALL_DATA_CONF); print(s.range(3).count(), a.exists()); s.stop()")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["3", "False"]
