"""The layers of docs/architecture.md, as import-linter contracts (``[tool.importlinter]`` in
pyproject.toml): they pass on the package, and they fail -- naming the import -- when one bad
import is planted in a copy of it."""

from __future__ import annotations

import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import testbed

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(testbed.__file__).resolve().parent


def _lint_imports_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    found = str(exe) if exe.exists() else shutil.which("lint-imports")
    assert found, "lint-imports not found: pip install import-linter (it is in the test extra)"
    return [found, "--no-cache"]


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([*_lint_imports_cmd(), "--config", str(root / "pyproject.toml")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(PACKAGE, dest / "testbed", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def _plant(root: Path, module: str, line: str) -> None:
    path = root / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}  # planted by test_layers\n")


def test_the_package_keeps_every_contract():
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_a_planted_import_of_api_in_nodes_breaks_the_nodes_contract(tmp_path):
    repo = _copy(tmp_path)
    assert _lint(repo).returncode == 0  # the copy itself is clean
    _plant(repo, "testbed.nodes.runtime.codec", "import testbed.api")
    r = _lint(repo)
    assert r.returncode != 0
    out = " ".join(r.stdout.split())  # the report wraps long lines
    assert "testbed.nodes imports nothing else of testbed" in out and "BROKEN" in out
    assert "testbed.nodes.runtime.codec -> testbed.api" in out


def test_a_planted_cycle_breaks_the_acyclic_contract(tmp_path):
    repo = _copy(tmp_path)
    _plant(repo, "testbed.topology.positions", "import testbed.topology.loader")
    r = _lint(repo)
    assert r.returncode != 0
    out = " ".join(r.stdout.split())
    assert "no import cycles, between modules or packages, at any depth BROKEN" in out
    assert "testbed.topology" in out and ".positions -> .loader" in out  # the cycle's breaker


def test_the_explicit_module_lists_name_every_top_level_module():
    """The ``nodes`` and ``testing`` contracts list the rest of testbed by name: a new top-level
    package must be added to them (else it could import testbed.testing, or nodes could import it)."""
    contracts = {c["id"]: c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]}
    top = {f"testbed.{m.name}" for m in pkgutil.iter_modules([str(PACKAGE)])}
    assert set(contracts["nodes"]["forbidden_modules"]) == top - {"testbed.nodes"}
    assert set(contracts["testing"]["source_modules"]) == top - {"testbed.testing"}
    assert set(contracts["generic"]["source_modules"]) == top - {"testbed.testing", "testbed.protocols"}
    base = {m for m in contracts["protocol-nodes"]["forbidden_modules"] if "*" not in m}
    assert base == top - {"testbed.nodes", "testbed.protocols"}


# one planted import per protocol-package contract: each fails, naming the import
PLANTED = [
    ("protocol-nodes", "testbed.protocols.echo.nodes.node", "import testbed.analysis.checks",
     "a protocol's nodes import only the node runtime", "testbed.protocols.echo.nodes.node -> testbed.analysis.checks"),
    ("protocol-analysis", "testbed.protocols.echo.analysis.checks", "import testbed.api",
     "a protocol's analysis reads run directories", "testbed.protocols.echo.analysis.checks -> testbed.api"),
    ("protocol-topology", "testbed.protocols.echo.topology", "import testbed.protocols.echo.analysis.checks",
     "a protocol's topology module is pure", "testbed.protocols.echo.topology -> testbed.protocols.echo.analysis.checks"),
    ("generic", "testbed.render.graph", "import testbed.protocols.ordering.nodes.placement",
     "generic code names no protocol", "testbed.render.graph -> testbed.protocols.ordering.nodes.placement"),
    ("builds-on", "testbed.protocols.gryphon.nodes.summary", "import testbed.protocols.ordering.nodes.placement",
     "protocols import each other only where BUILDS_ON says so",
     "testbed.protocols.gryphon.nodes.summary -> testbed.protocols.ordering.nodes.placement"),
]


def test_each_protocol_package_contract_fails_on_a_planted_import(tmp_path):
    for i, (cid, module, line, name, chain) in enumerate(PLANTED):
        repo = _copy(tmp_path / str(i))
        _plant(repo, module, line)
        r = _lint(repo)
        out = " ".join(r.stdout.split())
        assert r.returncode != 0, (cid, out[-2000:])
        assert name in out and "BROKEN" in out, (cid, out[-2000:])
        assert chain in out.replace(" -> ", " -> "), (cid, out[-3000:])
