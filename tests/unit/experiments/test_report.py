"""REPORT.md and index.html from result.json files: figures embedded, claims with their verdicts, checks summarised."""

import json

from testbed.analysis.plots import series_plot
from testbed.experiments import claims as C
from testbed.experiments import report


def _write(tmp_path, checks):
    (tmp_path / "p" / "figures").mkdir(parents=True)
    series_plot(tmp_path / "p" / "figures" / "fig3.png", "t", "x", "y", {"s": {1: [1, 2, 3], 2: [3, 4, 5]}},
                [(1, 2.0, "paper (about 2)")])
    claims = [C.comparison(3, "a above b", [C.Difference("x", (5, 6, 7), (1, 2, 3), ">")], what="w"),
              C.information(3, "under 300 ms", [12.0, 14.0], "< 300 ms", "set by the paper's hardware"),
              C.value(3, "about 46", [12, 13, 12], 46, C.Tolerance("why", rel=0.3))]
    res = {"paper": "p", "title": "Paper P", "scale": "quick", "figures": [3], "notes": "docs/p.md",
           "timings": {"total_s": 12.5, "runs_s": 10.0, "analysis_s": 2.5},
           "stats": {"points": 6, "ran": 2, "reused": 4},
           "figure_info": [{"number": 3, "title": "three", "paper": "a above b; about 46", "image": "figures/fig3.png",
                            "references": [{"y": 2.0, "x": 1.0, "series": "s", "note": "about 2"}]}],
           "claims": [c.to_dict() for c in claims], "checks": checks,
           "runs": [{"name": "g/x=1/r0", "run": "/runs/a", "reused": True}]}
    (tmp_path / "p" / "result.json").write_text(json.dumps(res))
    return report.write_all(tmp_path)


def test_markdown_has_every_claim_check_run_and_time(tmp_path):
    md, page = _write(tmp_path, [{"run": "r0", "check": "tno", "passed": True, "violations": 0},
                                 {"run": "r1", "check": "tno", "passed": False, "violations": 3}])
    text = md.read_text()
    assert "![Fig 3](p/figures/fig3.png)" in text
    assert "| a above b | comparison | - | 4.00 ± 2.00 (n=3) |" in text and "| pass |" in text
    assert "| under 300 ms | information | < 300 ms | 13.00 ± 1.41 (n=2) | - | info — set by the paper's hardware |" in text
    assert "| about 46 | value | 46 | 12.33 ± 0.58 (n=3) | within 30% of the paper | **FAIL** |" in text
    assert "| tno | 1/2 **FAIL** | 3 | r1 |" in text
    assert "Time: 12.5 s" in text and "`g/x=1/r0`: /runs/a (reused)" in text
    html = page.read_text()
    assert html.count("<img class='figure'") == 1 and "data:image/png;base64,iVBOR" in html
    assert "<td class='fail'>1/2</td>" in html and "<li>2 (at x=1, s): about 2</li>" in html


def test_a_missing_figure_is_said_not_hidden(tmp_path):
    md, page = _write(tmp_path, [])
    (tmp_path / "p" / "figures" / "fig3.png").unlink()
    md, page = report.write_all(tmp_path)
    assert "<img" not in page.read_text() and "no figure drawn" in page.read_text()
    assert "(none)" in md.read_text()  # no checks


def test_measured_against_predicted_is_a_table_under_its_figure(tmp_path):
    _write(tmp_path, [])
    p = tmp_path / "p" / "result.json"
    res = json.loads(p.read_text())
    res["numbers"] = {"predicted": [{"figure": 3, "series": "shape 0.349", "quantity": "% outgoing, tm2",
                                     "measured": [9.0, 10.0, 11.0], "predicted": [9.8, 9.8, 9.8]},
                                    {"figure": 4, "series": "x", "quantity": "y", "measured": [1], "predicted": [2]}],
                      "other": 1}
    p.write_text(json.dumps(res))
    md, page = report.write_all(tmp_path)
    text = md.read_text()
    assert "| shape 0.349 | % outgoing, tm2 | 10.00 ± 1.00 (n=3) | 9.80 ± 0.00 (n=3) |" in text
    assert "| x | y |" not in text  # Fig 4 is not in this result: its row is not shown under Fig 3
    assert '"other": 1' in text and '"predicted"' not in text  # the rest of the numbers stay as JSON
    assert "<td>% outgoing, tm2</td><td>10.00 ± 1.00 (n=3)</td><td>9.80 ± 0.00 (n=3)</td>" in page.read_text()


def test_a_failed_claim_says_why_or_that_it_is_not_explained(tmp_path):
    from testbed.experiments.grid import Figure, Paper
    from testbed.experiments.runner import _explained

    paper = Paper(name="p", title="P", figures=(Figure(3, "three", (), "s"),), grids=(), analyze=lambda c: None,
                  explained={(3, "about"): "the paper's machines had 6 processors; ours 2 (measured 12 vs 46)"})
    ok = C.comparison(3, "a above b", [C.Difference("x", (5, 6, 7), (1, 2, 3), ">")], what="w")
    bad = C.value(3, "about 46", [12, 13, 12], 46, C.Tolerance("why", rel=0.3))
    lone = C.value(3, "near 40", [12, 13, 12], 40, C.Tolerance("why", rel=0.3))
    ds = [_explained(paper, c) for c in (ok, bad, lone)]
    assert "explanation" not in ds[0]  # a pass needs none
    assert ds[1]["explanation"].startswith("the paper's machines") and ds[2]["explanation"] is None
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "result.json").write_text(json.dumps(
        {"paper": "p", "title": "P", "scale": "quick", "figures": [3], "timings": {}, "stats": {},
         "figure_info": [{"number": 3, "title": "three", "paper": "s", "image": None, "references": []}],
         "claims": ds, "checks": [], "runs": []}))
    md, page = report.write_all(tmp_path)
    text = md.read_text()
    assert "- *about 46* (fail): the paper's machines had 6 processors" in text
    assert f"- *near 40* (fail): {report.NOT_EXPLAINED}" in text
    assert "a above b* (" not in text
    html = page.read_text()
    assert "<ul class='why'>" in html and f"<strong>{report.NOT_EXPLAINED.replace(chr(39), '&#x27;')}</strong>" in html


def test_the_pages_say_which_papers_they_cover_and_when(tmp_path):
    _write(tmp_path, [])
    q = json.loads((tmp_path / "p" / "result.json").read_text())
    q.update(paper="q", title="Paper Q", created="2026-11-27T01:00:00Z", scale="paper", figures=[5, 6],
             timings={"total_s": 3600.0})
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "result.json").write_text(json.dumps(q))
    p = json.loads((tmp_path / "p" / "result.json").read_text())
    p["created"] = "2026-11-27T03:00:00Z"
    (tmp_path / "p" / "result.json").write_text(json.dumps(p))
    md, page = report.write_all(tmp_path)
    text = md.read_text()
    assert "| p | quick | 3 | 2026-11-27T03:00:00Z | 12 s |" in text
    assert "| q | paper | 5, 6 | 2026-11-27T01:00:00Z | 3600 s |" in text
    html = page.read_text()
    assert "<td>q</td><td>paper</td><td>5, 6</td><td>2026-11-27T01:00:00Z</td><td>3600 s</td>" in html


def test_relative_paths_leave_no_path_of_this_machine(tmp_path):
    from testbed.experiments.runner import relative_paths

    runs = tmp_path / "runs" / "reproduce-p-quick" / "r1"
    runs.mkdir(parents=True)
    out = tmp_path / "reproductions"
    out.mkdir()
    doc = {"runs": [{"run": str(runs)}], "checks": [{"run_dir": str(runs), "check": "x"}],
           "numbers": {str(runs): 1, "text": "/not/a/path/here", "n": 3}}
    got = relative_paths(doc, out)
    assert got["runs"][0]["run"] == "../runs/reproduce-p-quick/r1"
    assert got["checks"][0]["run_dir"] == "../runs/reproduce-p-quick/r1"
    assert got["numbers"] == {"../runs/reproduce-p-quick/r1": 1, "text": "/not/a/path/here", "n": 3}
    assert str(tmp_path) not in json.dumps(got)


def test_the_run_index_stores_runs_relative_to_itself(tmp_path):
    from testbed.experiments.index import RunIndex

    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    idx = RunIndex(tmp_path / "out" / "p" / "index-quick.json")
    idx.put("k", {"run": str(run), "row": {"sample": {"run": str(run)}, "probes": [{"run": str(run)}]}})
    stored = (tmp_path / "out" / "p" / "index-quick.json").read_text()
    assert str(tmp_path) not in stored and "../../runs/r1" in stored
    again = RunIndex(tmp_path / "out" / "p" / "index-quick.json").get("k")
    assert again["run"] == str(run) and again["row"]["probes"][0]["run"] == str(run)
    # moved with its runs beside it: still found
    import shutil

    shutil.move(str(tmp_path / "out"), str(tmp_path / "moved" / "out"))
    shutil.move(str(tmp_path / "runs"), str(tmp_path / "moved" / "runs"))
    moved = RunIndex(tmp_path / "moved" / "out" / "p" / "index-quick.json").get("k")
    assert moved["run"] == str(tmp_path / "moved" / "runs" / "r1")
    # an index written before (absolute paths) reads as it is
    (tmp_path / "old.json").write_text(json.dumps({"k": {"run": "/abs/run"}}))
    assert RunIndex(tmp_path / "old.json").get("k")["run"] == "/abs/run"
