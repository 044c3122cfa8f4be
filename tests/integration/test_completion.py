"""Shell completion in a real bash: the script `testbed completion bash` prints, sourced, and its
completion function run on command lines (COMP_WORDS/COMP_CWORD) as bash would on TAB.

The runs are real run directories (plan.json from a real Plan, the .active list), so
node-name completion reads what `testbed up` writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.runs.rundir import RunDir, mark_active
from testbed.topology.loader import plans

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "testbed"
    exe.write_text(f'#!/bin/sh\nexec {sys.executable} -m testbed.cli "$@"\n')
    exe.chmod(0o755)
    runs = tmp_path / "runs"
    runs.mkdir()
    for name, topo, active in (("smoke-20260101-000000-aaaa", "smoke.yaml", False),
                               ("gryphon-smoke-20260101-000001-bbbb", "gryphon/smoke.yaml", False),
                               ("smoke-20260101-000002-cccc", "smoke.yaml", True)):
        rd = RunDir.create(runs, name)
        rd.write("plan.json", plans(str(ROOT / "topologies" / topo), {}, None)[0].to_dict())
        mark_active(runs, name, active)
    e = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", TESTBED_RUNS=str(runs),
             PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return e, runs


def candidates(env, line: str, cwd: Path = ROOT) -> list[str]:
    """What TAB offers at the end of ``line`` (a trailing space: a new, empty word)."""
    e, _ = env
    words = line.split()
    if line.endswith(" "):
        words.append("")
    arr = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    prog = ("source <(testbed completion bash) || exit 9\n"
            f"COMP_WORDS=({arr}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n"
            "_testbed_complete\n"
            "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog], capture_output=True, text=True, env=e,
                       cwd=cwd, timeout=60)
    assert r.returncode == 0, r.stderr
    return [c for c in r.stdout.splitlines() if c]


def test_commands_and_options(env):
    cmds = candidates(env, "testbed ")
    assert {"validate", "graph", "up", "run", "down", "status", "logs", "analyze", "completion"} <= set(cmds)
    assert "__complete" not in cmds
    assert candidates(env, "testbed gr") == ["graph"]
    assert candidates(env, "testbed run --pro") == ["--provider"]
    assert candidates(env, "testbed run --provider ") == ["ansible", "docker", "local"]
    assert candidates(env, "testbed completion ") == ["bash", "zsh"]
    assert candidates(env, "testbed image ") == ["build"]


def test_topology_files(env):
    assert candidates(env, "testbed validate topologies/ex") == ["topologies/examples/"]
    got = candidates(env, "testbed run topologies/examples/p")
    assert got == ["topologies/examples/partition.yaml", "topologies/examples/pause.yaml"]
    assert "topologies/smoke.yaml" in candidates(env, "testbed graph topologies/")
    assert "topologies/ordering/geo.j2" in candidates(env, "testbed up topologies/ordering/g")


def test_node_names_of_the_active_run(env):
    assert candidates(env, "testbed logs b") == ["b1", "b2", "b3", "b4", "b5"]
    assert candidates(env, "testbed logs sub-") == ["sub-bond", "sub-cheap", "sub-fx"]
    # --run picks another run's nodes
    assert candidates(env, "testbed logs --run gryphon-smoke-20260101-000001-bbbb p") == ["p1", "pubs"]


def test_no_active_run_no_node_names(env):
    e, runs = env
    mark_active(runs, "smoke-20260101-000002-cccc", False)
    assert candidates(env, "testbed logs b") == []


def test_run_ids_and_runs_dir(env, tmp_path):
    ids = ["gryphon-smoke-20260101-000001-bbbb", "smoke-20260101-000000-aaaa", "smoke-20260101-000002-cccc"]
    assert candidates(env, "testbed status ") == ids
    assert candidates(env, "testbed down smoke") == ids[1:]
    assert candidates(env, "testbed inject --run g") == ids[:1]
    # --runs-dir on the command line wins over $TESTBED_RUNS
    other = tmp_path / "other"
    RunDir.create(other, "x-run").write("plan.json", {"nodes": {"n1": {}}})
    mark_active(other, "x-run", True)
    assert candidates(env, f"testbed --runs-dir {other} status ") == ["x-run"]
    assert candidates(env, f"testbed --runs-dir {other} logs ") == ["n1"]


def test_zsh_script_uses_the_same_function_through_bashcompinit(env):
    e, _ = env
    r = subprocess.run(["testbed", "completion", "zsh"], capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 0 and "bashcompinit" in r.stdout and "_testbed_complete()" in r.stdout
