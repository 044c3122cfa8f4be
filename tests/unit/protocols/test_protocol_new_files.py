"""`testbed protocol new`: the skeleton's files, names refused, nothing overwritten (the skeleton
run end to end is tests/integration/test_scaffold.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from testbed import scaffold
from testbed.errors import UsageError


@pytest.mark.parametrize("bad", ["", "Hello", "1x", "a-b", "class", "x" * 41, "a b", "hello\n"])
def test_bad_names_are_refused(bad):
    with pytest.raises(UsageError, match="lower-case Python identifier"):
        scaffold.check_name(bad)


def test_an_existing_protocol_is_refused():
    with pytest.raises(UsageError, match="already exists"):
        scaffold.check_name("pubsub")


def _fake_checkout(tmp_path: Path) -> Path:
    (tmp_path / "testbed" / "protocols").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    return tmp_path


def test_builtin_skeleton_is_one_folder_and_a_test(tmp_path):
    root = _fake_checkout(tmp_path)
    w = scaffold.new_builtin("zzskel", checkout=root)
    pkg = root / "testbed" / "protocols" / "zzskel"
    assert w.package_dir == pkg
    rel = sorted(p.relative_to(root).as_posix() for p in w.files)
    assert rel == sorted(["testbed/protocols/zzskel/" + f for f in scaffold.files_for("zzskel", "m")]
                         + ["tests/unit/protocols/test_zzskel_skeleton.py"])
    for f in w.files:  # every Python file parses; the node side imports only the runtime and itself
        if f.suffix == ".py":
            tree = ast.parse(f.read_text())
            if "/nodes/" in f.as_posix():
                mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
                assert all(m in ("__future__", "typing") or m.startswith(("testbed.nodes.runtime", "testbed.protocols.zzskel.nodes"))
                           for m in mods), (f, mods)
    assert "testbed.protocols.zzskel.nodes.node:HelloNode" in (pkg / "nodes" / "__init__.py").read_text()
    assert "protocol: zzskel" in (pkg / "topologies" / "smoke.yaml").read_text()
    with pytest.raises(UsageError, match="exists already"):
        scaffold.new_builtin("zzskel", checkout=root)


def test_builtin_needs_a_checkout(tmp_path):
    with pytest.raises(UsageError, match="not a testbed source checkout"):
        scaffold.new_builtin("zzskel", checkout=tmp_path)


def test_external_skeleton_declares_its_entry_point(tmp_path):
    w = scaffold.new_external("zzext", tmp_path / "pkg")
    pyproject = (tmp_path / "pkg" / "pyproject.toml").read_text()
    assert '[project.entry-points."testbed.protocols"]\nzzext = "zzext"' in pyproject
    assert (tmp_path / "pkg" / "tests" / "test_zzext.py").is_file()
    assert "zzext.nodes.node:HelloNode" in (w.package_dir / "nodes" / "__init__.py").read_text()
    with pytest.raises(UsageError, match="exists already"):
        scaffold.new_external("zzext", tmp_path / "pkg")
