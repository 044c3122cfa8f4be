"""`testbed reproduce` of several papers through the real CLI (tests/integration/sched_papers.py, real
processes of the tiny topology): the runs of two papers that share the machine overlap in time (their
manifests' spans, bring-up to teardown), the runs of the paper marked alone overlap nothing; the
reproduction's wall time and each paper's are printed and in the JSON document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def span(run: Path) -> tuple[float, float]:
    """A run's wall span from its manifest: from the start of its bring-up to the end of its teardown."""
    m = json.loads((run / "manifest.json").read_text())
    end = m["end_wall_ns"] / 1e9
    return end - m["collect_s"] - m["schedule_s"] - m["up_s"], end + m["down_s"]


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_two_papers_share_the_machine_and_the_alone_paper_has_it_to_itself(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    env["TESTBED_EXPERIMENTS"] = "sched_papers"
    cmd = [sys.executable, "-m", "testbed.cli", "--runs-dir", str(tmp_path / "runs"), "reproduce",
           "sched-a", "sched-b", "sched-alone", "--out", str(tmp_path / "out"), "--cpu-budget", "2", "--json"]
    p = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads(p.stdout)
    timing = doc["timing"]
    assert set(timing["papers"]) == {"sched-a", "sched-b", "sched-alone"} and timing["wall_s"] > 0
    assert "wall time" in p.stderr + p.stdout and "per paper: sched-a" in p.stderr + p.stdout
    runs: dict[str, list[Path]] = {}
    for paper in timing["papers"]:
        index = json.loads((tmp_path / "out" / paper / "index-quick.json").read_text())
        runs[paper] = [(tmp_path / "out" / paper / e["run"]).resolve() for e in index.values()]
        assert len(runs[paper]) == 2
    spans = {paper: [span(r) for r in rs] for paper, rs in runs.items()}
    # the papers that share: some run of one overlaps some run of the other
    assert any(overlap(a, b) for a in spans["sched-a"] for b in spans["sched-b"]), spans
    # the alone paper's runs overlap no other run, of any paper, its own included
    every = [(paper, s) for paper, ss in spans.items() for s in ss]
    for a in spans["sched-alone"]:
        others = [(paper, s) for paper, s in every if s != a]
        assert not [o for o in others if overlap(a, o[1])], (a, others)
