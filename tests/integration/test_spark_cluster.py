"""A real Spark standalone cluster on loopback: a master and two workers from pyspark's own distribution.

The same synthetic runs are analysed with ``testbed analyze --spark-master spark://…`` and in local
mode (each in its own process: one SparkContext per JVM), and a figure's multi-run read
(:func:`testbed.analysis.batch.read_runs`) is computed on both. Verdicts, metrics (the figures' data)
and the multi-run figure data must be identical. The cluster's processes are stopped by the fixture
whatever happens (process-group kill). In CI a skip fails the run (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.testing.synthetic import make_run_dir

pytestmark = [pytest.mark.spark, pytest.mark.spark_cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
WORKER_MEMORY = "512m"
EXECUTOR_MEMORY = "480m"  # Spark refuses executors under 450 MiB


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 15
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:  # the group too: executors the worker launched
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


@pytest.fixture
def cluster(tmp_path):
    """spark://127.0.0.1:PORT with two 1-core, 512 MiB workers; yields (url, log dir)."""
    home = _spark_home()
    spark_class = home / "bin" / "spark-class"
    if not spark_class.exists() or shutil.which("java") is None:
        pytest.skip("needs pyspark's bin/spark-class and java")
    logs = tmp_path / "cluster-logs"
    logs.mkdir()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(logs), "SPARK_WORKER_DIR": str(tmp_path / "work"),
           "SPARK_DAEMON_MEMORY": "256m"}
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> Path:
        log = logs / f"{name}.log"
        with open(log, "wb") as f:
            procs.append(subprocess.Popen([str(spark_class), *args], stdout=f, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True, cwd=tmp_path))
        return log

    try:
        master_log = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", str(port), "--webui-port", str(_free_port()))
        for i in range(2):
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                  "--cores", "1", "--memory", WORKER_MEMORY, "--webui-port", str(_free_port()),
                  "--work-dir", str(tmp_path / f"work{i}"))
        deadline = time.monotonic() + 240
        while master_log.read_text(errors="replace").count("Registering worker") < 2:
            dead = [p.args[1] for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                tails = {p.name: p.read_text(errors="replace")[-1500:] for p in logs.iterdir()}
                pytest.fail(f"cluster did not come up (exited: {dead}): {tails}")
            time.sleep(0.5)
        yield url, logs
    finally:
        _stop(procs)
        assert all(p.poll() is not None for p in procs)


FIGURE_SNIPPET = """
import json, sys
from pyspark.sql import functions as F
from testbed.analysis.batch import read_runs
from testbed.analysis.session import spark_session
spark = spark_session(sys.argv[1] or None, conf=dict(kv.split("=", 1) for kv in sys.argv[3:]))
d = read_runs(spark, sys.argv[2].split(","), "deliver")
rows = (d.groupBy("run_id").agg(F.count("*").alias("n"), F.round(F.avg("hops"), 6).alias("hops"),
        F.min("t_rel_s").alias("first_s")).orderBy("run_id").collect())
print(json.dumps([r.asDict() for r in rows]))
spark.stop()
"""


def _py(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TESTBED_SPARK_MASTER", None)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=REPO)


def _outcome(run: Path) -> tuple[list, dict]:
    checks = json.loads((run / "analysis" / "checks.json").read_text())
    verdicts = [(c["name"], c["passed"], c["violations"], c["attributed"], c["examples"]) for c in checks["checks"]]
    metrics = json.loads((run / "analysis" / "metrics.json").read_text())
    return verdicts, metrics


def test_cluster_analysis_and_multi_run_figure_match_local_mode(cluster, tmp_path):
    url, logs = cluster
    a = make_run_dir(tmp_path / "a", run_id="run-a", duration_s=12, publishers=2, subscribers=2, rate_per_s=5,
                     stall=(4.0, 6.0), duplicate=True)
    b = make_run_dir(tmp_path / "b", run_id="run-b", lost=True, torn=False, unknown_event=False, stall=(8.0, 10.0))
    local = {s.path.name: tmp_path / "local" / s.path.name for s in (a, b)}
    for s in (a, b):
        shutil.copytree(s.path, local[s.path.name])
    conf = ["--spark-conf", f"spark.executor.memory={EXECUTOR_MEMORY}"]

    on_cluster = _py("-m", "testbed.cli", "analyze", str(a.path), str(b.path), "--spark-master", url, *conf)
    assert on_cluster.returncode == 3, on_cluster.stderr[-3000:]  # 3: analysed, some check failed (as injected)
    on_local = _py("-m", "testbed.cli", "analyze", *map(str, local.values()))
    assert on_local.returncode == 3, on_local.stderr[-3000:]
    # the work really ran on the cluster's executors
    assert list(logs.parent.glob("work*/app-*/*/stderr")), "no executor ran on the workers"

    for s in (a, b):
        v_cluster, m_cluster = _outcome(s.path)
        v_local, m_local = _outcome(local[s.path.name])
        assert v_cluster == v_local
        assert m_cluster == m_local
    verdicts = dict((n, ok) for n, ok, *_ in _outcome(a.path)[0])
    # (+ the runtime-wide control_provenance and node_lives checks every protocol gets)
    assert verdicts == {"no_duplicates": False, "filter_match": True, "fifo": True, "completeness": True,
                        "control_provenance": True, "node_lives": True}
    assert dict((n, ok) for n, ok, *_ in _outcome(b.path)[0]) == {
        "no_duplicates": True, "filter_match": True, "fifo": True, "completeness": False,
        "control_provenance": True, "node_lives": True}

    # a figure's multi-run read: one scan over both runs' Parquet, on the cluster and locally
    fig_cluster = _py("-c", FIGURE_SNIPPET, url, f"{a.path},{b.path}", f"spark.executor.memory={EXECUTOR_MEMORY}")
    assert fig_cluster.returncode == 0, fig_cluster.stderr[-3000:]
    fig_local = _py("-c", FIGURE_SNIPPET, "", ",".join(map(str, local.values())))
    assert fig_local.returncode == 0, fig_local.stderr[-3000:]
    got = json.loads(fig_cluster.stdout.strip().splitlines()[-1])
    assert got == json.loads(fig_local.stdout.strip().splitlines()[-1])
    assert [r["run_id"] for r in got] == ["run-a", "run-b"]
    assert [r["n"] for r in got] == [a.deliveries, b.deliveries]


def test_unreachable_master_is_one_line_error(tmp_path):
    syn = make_run_dir(tmp_path, duration_s=4, rate_per_s=2, stall=None)
    r = _py("-m", "testbed.cli", "analyze", str(syn.path), "--spark-master", f"spark://127.0.0.1:{_free_port()}",
            timeout=120)
    assert r.returncode == 1
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert err[-1].startswith("error: spark master spark://127.0.0.1:") and "cannot be reached" in err[-1]
    assert "Traceback" not in r.stderr
