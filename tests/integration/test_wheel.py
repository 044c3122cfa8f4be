"""A user who installs the built wheel (not this editable checkout) can reproduce every paper.

1. The wheel is built with ``pip wheel --no-deps`` (build isolation: setuptools from PyPI) from a
   snapshot of the checkout; it holds every file of the checkout's ``testbed/`` tree, so every
   protocol's ``topologies/`` folder (package data), and nothing else of ``testbed/``.
2. It is installed with pip into a fresh virtualenv outside the checkout that sees the shared
   virtualenv's third-party packages through a ``.pth`` file holding only that directory's path
   (a plain path line: the shared venv's own ``.pth`` files are not processed, so its editable
   finder for ``testbed`` stays inactive; the test checks it). Every subprocess runs with
   cwd outside the checkout and without ``PYTHONPATH`` / ``TESTBED_TOPOLOGIES``.
3. From that venv ``testbed validate`` accepts every shipped ``*.yaml`` of the installed package (the
   CLI's main, one interpreter per protocol for its files).
4. From that venv each paper is reproduced at quick scale on its smallest point (``PAPERS``):
   exit 0, ``<out>/<paper>/report.md`` and ``<out>/REPORT.md`` written, every run read its
   topology from the installed package.

Measured wall time of this file on the 2-core machine, shared with other test suites: 2 min 53 s
at load 4-10 (build + install 4 s, validation of 53 files 25 s, the reproductions 144 s in two
lanes); 9.6 and 12.2 min at load 17-32. The reproductions alone, one after the other at load 2-4,
took 3.6 min (gryphon 86 s, mobility 70 s, transactions 36 s, ordering 22 s), so they run in two
lanes of about equal length (gryphon then ordering; mobility then transactions), each paper with
its own ``--out`` (a reproduction rewrites ``<out>/REPORT.md`` from every ``<out>/*/result.json``,
not atomically) and one shared ``--runs-dir`` (made for that: ports and the active-run list are
under file locks).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1200)]

CHECKOUT = Path(__file__).resolve().parents[2]
BUILTIN = ("ordering", "gryphon", "transactions", "mobility", "echo")

# paper -> (figure, --points, the figure's grid, its entries): the smallest point of each paper
# that still makes a real run (or a computed entry for a computed figure). --points filters the
# points of every grid the figures need plus the paper's check grids (always run); it cannot cut
# the repeats (3 seeds at quick scale).
PAPERS = {
    # Fig 7 (timestamp size) is computed from the subscriptions the clients draw: k=1 topic per
    # client at shape 0.901 is its cheapest point (3 computed entries, ~1 s). ens=reliable keeps
    # one of the two check runs (smoke.yaml, 6 s): a real ordering run from the installed package.
    "ordering": (7, "shape=0.901,k=1,ens=reliable", "fig7", 3),
    # Figs 4-5 at 1000 subscribers, best-effort: 3 runs of 8 s (Figs 6-8 run 16-28 s and have no
    # points to filter); the per-run analysis makes this the longest paper (~85 s).
    "gryphon": (4, "subscribers=1000,mode=best-effort", "fig4-5", 3),
    # Fig 5's base grid on S-TX alone: 3 runs of 10 transactions, two at a time (the filter also
    # drops the BL-WAIT wait grid, variant=blwait, whose computed entries search the wait).
    "transactions": (5, "variant=stx", "base", 3),
    # Fig 11 (one covered workload's root moves) with reconfiguration: 3 runs of 14 s plus the
    # reconfiguration check run (10 s), two at a time. Every mobility figure run lasts 14 s; Fig 11
    # has a single point per movement, as Fig 8 does.
    "mobility": (11, "movement=reconfiguration", "root", 3),
}
LANES = (("gryphon", "ordering"), ("mobility", "transactions"))

# what must not leak from the caller into the user's environment
_DROP = ("PYTHONPATH", "PYTHONHOME", "TESTBED_TOPOLOGIES", "TESTBED_EXPERIMENTS", "TESTBED_RUNS", "VIRTUAL_ENV")
# not part of the source: the snapshot leaves them out (top level of the checkout)
_NOT_SOURCE = {".git", ".venv", "build", "dist", "runs", "out", "reproductions", "explorations", ".pytest_cache",
               ".import_linter_cache", "spark-warehouse", "metastore_db", "derby.log"}


def _topology_files(root: Path) -> set[str]:
    """Every file under ``testbed/protocols/<p>/topologies/`` of ``root`` (a checkout), as wheel paths."""
    out = set()
    for p in BUILTIN:
        d = root / "testbed" / "protocols" / p / "topologies"
        assert d.is_dir(), d
        out |= {f.relative_to(root).as_posix() for f in d.rglob("*") if f.is_file() and "__pycache__" not in f.parts}
    return out


def _package_files(root: Path) -> set[str]:
    return {f.relative_to(root).as_posix() for f in (root / "testbed").rglob("*")
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc"}


def _snapshot(dst: Path) -> Path:
    """A copy of the checkout's source. ``pip wheel <dir>`` builds in place: setuptools writes
    ``build/`` and ``testbed.egg-info/`` into the directory and reuses ``build/lib`` across builds
    (a file deleted from the source would still ship), and two builds of one tree at once race; the
    snapshot keeps the checkout untouched and the wheel exactly what the source holds."""
    def ignore(d: str, names: list[str]) -> set[str]:
        top = Path(d).resolve() == CHECKOUT
        return {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".egg-info"))
                or (top and n in _NOT_SOURCE)}

    shutil.copytree(CHECKOUT, dst, symlinks=True, ignore=ignore)
    return dst


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> Path:
    t = tmp_path_factory.mktemp("wheel")
    assert not t.resolve().is_relative_to(CHECKOUT)
    return t


@pytest.fixture(scope="module")
def wheel(tmp) -> dict:
    src = _snapshot(tmp / "src")
    out = tmp / "dist"
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
                       cwd=tmp, env=_clean_env(dict(os.environ)), capture_output=True, text=True, timeout=600,
                       check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (whl,) = out.glob("testbed-*.whl")
    return {"path": whl, "src": src}


def _clean_env(env: dict[str, str]) -> dict[str, str]:
    for k in _DROP:
        env.pop(k, None)
    return env


@pytest.fixture(scope="module")
def venv(tmp, wheel) -> dict:
    """A fresh venv with the wheel installed and the shared venv's third-party packages visible."""
    root = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, cwd=tmp)
    py = root / "bin" / "python"
    env = _clean_env(dict(os.environ))
    env["VIRTUAL_ENV"] = str(root)
    env["PATH"] = os.pathsep.join([str(root / "bin"), env.get("PATH", "")])
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True, env=env, cwd=tmp).stdout.strip())
    # install first, so pip sees no testbed at all (not even the shared venv's editable one)
    p = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                        str(wheel["path"])], cwd=tmp, env=env, capture_output=True, text=True, timeout=300, check=False)
    if p.returncode != 0:  # a pip without --python: a wheel is a zip, its dist-info included
        with zipfile.ZipFile(wheel["path"]) as z:
            z.extractall(purelib)
        (dist_info,) = purelib.glob("testbed-*.dist-info")
        (dist_info / "INSTALLER").write_text("test_wheel\n")
    shared = sysconfig.get_paths()["purelib"]
    (purelib / "_shared_venv.pth").write_text(shared + "\n")  # a plain path: its .pth files are not run
    return {"root": root, "py": py, "purelib": purelib, "shared": Path(shared), "env": env}


def _run(venv: dict, args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv["py"]), *args], env=venv["env"], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_the_wheel_holds_every_papers_topologies_and_the_whole_package(wheel):
    with zipfile.ZipFile(wheel["path"]) as z:
        names = set(z.namelist())
    missing = sorted(_topology_files(CHECKOUT) - names)
    assert not missing, f"topology files of the checkout not in the wheel: {missing}"
    assert "testbed/protocols/ordering/topologies/liveness/three-sites.yaml" in names  # nested folders too
    assert "testbed/providers/ansible/playbooks/start.yml" in names  # --provider ansible from a wheel
    in_src = _package_files(wheel["src"])
    assert not sorted(in_src - names), f"files of testbed/ not in the wheel: {sorted(in_src - names)}"
    extra = sorted(n for n in names if n.startswith("testbed/") and n not in in_src)
    assert not extra, f"files in the wheel that the source does not have: {extra}"
    dist = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel["path"]) as z:
        assert "testbed = testbed.cli:main" in z.read(dist).decode()


PROBE = """
import json, sys
import testbed, testbed.cli, testbed.experiments
papers = sorted(testbed.experiments.papers())
mods = {n: getattr(m, "__file__", None) for n, m in list(sys.modules.items()) if n == "testbed" or n.startswith("testbed.")}
import pydantic, pyspark
print(json.dumps({"testbed": testbed.__file__, "pydantic": pydantic.__file__, "pyspark": pyspark.__file__,
                  "modules": mods, "papers": papers, "path": sys.path,
                  "editable": [n for n in sys.modules if "__editable__" in n],
                  "meta_path": [f.__module__ + "." + getattr(f, "__qualname__", type(f).__qualname__)
                                for f in sys.meta_path]}))
"""


def test_the_installed_package_is_imported_not_the_checkout(tmp, venv):
    p = _run(venv, ["-c", PROBE], cwd=tmp)
    assert p.returncode == 0, p.stderr[-3000:]
    d = json.loads(p.stdout)
    purelib = venv["purelib"].resolve()
    assert Path(d["testbed"]).resolve().is_relative_to(purelib), d["testbed"]
    outside = {n: f for n, f in d["modules"].items() if f and not Path(f).resolve().is_relative_to(purelib)}
    assert not outside, f"testbed modules not from the installed wheel: {outside}"
    # the third-party packages come from the shared venv, through the plain path line
    assert str(venv["shared"]) in d["path"] and Path(d["pydantic"]).resolve().is_relative_to(venv["shared"].resolve())
    # ... and its .pth files were not processed: no editable finder of testbed is active
    assert not d["editable"] and not any("editable" in f.lower() for f in d["meta_path"]), d
    assert not any(Path(x).resolve() == CHECKOUT for x in d["path"] if x), d["path"]
    assert {"ordering", "gryphon", "transactions", "mobility"} <= set(d["papers"]), d["papers"]


def test_every_shipped_topology_validates_from_the_installed_package(tmp, venv):
    installed = venv["purelib"] / "testbed" / "protocols"
    files = sorted(installed.glob("*/topologies/**/*.yaml"))
    # the same files the checkout ships (so nothing is left out by looking only at the install)
    shipped = {f for f in _topology_files(CHECKOUT) if f.endswith(".yaml")}
    assert {f.relative_to(venv["purelib"]).as_posix() for f in files} == shipped
    # No file needs --set: every template variable has a default or comes from the file's own
    # ``sweep:`` (fig4-5.yaml's subscribers and mode, the *-quick/-paper sweeps), which validate expands
    # like tests/unit/topology/test_topology_shipped.py's plans(path) with no variables, and as
    # testbed/experiments/topologies.py hands the files to the runner.
    cwd = tmp / "validate"
    cwd.mkdir()
    # `testbed validate FILE` (the CLI's own main, as the console script calls it) for every file of
    # one protocol in one interpreter of the venv, a fresh one per protocol: 5 interpreter start-ups,
    # not one per file (issue #26: each start-up imports the package, ~0.4 CPU s)
    by_protocol: dict[str, list[Path]] = {}
    for f in files:
        by_protocol.setdefault(f.relative_to(installed).parts[0], []).append(f)

    def validate(fs: list[Path]) -> tuple[list[Path], subprocess.CompletedProcess]:
        return fs, _run(venv, ["-c", VALIDATE, *map(str, fs)], cwd=cwd, timeout=300)

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(validate, by_protocol.values()))
    failed = {}
    for fs, p in results:
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
        codes = json.loads(p.stdout.strip().splitlines()[-1])
        assert sorted(codes) == sorted(map(str, fs)), codes  # every file was validated
        failed.update({str(Path(f).relative_to(installed)): (rc, out) for f, (rc, out) in codes.items() if rc != 0})
    assert not failed, failed


# `testbed validate` on each file given, in this interpreter: {file: [exit code, its output's tail]}
# as the last line of stdout (the CLI prints the resolved plans; they are captured per file)
VALIDATE = """
import contextlib, io, json, sys
from testbed.cli import main
codes = {}
for f in sys.argv[1:]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            rc = main(["validate", f])
        except SystemExit as e:
            rc = e.code
    codes[f] = [rc, buf.getvalue()[-800:]]
print(json.dumps(codes))
"""


@pytest.fixture(scope="module")
def reproduced(tmp, venv) -> dict:
    """Every paper reproduced from the venv on its smallest point, in two lanes."""
    runs = tmp / "runs"
    cwd = tmp / "repro-cwd"
    cwd.mkdir()

    def one(paper: str) -> tuple[str, subprocess.CompletedProcess]:
        fig, points, _, _ = PAPERS[paper]
        return paper, _run(venv, ["-m", "testbed.cli", "--runs-dir", str(runs), "reproduce", paper, "--scale", "quick",
                                  "--fig", str(fig), "--points", points, "--out", str(tmp / f"repro-{paper}")],
                           cwd=cwd, timeout=900)

    def lane(papers: tuple[str, ...]) -> list[tuple[str, subprocess.CompletedProcess]]:
        return [one(p) for p in papers]

    try:
        with ThreadPoolExecutor(max_workers=len(LANES)) as pool:
            done = dict(r for rs in pool.map(lane, LANES) for r in rs)
    finally:  # nothing left up, whatever happened
        _run(venv, ["-m", "testbed.cli", "--runs-dir", str(runs), "down", "--all"], cwd=cwd, timeout=300)
    return {"procs": done, "tmp": tmp}


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_each_paper_reproduces_from_the_installed_package(reproduced, venv, paper):
    p = reproduced["procs"][paper]
    assert p.returncode == 0, f"{paper}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    out = reproduced["tmp"] / f"repro-{paper}"
    fig, _, grid, n = PAPERS[paper]
    assert (out / paper / "report.md").is_file()
    assert f"`{paper}`" in (out / paper / "report.md").read_text()
    assert (out / "REPORT.md").is_file() and (out / "index.html").is_file()
    result = json.loads((out / paper / "result.json").read_text())
    assert result["figures"] == [fig] and result["stats"]["ran"] >= 1
    index = json.loads((out / paper / "index-quick.json").read_text())
    mine = [e for e in index.values() if e["grid"] == grid]
    assert len(mine) == n, index
    made = [e for e in index.values() if e.get("run")]
    assert made or all("row" in e for e in mine), index
    for e in made:  # every run was made from the topology files of the installed package
        m = json.loads((out / paper / e["run"] / "manifest.json").read_text())  # relative to the index
        assert m["status"] in ("collected", "analyzed"), (e["run"], m["status"])
        assert Path(m["topology_path"]).resolve().is_relative_to(venv["purelib"].resolve()), m["topology_path"]
