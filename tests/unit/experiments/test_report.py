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
    assert "| a above b | comparison | - | 4.00 [4.00, 4.00] ± 2.00 (n=3) |" in text and "| pass |" in text
    assert "| under 300 ms | information | < 300 ms | 13.00 ± 1.41 (n=2) | - | info — set by the paper's hardware |" in text
    assert "| about 46 | value | 46 | 12.33 [10.90, 13.77] ± 0.58 (n=3) | within 30% of the paper | **FAIL** |" in text
    # the head: per paper and overall, judged / pass / fail / ... / reproduced = pass / judged
    assert "| p | 2 | 1 | 1 | 0 | 0 | 0 | 1 | 1/2 = 50% |" in text
    assert "| **overall** | 2 | 1 | 1 | 0 | 0 | 0 | 1 | 1/2 = 50% |" in text
    assert "Claims: judged 2: 1 pass, 1 fail, 0 insufficient, 0 no data; 0 by construction; 1 information; " \
        "reproduced 1/2 = 50%" in text
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
    from testbed.experiments.grid import Explanation, Figure, Paper
    from testbed.experiments.runner import _explained

    paper = Paper(name="p", title="P", figures=(Figure(3, "three", (), "s"),), grids=(), analyze=lambda c: None,
                  explained={"fig3:about-46": Explanation(
                      "the machine was loaded: 1-min load average up to {load_1m_max:.1f} on {cpus} cores during "
                      "the {load_runs} runs; measured {mean:.1f} (n={n})", ("load_1m_max", "cpus")),
                      "fig3:near-40": Explanation("the broker queue was {queue}", ("queue",)),
                      (3, "at 10"): "a fixed string written once"})
    ok = C.comparison(3, "a above b", [C.Difference("x", (5, 6, 7), (1, 2, 3), ">")], what="w")
    bad = C.value(3, "about 46", [12, 13, 12], 46, C.Tolerance("why", rel=0.3))
    lone = C.value(3, "near 40", [12, 13, 12], 40, C.Tolerance("why", rel=0.3))
    legacy = C.value(3, "at 10 it is 40", [12, 13, 12], 40, C.Tolerance("why", rel=0.3))
    evidence = {3: {"load_1m_max": 21.5, "load_1m_mean": 12.0, "cpus": 2, "load_runs": 3}}
    ds = [_explained(paper, c, evidence) for c in (ok, bad, lone, legacy)]
    assert "explanation" not in ds[0]  # a pass needs none
    # rendered with this reproduction's numbers
    assert ds[1]["explanation"] == ("the machine was loaded: 1-min load average up to 21.5 on 2 cores during the 3 "
                                    "runs; measured 12.3 (n=3)")
    # the cause it names (the queue) was not measured here: not explained, and says what is missing
    assert ds[2]["explanation"] is None and ds[2]["not_measured"] == ["queue"]
    # a static string is not evidence: shown as not explained, its text marked as a note
    assert ds[3]["explanation"] is None and ds[3]["note"] == "a fixed string written once"
    ds = ds[:3]
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "result.json").write_text(json.dumps(
        {"paper": "p", "title": "P", "scale": "quick", "figures": [3], "timings": {}, "stats": {},
         "figure_info": [{"number": 3, "title": "three", "paper": "s", "image": None, "references": []}],
         "claims": ds, "checks": [], "runs": []}))
    md, page = report.write_all(tmp_path)
    text = md.read_text()
    assert "- *about 46* (fail): the machine was loaded: 1-min load average up to 21.5" in text
    assert f"- *near 40* (fail): {report.NOT_EXPLAINED} (its cause was not measured in this reproduction: queue)" in text
    assert "a above b* (" not in text
    html = page.read_text()
    assert "<ul class='why'>" in html and f"<strong>{report.NOT_EXPLAINED} (its cause" in html


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


def test_load_evidence_comes_from_the_runs_manifests(tmp_path):
    from testbed.experiments.runner import load_evidence

    dirs = []
    for i, end in enumerate((3.5, 7.25, None)):
        d = tmp_path / f"r{i}"
        d.mkdir()
        la = {"cpus": 2, "start": [1.0, 1.0, 1.0], **({"end": [end, 2.0, 1.0]} if end is not None else {})}
        (d / "manifest.json").write_text(json.dumps({"load_avg": la}))
        dirs.append(d)
    ev = load_evidence(dirs + [tmp_path / "missing"])
    assert ev == {"load_1m_max": 7.25, "load_1m_mean": 5.375, "cpus": 2, "load_runs": 2}
    assert load_evidence([dirs[2]]) == {}  # never measured: nothing to cite


def test_by_construction_is_shown_with_what_decides_it_and_never_reproduced(tmp_path):
    _write(tmp_path, [])
    p = tmp_path / "p" / "result.json"
    res = json.loads(p.read_text())
    res["claims"].append(C.by_construction(3, "100 ms gap", [100.2, 99.8, 100.0],
                                           decided_by="log_force.gap_ms = 100 in the topology",
                                           predicted=[100, 100, 100]).to_dict())
    p.write_text(json.dumps(res))
    md, page = report.write_all(tmp_path)
    text = md.read_text()
    assert "| 100 ms gap | construction | - | 100.00 ± 0.20 (n=3) | - | by construction — log_force.gap_ms = 100" in text
    assert "| p | 2 | 1 | 1 | 0 | 0 | 1 | 1 | 1/2 = 50% |" in text  # counted, not judged
    assert "<td class='byconstruction'>by construction</td>" in page.read_text()


def test_reproduce_json_carries_the_heads_counts(tmp_path):
    from testbed import jsonout

    _write(tmp_path, [])
    doc = jsonout.reproduce_doc(tmp_path / "REPORT.md", ["p"])
    want = {"judged": 2, "pass": 1, "fail": 1, "insufficient": 0, "no data": 0, "by construction": 0, "info": 1,
            "reproduced": 0.5}
    assert doc["papers"][0]["summary"] == want and doc["summary"] == want and doc["ok"] is False


def test_a_figures_further_panels_reach_the_report(tmp_path):
    from testbed.analysis.plots import series_plot

    _write(tmp_path, [])
    series_plot(tmp_path / "p" / "figures" / "fig3ab.png", "t", "x", "y", {"s": {1: [1.0], 2: [2.0]}}, [])
    p = tmp_path / "p" / "result.json"
    res = json.loads(p.read_text())
    res["figure_info"][0]["more_images"] = ["figures/fig3ab.png"]
    p.write_text(json.dumps(res))
    md, page = report.write_all(tmp_path)
    assert "![Fig 3 (fig3ab)](p/figures/fig3ab.png)" in md.read_text()
    assert page.read_text().count("<img class='figure'") == 2 and "id='p-fig3ab'" in page.read_text()


def test_a_claim_made_insufficient_by_its_papers_rule_says_the_rule_and_what_it_found():
    c = {"verdict": C.INSUFFICIENT, "reason": "insufficient: saturated -- fewer than 2 points where both keep up",
         "measured": {"detail": {"saturated_points": [10000, 20000]}}, "explanation": None}
    assert report.why_text(c) == ("saturated -- fewer than 2 points where both keep up (saturated points: "
                                  f"[10000, 20000]); the cause: {report.NOT_EXPLAINED}")
    plain = {"verdict": C.INSUFFICIENT, "reason": "within 20% of the paper", "explanation": None}
    assert report.why_text(plain) == report.NOT_EXPLAINED  # a band's reason is not why it was insufficient


def _run_with_load(root, name, end):
    d = root / name
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps({"load_avg": {"cpus": 2, "start": [0.1] * 3, "end": [end, 1, 1]}}))
    return d


def _paper_of_two_grids():
    from testbed.experiments.grid import Figure, Grid, Paper

    return Paper("p", "P", (Figure(5, "five", ("base", "wait"), "s"), Figure(9, "nine", ("nine",), "s")),
                 (Grid("base", "t.yaml"), Grid("wait", "t.yaml"), Grid("nine", "t.yaml")), analyze=lambda ctx: None)


def test_a_figure_whose_points_ran_at_different_loads_says_so(tmp_path):
    """Fig 5's D-TX runs at load 5.6 and its BL-WAIT sample (a computed entry's) at 0.4 differ by more
    than the 2 cores: uneven, and the report says a comparison includes the load; Fig 9's points
    (2.0 and 2.9) do not."""
    from testbed.experiments.runner import Entry, figure_loads

    runs = {n: _run_with_load(tmp_path, n, x) for n, x in
            (("a0", 5.2), ("a1", 6.0), ("s0", 0.4), ("n0", 2.0), ("n1", 2.9), ("probe", 9.0))}
    entries = {"base": [Entry("base", {"variant": "dtx"}, r, f"k{r}", run=runs[f"a{r}"]) for r in (0, 1)],
               "wait": [Entry("wait", {"variant": "blwait"}, 0, "kw", row={
                   "probes": [{"wait_ms": 250, "run": str(runs["probe"])}], "sample": {"run": str(runs["s0"])}}),
                        Entry("wait", {"variant": "blwait"}, 1, "kx", row={"wait_ms": None})],  # no run: skipped
               "nine": [Entry("nine", {"variant": "dtx"}, 0, "n0", run=runs["n0"]),
                        Entry("nine", {"variant": "stx"}, 0, "n1", run=runs["n1"]),
                        Entry("nine", {"variant": "stx"}, 1, "n2", run=tmp_path / "never-measured")]}
    loads = figure_loads(_paper_of_two_grids(), [5, 9], entries)
    five, nine = loads[5], loads[9]
    assert five["cores"] == 2 and five["uneven"] and (five["lowest"], five["highest"]) == (0.4, 5.6)
    assert five["points"] == [{"grid": "base", "point": "variant=dtx", "runs": 2, "load_mean": 5.6, "load_max": 6.0},
                              {"grid": "wait", "point": "variant=blwait", "runs": 1, "load_mean": 0.4,
                               "load_max": 0.4}]  # the sample, not the probe at 9.0
    assert not nine["uneven"] and [p["runs"] for p in nine["points"]] == [1, 1]
    assert figure_loads(_paper_of_two_grids(), [9], {"nine": entries["nine"]}).keys() == {9}
    # the same loads on 8 cores are not uneven; nothing measured, nothing said
    assert not figure_loads(_paper_of_two_grids(), [5], entries, cores=8)[5]["uneven"]
    assert figure_loads(_paper_of_two_grids(), [5], {}) == {}

    _write(tmp_path / "out", [])
    p = tmp_path / "out" / "p" / "result.json"
    res = json.loads(p.read_text())
    res["figure_info"][0]["load"] = {**five, "number": 3}
    p.write_text(json.dumps(res))
    md, page = report.write_all(tmp_path / "out")
    text = md.read_text()
    assert "**Measured at uneven loads (0.40 to 5.60 on 2 cores): a comparison between these points includes " \
        "the effect of load" in text
    assert "base variant=dtx: 5.60 (max 6.00, 2 runs); wait variant=blwait: 0.40 (1 run)." in text
    assert "<p class='warn'><b>Measured at uneven loads (0.40 to 5.60" in page.read_text()
    res["figure_info"][0]["load"] = nine
    p.write_text(json.dumps(res))
    md, page = report.write_all(tmp_path / "out")
    assert "uneven" not in md.read_text() and "nine variant=stx: 2.90 (1 run)" in md.read_text()


def test_a_figure_of_many_points_lists_the_extremes_of_its_loads():
    pts = [{"grid": "g", "point": f"n={i}", "runs": 3, "load_mean": float(i), "load_max": i + 0.5} for i in range(20)]
    text, warn = report.load_text({"cores": 2, "points": pts, "lowest": 0.0, "highest": 19.0, "uneven": True})
    assert text.count("g n=") == report.LOAD_POINTS_LISTED
    assert "20 points, the 4 least loaded: g n=0: 0.00 (max 0.50, 3 runs)" in text and "the 4 most: g n=16" in text
    assert "g n=10:" not in text and "0.00 to 19.00 on 2 cores" in warn
    assert report.load_text(None) is None and report.load_text({"points": []}) is None
