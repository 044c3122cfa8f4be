"""A protocol that lives outside this repository, found through the ``testbed.protocols``
entry point, run, checked and analysed with ``testbed run`` (real processes, real Spark).

The test writes a tiny protocol package (``extproto``: topology, nodes, events, analysis)
with the ``pyproject.toml`` a researcher would write, installs it with pip into a fresh
virtualenv that inherits this interpreter's site-packages, and runs ``testbed run`` there
(the local provider starts the nodes with the same interpreter, so they import the
package too). The shared virtualenv has no ``wheel`` package (setuptools 65 needs it to
build), so the test zips the wheel itself -- the same files ``pip wheel`` would produce
from that pyproject: the package and a dist-info with ``entry_points.txt``; pip installs it.
Then one log line is removed from a copy of the run and ``testbed analyze`` must fail the
protocol's check: the check runs for real and can fail.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(600)]

WORKTREE = Path(__file__).resolve().parents[2]

FILES = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "tb-extproto"
        version = "0.1.0"

        [project.entry-points."testbed.protocols"]
        extproto = "extproto"
    """,
    "extproto/__init__.py": '''
        """A toy external protocol: nodes send paced ticks to their neighbours."""
    ''',
    "extproto/topology.py": """
        from pydantic import Field

        from testbed.topology.schema import StrictModel


        class Params(StrictModel):
            rate_per_s: float = Field(default=20.0, gt=0)


        class Placement(StrictModel):
            pass


        class ClientParams(StrictModel):
            pass


        NODE_ROLES = {"ticker"}
        CLIENT_ROLES = set()
        ACYCLIC = None
    """,
    "extproto/nodes/__init__.py": """
        NODE_CLASSES = {("node", "ticker"): "extproto.nodes.ticker:Ticker"}
    """,
    "extproto/nodes/events.py": """
        from testbed.nodes.runtime.events import declare

        declare("ext_send", "extproto", "A tick was sent.", dst="str", n="int")
        declare("ext_recv", "extproto", "A tick was received.", src="str", n="int")
    """,
    "extproto/nodes/ticker.py": """
        from extproto.nodes import events as _events  # noqa: F401
        from testbed.nodes.runtime.api import Node
        from testbed.nodes.runtime.workload import PacedWorkload


        class Ticker(Node):
            def __init__(self, rt):
                super().__init__(rt)
                self.born = rt.wall_ns()
                self.peers = list(self.config.get("neighbors") or [])
                self.rate = float((self.config.get("params") or {}).get("rate_per_s", 20.0))
                self.workload = PacedWorkload(rt, self.tick)

            async def start_workload(self, t0_wall_ns, duration_s):
                self.workload.start(self.rate, t0_wall_ns, duration_s, born_wall_ns=self.born)

            async def stop_workload(self):
                self.workload.stop()

            def tick(self, k):
                for p in self.peers:
                    self.rt.send(p, {"k": "tick", "n": k})
                    self.rt.log("ext_send", dst=p, n=k)

            def on_message(self, src, msg):
                self.rt.log("ext_recv", src=src, n=msg["n"])
    """,
    "extproto/analysis/__init__.py": "",
    "extproto/analysis/checks.py": """
        from pyspark.sql import functions as F

        from testbed.analysis.checks import summarize


        def check_ticks_arrive(ctx):
            sent = ctx.df("ext_send").where(F.col("t_rel_s") < ctx.plan["duration_s"] - 0.5)
            recv = ctx.df("ext_recv").select(F.col("src").alias("node"), F.col("node").alias("dst"), "n")
            lost = sent.join(recv, ["node", "dst", "n"], "left_anti").select("node", "dst", "n")
            return summarize("ticks_arrive", "every tick sent (but the last 0.5 s) is received", lost,
                             order=["node", "n"])


        CHECKS = [check_ticks_arrive]
    """,
}

TOPOLOGY = """
    version: 1
    name: ext
    protocol: extproto
    duration: 3s
    seed: 1
    sites:
      s1: {}
    nodes:
      t1: {role: ticker, site: s1}
      t2: {role: ticker, site: s1, neighbors: [t1]}
      t3: {role: ticker, site: s1, neighbors: [t2]}
    params:
      rate_per_s: 20
    links:
      default: {delay: 5ms}
"""


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(src: Path, out: Path) -> Path:
    """The wheel of the package under ``src`` (what ``pip wheel src`` would produce)."""
    dist = "tb_extproto-0.1.0.dist-info"
    files = {str(p.relative_to(src)): p.read_bytes() for p in sorted((src / "extproto").rglob("*.py"))}
    files[f"{dist}/METADATA"] = b"Metadata-Version: 2.1\nName: tb-extproto\nVersion: 0.1.0\n"
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{dist}/entry_points.txt"] = b"[testbed.protocols]\nextproto = extproto\n"
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in files.items()) + f"{dist}/RECORD,,\n"
    files[f"{dist}/RECORD"] = record.encode()
    whl = out / "tb_extproto-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
    return whl


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh virtualenv inheriting this interpreter's site-packages, with extproto installed."""
    tmp = tmp_path_factory.mktemp("ext")
    src = tmp / "src"
    for name, text in FILES.items():
        p = src / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip())
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    inherited = sysconfig.get_paths()["purelib"]
    Path(site, "_inherit_shared_venv.pth").write_text(f"import site; site.addsitedir({inherited!r})\n")
    whl = build_wheel(src, tmp)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(whl)], check=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(WORKTREE)  # this checkout's testbed, whatever the shared venv points at
    env.pop("TESTBED_RUNS", None)
    return py, env, tmp


def run_cli(venv, *args, check=True):
    py, env, tmp = venv
    return subprocess.run([str(py), "-m", "testbed.cli", "--runs-dir", str(tmp / "runs"), *args], env=env,
                          cwd=tmp, capture_output=True, text=True, check=check, timeout=500)


def test_external_protocol_is_installed_run_checked_and_analysed(venv):
    py, env, tmp = venv
    # outside the venv the protocol does not exist; inside, the entry point registers it
    probe = "from testbed import registry as P; p = P.get('extproto'); print(p.source, p.nodes, p.missing())"
    out = subprocess.run([str(py), "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("entry point extproto = extproto (tb-extproto) extproto.nodes []"), out
    here = subprocess.run([sys.executable, "-c", "from testbed import registry as P; print(P.names())"],
                          env=env, capture_output=True, text=True, check=True).stdout
    assert "extproto" not in here

    topo = tmp / "ext.yaml"
    topo.write_text(textwrap.dedent(TOPOLOGY).lstrip())
    run_cli(venv, "validate", str(topo))
    r = run_cli(venv, "run", str(topo), check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run_dir = Path(next(ln.split(": ", 1)[1] for ln in r.stdout.splitlines() if ln.startswith("run directory: ")))
    cfg = json.loads((run_dir / "configs" / "t2.json").read_text())
    assert cfg["protocol"] == "extproto" and cfg["node_class"] == "extproto.nodes.ticker:Ticker"
    checks = json.loads((run_dir / "analysis" / "checks.json").read_text())["checks"]
    by = {c["name"]: c for c in checks}
    assert set(by) == {"ticks_arrive", "control_provenance", "node_lives"}  # its own check + the runtime-wide ones
    c = by["ticks_arrive"]
    assert c["passed"] and c["violations"] == 0 and by["control_provenance"]["passed"]
    assert (run_dir / "analysis" / "report.md").is_file()
    ingest = json.loads((run_dir / "analysis" / "ingest.json").read_text())
    assert ingest["events"]["ext_send"] >= 4 * 2 * 20 and ingest["events"]["ext_recv"] > 0
    assert not ingest["unknown"]

    # a broken history: drop one received tick from t1's log; the check must fail on it
    broken = tmp / "broken"
    shutil.copytree(run_dir, broken)
    shutil.rmtree(broken / "analysis")
    log = broken / "logs" / "t1.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    i = next(i for i, ln in enumerate(lines) if '"ev": "ext_recv"' in ln or '"ev":"ext_recv"' in ln)
    dropped = json.loads(lines[i])
    log.write_text("".join(lines[:i] + lines[i + 1:]))
    r2 = run_cli(venv, "analyze", str(broken), check=False)
    assert r2.returncode != 0, r2.stdout[-2000:]
    c2 = next(c for c in json.loads((broken / "analysis" / "checks.json").read_text())["checks"]
              if c["name"] == "ticks_arrive")
    assert not c2["passed"] and c2["violations"] == 1
    assert c2["examples"][0]["dst"] == "t1" and c2["examples"][0]["n"] == dropped["n"]
