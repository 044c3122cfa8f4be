"""`testbed compare`: the pure comparison of two claims documents (flips, values moved beyond their
intervals, claims on one side only, figures not compared), the reading of reproduction and paper
directories with one-line errors naming the path, the stamp, and `--publish`'s small set."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from testbed import cli
from testbed.errors import UsageError
from testbed.experiments import claims as C
from testbed.experiments import compare as K
from testbed.experiments import report
from testbed.experiments.stamp import claims_document, git_state, machine, stamp, stamp_line

TOL = C.Tolerance("test band", rel=0.2)  # 46 +- 20%: [36.8, 55.2]


def _claims(size_samples=(45.0, 46.0, 47.0), above=((5, 6, 7), (1, 2, 3)), extra: bool = False):
    """The paper's claims computed from (possibly planted) samples, as a reproduction writes them."""
    out = [C.value(7, "about 46", size_samples, 46, TOL),
           C.comparison(7, "a above b", [C.Difference("k=10", above[0], above[1], ">")], what="w"),
           C.information(8, "under 300 ms", [120.0, 130.0, 125.0], "< 300 ms", "hardware", unit="ms"),
           C.shape(8, "no nacks", [True, True, True], judged="none")]
    if extra:
        out.append(C.value(8, "a new claim", [1.0, 1.0, 1.0], 1, TOL))
    return [c.to_dict() for c in out]


STAMP = {"testbed": "0.1.0", "code_version": "aaaa", "code_version_analysis": "bbbb",
         "git": {"commit": "c" * 40, "dirty": False},
         "machine": {"cores": 2, "memory_gib": 23.5, "cpu": "AMD EPYC", "os": "Linux", "python": "3.11.7",
                     "java": "17", "spark": "4.3.0"},
         "load": {"runs": 3, "load_1m_max": 2.5, "load_1m_mean": 1.5, "at_start": [1.0, 1, 1], "at_end": [2.0, 2, 2]},
         "wall_s": 100.0, "runs_elapsed_s": 90.0, "scale": "quick", "provider": "local", "jobs": 1,
         "figures": [7, 8], "points_filter": {}, "date": "2026-11-27T06:00:00Z"}


def _write(root: Path, claims, paper="p", figures=(7, 8), stamp_=STAMP) -> Path:
    d = root / paper
    d.mkdir(parents=True, exist_ok=True)
    result = {"paper": paper, "title": "P", "scale": "quick", "figures": list(figures), "stamp": stamp_,
              "claims": claims}
    (d / "claims.json").write_text(json.dumps(C._json(claims_document(result))))
    return root


def _rows(cmp):
    return {r.id: r for r in cmp.rows}


def test_a_reproduction_compared_with_itself_shows_no_change(tmp_path, capsys):
    a = _write(tmp_path / "a", _claims())
    cmp = K.compare(a, a)
    assert not cmp.changed and {r.status for r in cmp.rows} == {K.SAME}
    assert cmp.counts()["compared"] == 4 and cmp.counts()[K.SAME] == 4
    assert cli.main(["compare", str(a), str(a / "p")]) == 0  # a reproduction against its own paper directory
    out = capsys.readouterr().out
    assert "4 claims compared: 4 same, 0 flipped, 0 moved" in out and out.rstrip().endswith("no change")
    assert "p: the stamps agree" in out


def test_a_planted_change_to_one_claims_samples_is_a_flip(tmp_path, capsys):
    a = _write(tmp_path / "a", _claims())
    # the paper says "about 46": samples far outside the band make the statement false
    b = _write(tmp_path / "b", _claims(size_samples=(80.0, 81.0, 82.0)))
    cmp = K.compare(a, b)
    row = _rows(cmp)["fig7:about-46"]
    assert (row.a["verdict"], row.b["verdict"], row.status) == ("pass", "fail", K.FLIP)
    assert row.moved is True and "pass -> fail" in row.why and "disjoint" in row.why
    assert [r.status for r in cmp.rows if r.id != row.id] == [K.SAME] * 3
    assert cmp.changed
    assert cli.main(["compare", str(a), str(b)]) == 3
    out = capsys.readouterr().out
    assert "FLIP: pass -> fail" in out and "1 flipped" in out and out.rstrip().endswith("changed")
    assert cli.main(["compare", str(a), str(b), "--changed"]) == 3  # only the changed rows listed
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("p ")]
    assert len(rows) == 1 and "fig7:about-46" in rows[0]
    # a comparison reversed is a flip too
    c = _write(tmp_path / "c", _claims(above=((1, 2, 3), (5, 6, 7))))
    assert _rows(K.compare(a, c))["fig7:a-above-b"].status == K.FLIP


def test_a_shifted_value_moved_beyond_its_interval_without_a_flip(tmp_path, capsys):
    a = _write(tmp_path / "a", _claims())
    b = _write(tmp_path / "b", _claims(size_samples=(51.5, 52.0, 52.5)))  # still inside the band: pass
    row = _rows(K.compare(a, b))["fig7:about-46"]
    assert (row.a["verdict"], row.b["verdict"], row.status, row.moved) == ("pass", "pass", K.MOVED, True)
    assert "moved up" in row.why
    assert cli.main(["compare", str(a), str(b), "--json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "compare" and doc["changed"] is True and doc["ok"] is False
    assert doc["counts"]["moved"] == 1 and doc["counts"]["same"] == 3
    moved = next(c for c in doc["claims"] if c["id"] == "fig7:about-46")
    assert moved["status"] == "moved" and moved["a"]["interval"][1] < moved["b"]["interval"][0]
    # a shift inside the noise is not a move: the intervals overlap
    n = _write(tmp_path / "n", _claims(size_samples=(45.5, 46.5, 47.5)))
    assert _rows(K.compare(a, n))["fig7:about-46"].status == K.SAME


def test_an_information_value_moves_on_its_t_interval_from_mean_spread_and_seeds():
    a = {"kind": "information", "verdict": "info", "measured": {"mean": 125.0, "spread": 5.0, "n": 3}}
    iv = K.interval(a)
    assert iv == pytest.approx((125 - 4.303 * 5 / 3 ** 0.5, 125 + 4.303 * 5 / 3 ** 0.5))
    far = {**a, "measured": {"mean": 250.0, "spread": 5.0, "n": 3}}
    assert K.moved(a, far)[0] is True and K.moved(a, a)[0] is False
    one = {**a, "measured": {"mean": 250.0, "spread": 0.0, "n": 1}}
    assert K.moved(a, one) == (None, "no interval in B (one seed, or no measured value)")
    unbounded = {**a, "measured": {"mean": 250.0, "spread": 0, "n": 1, "ci": [None, None]}}
    assert K.interval(unbounded) is None
    exact = {"kind": "value", "verdict": "pass", "measured": {"mean": 46.0, "spread": 0, "n": 3, "ci": [46.0, 46.0]}}
    assert K.moved(exact, {**exact, "measured": {**exact["measured"], "mean": 46.5, "ci": [46.5, 46.5]}})[0] is True
    assert K.moved(exact, exact)[0] is False
    # a comparison whose worst pair differs compares different quantities: not judged as moved
    ca = {"kind": "comparison", "verdict": "pass", "measured": {"mean": 4, "spread": 1, "n": 3, "ci": [3, 5],
                                                                 "detail": {"worst": "k=10"}}}
    cb = {**ca, "measured": {**ca["measured"], "ci": [8, 9], "detail": {"worst": "k=20"}}}
    assert K.moved(ca, cb)[0] is None


def test_claims_on_one_side_and_figures_not_reproduced_on_both(tmp_path):
    a = _write(tmp_path / "a", _claims())
    b = _write(tmp_path / "b", _claims(extra=True))
    cmp = K.compare(a, b)
    assert _rows(cmp)["fig8:a-new-claim"].status == K.ONLY_B and cmp.changed
    assert _rows(K.compare(b, a))["fig8:a-new-claim"].status == K.ONLY_A
    # B reproduced Fig 7 only (`--fig 7`): Fig 8's claims are not compared, and that is no change
    f7 = _write(tmp_path / "f7", [c for c in _claims() if c["figure"] == 7], figures=(7,))
    cmp = K.compare(a, f7)
    st = {r.id: r.status for r in cmp.rows}
    assert st == {"fig7:about-46": K.SAME, "fig7:a-above-b": K.SAME, "fig8:under-300-ms": K.NOT_COMPARED,
                  "fig8:no-nacks": K.NOT_COMPARED} and not cmp.changed
    assert "figure 8 reproduced only in A" in _rows(cmp)["fig8:no-nacks"].why
    # papers: one on one side only is not compared; none in common is an error
    _write(tmp_path / "a", _claims(), paper="q")
    cmp = K.compare(tmp_path / "a", b)
    assert {r.status for r in cmp.rows if r.paper == "q"} == {K.NOT_COMPARED}
    with pytest.raises(UsageError, match="no paper in common"):
        K.compare(tmp_path / "a" / "q", b)
    assert set(K.compare(tmp_path / "a", b, papers=["p"]).a) == {"p"}


def test_bad_input_is_one_line_naming_the_path(tmp_path, capsys):
    good = _write(tmp_path / "good", _claims())
    cases = []
    missing = tmp_path / "missing"
    cases.append((missing, f"{missing}: no such directory"))
    f = tmp_path / "file.txt"
    f.write_text("x")
    cases.append((f, f"{f}: not a directory"))
    empty = tmp_path / "empty"
    empty.mkdir()
    cases.append((empty, f"{empty}: no claims.json in it or in its subdirectories"))
    for name, text, msg in (("notjson", "{not json", "not valid JSON (Expecting property name enclosed in double "
                                                      "quotes at line 1 column 2)"),
                            ("noclaims", '{"paper": "p"}', "not a claims document"),
                            ("noverdict", '{"claims": [{"figure": 7, "id": "x", "measured": {}}]}',
                             "claim 0: no 'verdict'"),
                            ("badverdict", '{"claims": [{"figure": 7, "id": "x", "verdict": "great", "measured": {}}]}',
                             "claim 0: unknown verdict 'great'"),
                            ("noid", '{"claims": [{"figure": 7, "verdict": "pass", "measured": {}}]}',
                             "claim 0: no 'id' and no 'sentence'"),
                            ("twice", '{"claims": [{"figure": 7, "id": "x", "verdict": "pass", "measured": {}},'
                                      '{"figure": 7, "id": "x", "verdict": "pass", "measured": {}}]}',
                             "claim 1: claim id 'x' twice")):
        d = tmp_path / name / "p"
        d.mkdir(parents=True)
        (d / "claims.json").write_text(text)
        cases.append((tmp_path / name, f"{d / 'claims.json'}: {msg}"))
    for path, msg in cases:
        with pytest.raises(UsageError) as e:
            K.compare(good, path)
        assert str(e.value).startswith(msg), (str(e.value), msg)
        assert cli.main(["compare", str(good), str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: {msg}"), err


def test_a_claims_document_written_before_stamps_still_reads(tmp_path):
    """The bare list of claims (claims.json before stamps) reads, with result.json's paper and figures."""
    d = tmp_path / "old" / "ordering"
    d.mkdir(parents=True)
    (d / "claims.json").write_text(json.dumps(_claims()))
    (d / "result.json").write_text(json.dumps({"paper": "p", "figures": [7, 8], "scale": "quick"}))
    old = K.load(tmp_path / "old")
    assert set(old) == {"p"} and old["p"].stamp is None and old["p"].figures == (7, 8)
    new = _write(tmp_path / "new", _claims())
    cmp = K.compare(tmp_path / "old", new)
    assert not cmp.changed
    assert cmp.stamp_differences() == {"p": ["no stamp in A"]}
    assert "no stamp (written before stamps were recorded)" in K.table(cmp)


def test_stamp_differences_name_what_differs():
    other = {**STAMP, "code_version": "dddd", "git": {"commit": "e" * 40, "dirty": True},
             "machine": {**STAMP["machine"], "cores": 8}, "scale": "paper"}
    d = K.stamp_differences(STAMP, other)
    assert d == ["scale (quick vs paper)", "code version (aaaa vs dddd)", "git commit (cccccccccccc vs eeeeeeeeeeee)",
                 "machine cores (2 vs 8)"]
    assert K.stamp_differences(STAMP, STAMP) == []


def test_the_stamp_of_this_machine_and_checkout(tmp_path):
    m = machine()
    assert m["cores"] >= 1 and m["memory_gib"] > 0 and m["cpu"] and m["python"].count(".") == 2
    assert m["spark"] and m["java"]  # pyspark is installed with the extras, and the java it starts
    s = stamp(scale="quick", figures=[7], wall_s=12.34, load_runs={"load_1m_max": 3.0, "load_1m_mean": 2.0,
                                                                   "load_runs": 4}, load_start=[1.0, 1.0, 1.0],
              runs_elapsed_s=10.0, provider="local", jobs=1)
    assert (s["scale"], s["wall_s"], s["load"]["runs"], s["load"]["load_1m_max"]) == ("quick", 12.3, 4, 3.0)
    assert len(s["code_version"]) == 16 and s["code_version"] != s["code_version_analysis"]
    line = stamp_line(s)
    assert "scale quick" in line and "1-min load during 4 runs max 3.00, mean 2.00" in line
    assert f"{m['cores']} cores" in line and "wall 12 s (runs used: 10 s summed)" in line
    # git: a checkout's commit and whether its tracked files changed; not a checkout: None
    assert git_state(tmp_path) is None
    repo = tmp_path / "repo"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (repo / "f").write_text("1")
    run("add", "f")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    g = git_state(repo)
    assert len(g["commit"]) == 40 and g["dirty"] is False
    (repo / "f").write_text("2")
    assert git_state(repo)["dirty"] is True
    sub = repo / "sub"
    sub.mkdir()
    assert git_state(sub) is None  # inside some other checkout: not ours


def test_the_report_head_and_a_papers_page_carry_the_stamp(tmp_path):
    _write(tmp_path, _claims())
    res = {"paper": "p", "title": "Paper P", "scale": "quick", "figures": [7, 8], "stamp": STAMP,
           "created": STAMP["date"], "timings": {"total_s": 100.0}, "claims": _claims(), "checks": [],
           "figure_info": [], "runs": [{"name": "g/-/r0", "run": "../runs/x"}]}
    (tmp_path / "p" / "result.json").write_text(json.dumps(res))
    md, page = report.write_all(tmp_path)
    text = md.read_text()
    assert "| p | quick | 7, 8 | 2026-11-27T06:00:00Z | 100 s | aaaa | cccccccccccc | 2.50 max, 1.50 mean " \
           "(3 runs, 2 cores) |" in text
    assert "Machine: 2 cores, 23.5 GiB, AMD EPYC, Linux, Python 3.11.7, Java 17, Spark 4.3.0 (p)." in text
    assert "<td>aaaa</td><td>cccccccccccc</td>" in page.read_text()
    own = report.paper_markdown(res)
    assert own.splitlines()[2].startswith("Stamp: scale quick, 2026-11-27T06:00:00Z, code aaaa, commit cccccccccccc")
    shipped = report.paper_markdown(res, runs=False)
    assert "../runs/x" not in shipped and "1 entries (1 runs, the rest computed)" in shipped


def test_publish_writes_the_small_set_that_compares_equal(tmp_path, capsys):
    from testbed.analysis.plots import series_plot
    from testbed.experiments.publish import publish

    out = _write(tmp_path / "out", _claims())
    (out / "p" / "figures").mkdir()
    series_plot(out / "p" / "figures" / "fig7.png", "t", "x", "y", {"s": {1: [1, 2], 2: [3, 4]}}, [])
    res = {"paper": "p", "title": "Paper P", "scale": "quick", "figures": [7, 8], "stamp": STAMP,
           "claims": _claims(), "checks": [], "runs": [],
           "figure_info": [{"number": 7, "title": "t", "paper": "x", "image": "figures/fig7.png"},
                           {"number": 8, "title": "t", "paper": "x", "image": None}]}
    (out / "p" / "result.json").write_text(json.dumps(res))
    dest = tmp_path / "results"
    (dest / "p" / "figures").mkdir(parents=True)
    (dest / "p" / "figures" / "fig99.png").write_bytes(b"stale")
    to = publish(out, "p", dest)
    assert sorted(str(p.relative_to(to)) for p in to.rglob("*") if p.is_file()) == \
        ["REPORT.md", "claims.json", "figures/fig7.png"]
    assert "Stamp: scale quick" in (to / "REPORT.md").read_text()
    assert json.loads((to / "claims.json").read_text())["stamp"] == STAMP
    assert cli.main(["compare", str(dest / "p"), str(out)]) == 0
    # a reproduction written before stamps is not published (a reference must say what made it)
    (out / "p" / "claims.json").write_text(json.dumps(_claims()))
    with pytest.raises(UsageError, match="written before stamps"):
        publish(out, "p", dest)


def test_the_moved_rule_rarely_flags_seed_noise_and_sees_a_large_shift():
    """The rule on simulated seeds (seeded, so deterministic): unchanged values from one normal
    distribution are flagged under 2 % of the time with 3 seeds per side (the rejected rule, B's
    mean outside A's interval, over 5 %), and a shift of 6 standard deviations mostly is."""
    import random

    rng = random.Random(31)

    def claim(xs):
        return {"kind": "value", "verdict": "pass",
                "measured": {"mean": C.mean(xs), "spread": C.spread(xs), "n": 3, "ci": list(C.t_interval(xs))}}

    def rates(shift, trials=2000):
        moved = outside = 0
        for _ in range(trials):
            a, b = [rng.gauss(0, 1) for _ in range(3)], [rng.gauss(shift, 1) for _ in range(3)]
            moved += K.moved(claim(a), claim(b))[0] is True
            lo, hi = C.t_interval(a)
            outside += not lo <= C.mean(b) <= hi
        return moved / trials, outside / trials

    noise, noise_outside = rates(0)
    assert noise < 0.02 and noise_outside > 0.05, (noise, noise_outside)
    assert rates(6)[0] > 0.6
