"""`testbed compare` and `reproduce --compare/--publish` through the real CLI on a real small
reproduction: ordering Fig 7 at 10 topics per subscriber (6 computed entries at the paper's 10,000
clients, plus the paper's two check runs: real processes, Spark).

* the reproduction compared with itself, and with its `--publish`ed small set: no change, exit 0;
* a planted change to the data of one claim: the Fig 7 sizes of shape 0.901 (the index's computed
  rows, what the claims are judged from) set above those of 0.349, and the paper re-analysed
  from them (every entry reused): "0.901 always below 0.349" is false on that data and flips
  pass -> fail; "about 17 (shape 0.901)" (and 0.901's "grows toward the maximum", judged on the
  same sizes) keeps its verdict and its value moved beyond its interval; the claims of shape
  0.349 alone stay the same; exit 3;
* a missing and a malformed directory: one line naming the path, exit 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIG7 = ["reproduce", "ordering", "--scale", "quick", "--fig", "7", "--points", "k=10"]
COMPARISON = "fig7:0-901-always-below-0-349"
SIZE_901 = "fig7:at-10-topics-subscriber-about-17-shape-0-901"
SIZE_349 = "fig7:at-10-topics-subscriber-about-46-shape-0-349"


def _testbed(tmp: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "testbed.cli", "--runs-dir", str(tmp / "runs"), *args],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def repro(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare")
    p = _testbed(tmp, *FIG7, "--out", str(tmp / "a"), "--publish", str(tmp / "published"))
    assert p.returncode == 0, p.stdout + p.stderr
    return tmp


@pytest.mark.slow
def test_the_reproduction_is_stamped(repro):
    doc = json.loads((repro / "a" / "ordering" / "claims.json").read_text())
    s = doc["stamp"]
    assert (doc["paper"], doc["figures"], s["scale"], s["points_filter"]) == ("ordering", [7], "quick", {"k": 10})
    assert s["load"]["runs"] == 2 and s["load"]["load_1m_max"] >= 0  # the two check runs' manifests
    assert s["machine"]["cores"] == os.cpu_count() and s["machine"]["spark"] and s["wall_s"] > 0
    assert len(s["code_version"]) == 16 and (s["git"] is None or len(s["git"]["commit"]) == 40)
    md = (repro / "a" / "REPORT.md").read_text()
    assert f"| {s['code_version']} |" in md and "Machine: " in md
    assert (repro / "a" / "ordering" / "report.md").read_text().splitlines()[2].startswith("Stamp: scale quick")


@pytest.mark.slow
def test_compared_with_itself_and_its_published_copy_nothing_changed(repro):
    same = _testbed(repro, "compare", str(repro / "a"), str(repro / "a" / "ordering"))
    assert same.returncode == 0, same.stdout + same.stderr
    assert "5 claims compared: 5 same, 0 flipped, 0 moved" in same.stdout and "the stamps agree" in same.stdout
    pub = repro / "published" / "ordering"
    assert sorted(p.name for p in pub.iterdir()) == ["REPORT.md", "claims.json", "figures"]
    assert [p.name for p in (pub / "figures").iterdir()] == ["fig7.png"]
    copy = _testbed(repro, "compare", str(pub), str(repro / "a"), "--json")
    assert copy.returncode == 0, copy.stdout + copy.stderr
    doc = json.loads(copy.stdout)
    assert doc["ok"] and doc["counts"]["same"] == 5 and doc["stamp_differences"] == {"ordering": []}


@pytest.mark.slow
def test_a_planted_change_to_one_claims_data_flips_it_and_moves_a_value(repro):
    b = repro / "b"
    shutil.copytree(repro / "a" / "ordering", b / "ordering")  # its run index names ../../runs: shared
    index = b / "ordering" / "index-quick.json"
    entries = json.loads(index.read_text())
    top = {e["repeat"]: e["row"]["size_mean"] for e in entries.values()
           if e.get("row") and e["point"] == {"k": 10, "shape": 0.349}}
    planted = 0
    for e in entries.values():  # shape 0.901's sizes above 0.349's, seed by seed
        if e.get("row") and e["point"] == {"k": 10, "shape": 0.901}:
            e["row"]["size_mean"] = top[e["repeat"]] + 10 + e["repeat"]
            planted += 1
    assert planted == 3 and len(top) == 3
    index.write_text(json.dumps(entries))
    p = _testbed(repro, *FIG7, "--out", str(b), "--compare", str(repro / "a" / "ordering"))
    assert p.returncode == 3, p.stdout + p.stderr
    assert "0 runs to make" in p.stderr  # every entry reused: the planted rows were judged
    rows = {line.split()[1]: line for line in p.stdout.splitlines() if line.startswith("ordering ")}
    assert "FLIP: pass -> fail" in rows[COMPARISON], p.stdout
    assert "MOVED: moved up" in rows[SIZE_901], p.stdout
    assert "SAME" in rows[SIZE_349], p.stdout
    j = _testbed(repro, "compare", str(repro / "a"), str(b), "--json")
    assert j.returncode == 3, j.stdout + j.stderr
    doc = json.loads(j.stdout)
    by = {c["id"]: c for c in doc["claims"]}
    assert (by[COMPARISON]["a"]["verdict"], by[COMPARISON]["b"]["verdict"], by[COMPARISON]["status"]) == \
        ("pass", "fail", "flip")
    moved = by[SIZE_901]
    assert moved["status"] == "moved" and moved["a"]["verdict"] == moved["b"]["verdict"]
    assert moved["a"]["interval"][1] < moved["b"]["interval"][0]
    # shape 0.901's other claim ("grows toward the maximum": its largest k's size over the topics) is
    # judged on the same planted sizes and moved too; shape 0.349's two claims did not change
    assert sorted(c["status"] for c in doc["claims"]) == ["flip", "moved", "moved", "same", "same"]
    assert doc["counts"] == {**doc["counts"], "flip": 1, "moved": 2, "same": 2, "compared": 5} and not doc["ok"]
    grows = {c["sentence"][-6:-1]: c["id"] for c in doc["claims"] if "grows" in c["id"]}  # "(shape 0.901)"
    assert by[grows["0.901"]]["status"] == "moved" and by[grows["0.349"]]["status"] == "same", grows
    # reproduce --json --compare: the same comparison inside the reproduction's document
    r = _testbed(repro, *FIG7, "--out", str(b), "--compare", str(repro / "a"), "--json")
    assert r.returncode == 3, r.stdout + r.stderr
    rd = json.loads(r.stdout)
    assert rd["command"] == "reproduce" and rd["papers"][0]["stamp"]["points_filter"] == {"k": 10}
    assert rd["compare"]["command"] == "compare" and rd["compare"]["changed"] is True
    assert rd["compare"]["counts"] == doc["counts"]


@pytest.mark.slow
def test_a_missing_or_malformed_directory_is_one_line_naming_it(repro):
    gone = repro / "nowhere"
    p = _testbed(repro, "compare", str(repro / "a"), str(gone))
    assert p.returncode == 2 and p.stderr.strip() == \
        f"error: {gone}: no such directory (give a reproduction directory or a paper's directory in one)"
    bad = repro / "bad" / "ordering"
    shutil.copytree(repro / "a" / "ordering", bad)
    (bad / "claims.json").write_text((bad / "claims.json").read_text()[:200])
    p = _testbed(repro, "compare", str(repro / "a"), str(bad.parent))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"error: {bad / 'claims.json'}: not valid JSON ("), p.stderr
    # --compare reads the reference before reproducing anything
    p = _testbed(repro, *FIG7, "--out", str(repro / "c"), "--compare", str(gone))
    assert p.returncode == 2 and f"error: {gone}: no such directory" in p.stderr and not (repro / "c").exists()
