"""`testbed reproduce` end to end on a tiny grid (tests/integration/tiny_paper.py, real processes):
interrupted after the first finished point, re-run, only the missing points run; REPORT.md and
index.html are written, and the page is loaded in a real headless Chromium with every figure decoded."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import dump_dom  # noqa: E402

POINTS = 2 * 3  # 2 rates x 3 seeds


def _cli(tmp: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "testbed.cli", "--runs-dir", str(tmp / "runs"), "reproduce", *args,
            "--out", str(tmp / "out")]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    env["TESTBED_EXPERIMENTS"] = "tiny_paper"
    return env


def _index(tmp: Path) -> dict:
    p = tmp / "out" / "tiny" / "index-quick.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reproduce")
    proc = subprocess.Popen(_cli(tmp, "tiny"), env=_env(), cwd=tmp, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while not _index(tmp) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, f"reproduce ended before it could be interrupted:\n{proc.stdout.read()}"
        assert _index(tmp), "no point finished within 300 s"
        proc.send_signal(signal.SIGTERM)  # mid-grid: the first point is in the index, the rest is not
        first_out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run([sys.executable, "-m", "testbed.cli", "--runs-dir", str(tmp / "runs"), "down", "--all"],
                       env=_env(), capture_output=True)
    before = _index(tmp)
    second = subprocess.run(_cli(tmp, "tiny", "--json"), env=_env(), cwd=tmp, capture_output=True, text=True,
                            timeout=900)
    assert second.returncode in (0, 3), second.stdout + second.stderr
    return {"tmp": tmp, "first_rc": proc.returncode, "first_out": first_out, "before": before,
            "after": _index(tmp), "second": second}


@pytest.mark.slow
def test_interrupted_reproduction_resumes_with_only_the_missing_points(tiny):
    before, after = tiny["before"], tiny["after"]
    why = f"first run (rc {tiny['first_rc']}):\n{tiny['first_out']}\nsecond run:\n{tiny['second'].stderr}"
    assert tiny["first_rc"] != 0 and 1 <= len(before) < POINTS, why
    assert len(after) == POINTS, why
    for key, entry in before.items():  # what finished before the interruption is reused as is
        assert after[key]["run"] == entry["run"], why
    result = json.loads((tiny["tmp"] / "out" / "tiny" / "result.json").read_text())
    assert result["stats"] == {**result["stats"], "points": POINTS, "reused": len(before),
                               "ran": POINTS - len(before)}, why
    made = [p for p in (tiny["tmp"] / "runs" / "reproduce-tiny-quick").iterdir() if (p / "plan.json").exists()]
    # an interrupted run may have stopped between plan.json and manifest.json
    finished = [p for p in made if (p / "manifest.json").exists()
                and json.loads((p / "manifest.json").read_text())["status"] == "collected"]
    assert len(finished) == POINTS, why  # the interrupted run (if any) is not reused
    assert len(made) - len(finished) <= 1, why
    # every run was a distinct (rate, seed): the repeat index reached the nodes
    manifests = [json.loads((p / "manifest.json").read_text()) for p in finished]
    seeds = {(m["set"]["rate"], m["repeat_index"]) for m in manifests}
    for m in manifests:  # the load average while the run measured (cited by explanations)
        assert m["load_avg"]["cpus"] >= 1 and len(m["load_avg"]["start"]) == len(m["load_avg"]["end"]) == 3
    assert seeds == {(r, i) for r in (10, 40) for i in range(3)}, why
    lines = " ".join(tiny["second"].stderr.split())  # the console may wrap a progress line
    assert "ETA" in lines and "repeat 3/3" in lines, why


@pytest.mark.slow
def test_report_has_figures_claims_checks_and_runs(tiny):
    out = tiny["tmp"] / "out"
    md = (out / "REPORT.md").read_text()
    assert "A tiny test paper" in md and "![Fig 1](tiny/figures/fig1.png)" in md
    assert "more deliveries at the higher rate" in md and "(n=3)" in md
    assert re.search(r"\| a number set by hardware \| information \| 80 \| .* \| info", md)
    assert "| delivered | 6/6 | 0 | - |" in md
    doc = json.loads((out / "tiny" / "claims.json").read_text())
    claims = doc["claims"]  # the stamped claims document: what made these results, beside them
    assert (doc["paper"], doc["scale"], doc["figures"], doc["stamp"]["scale"]) == ("tiny", "quick", [1], "quick")
    assert doc["stamp"]["load"]["runs"] == POINTS and doc["stamp"]["machine"]["cores"] >= 1
    assert doc["stamp"]["code_version"] and doc["stamp"]["wall_s"] > 0
    assert "Stamp: scale quick" in (out / "tiny" / "report.md").read_text()
    assert {c["kind"] for c in claims} == {"comparison", "value", "information"}
    assert next(c for c in claims if c["kind"] == "comparison")["verdict"] == "pass"
    page = (out / "index.html").read_text()
    assert page.count("<img class='figure'") == 1 and "data:image/png;base64," in page
    assert (out / "tiny" / "figures" / "fig1.png").stat().st_size > 1000



@pytest.mark.slow
def test_no_path_of_this_machine_in_the_reproduction(tiny):
    """REPORT.md, index.html, result.json and the run index name runs relative to the reproduction
    (issue #34): a reproduction can be moved, archived or shipped and still read."""
    out = tiny["tmp"] / "out"
    files = [out / "REPORT.md", out / "index.html", out / "tiny" / "result.json", out / "tiny" / "report.md",
             out / "tiny" / "index-quick.json"]
    for f in files:
        text = f.read_text()
        assert str(ROOT) not in text and str(tiny["tmp"]) not in text, f
    md = (out / "REPORT.md").read_text()
    assert "../runs/reproduce-tiny-quick/" in md and "| tiny | quick | 1 |" in md
    runs = [x["run"] for x in json.loads((out / "tiny" / "result.json").read_text())["runs"]]
    assert runs and all((out / r / "manifest.json").is_file() for r in runs)  # relative to out, and there


@pytest.mark.slow
@pytest.mark.browser
def test_page_opens_in_headless_chromium_with_every_figure_decoded(tiny):
    dom = dump_dom(tiny["tmp"] / "out" / "index.html")
    status = re.search(r"<div id=\"figures-status\"[^>]*>", dom).group(0)
    assert 'data-ready="yes"' in status and 'data-total="1"' in status and 'data-decoded="1"' in status, status
    assert "tiny-fig1" in dom


@pytest.mark.slow
def test_reproduce_json_has_the_claims_and_their_verdicts(tiny):
    doc = json.loads(tiny["second"].stdout)
    assert doc["schema"] == 1 and doc["command"] == "reproduce"
    assert doc["report"].endswith("REPORT.md") and Path(doc["page"]).is_file()
    (paper,) = doc["papers"]
    assert paper["paper"] == "tiny" and paper["stats"]["points"] == POINTS
    assert paper["claims"] and sum(paper["verdicts"].values()) == len(paper["claims"])
    for c in paper["claims"]:
        assert {"figure", "sentence", "kind", "verdict", "measured", "tolerance", "reason"} <= set(c)
    assert doc["ok"] == (tiny["second"].returncode == 0) == (paper["verdicts"].get("fail", 0) == 0)
