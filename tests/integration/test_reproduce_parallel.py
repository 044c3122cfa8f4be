"""`testbed reproduce` making runs two at a time (a paper's ``parallel``, or ``--jobs``): real
runs of the tiny topology (local processes), overlapping in time, each with its own ports, all
recorded in the index; a run that keeps failing stops the reproduction and leaves nothing up."""

import json
from pathlib import Path

import pytest

import testbed.experiments as E
from testbed.errors import RunError
from testbed.experiments.grid import Figure, Grid, Paper
from testbed.providers.local.provider import node_processes

TINY = str(Path(__file__).resolve().parent / "topologies" / "tiny")


def _paper(analyze=lambda ctx: None, parallel=None):
    return Paper(name="par", title="paper par", topology_dir=TINY, analyze=analyze,
                 parallel=parallel or {"quick": 2},
                 figures=(Figure(1, "f", ("g",), "stated"),),
                 grids=(Grid("g", "tiny.yaml", points={"quick": [{"rate": 10}, {"rate": 20}]},
                             repeats={"quick": 2}),))


def _interval(run: Path) -> tuple[float, float]:
    m = json.loads((run / "manifest.json").read_text())
    return m["t0_wall_ns"] / 1e9, m["end_wall_ns"] / 1e9


def test_two_at_a_time_overlap_and_all_are_recorded(tmp_path, monkeypatch):
    seen = {}

    def analyze(ctx):
        seen["runs"] = ctx.run_dirs("g")

    monkeypatch.setattr(E, "papers", lambda: {"par": _paper(analyze)})
    lines: list[str] = []
    E.reproduce("par", out_dir=tmp_path / "out", runs_dir=str(tmp_path / "runs"), progress=lines.append)
    assert any("4 to run, 2 at a time" in s for s in lines), lines
    index = json.loads((tmp_path / "out" / "par" / "index-quick.json").read_text())
    runs = [(tmp_path / "out" / "par" / e["run"]).resolve() for e in index.values()]  # relative to the index
    assert len(runs) == 4 and len(set(runs)) == 4 and len(seen["runs"]) == 4
    for r in runs:  # every run made whole: collected, with the subscriber's deliveries
        assert json.loads((r / "manifest.json").read_text())["status"] == "collected"
        assert any('"deliver"' in f.read_text() for f in (r / "logs").glob("*.jsonl"))
    spans = sorted(_interval(r) for r in runs)
    assert any(b0 < a1 for (a0, a1), (b0, b1) in zip(spans, spans[1:])), spans  # two ran at once
    ports = [[ep[k][1] for ep in json.loads((r / "deployment.json").read_text())["endpoints"].values()
              for k in ("data", "control")] for r in runs]
    every = [p for ps in ports for p in ps]
    assert len(every) == len(set(every)), ports
    assert not (tmp_path / "runs" / "reproduce-par-quick" / ".active").read_text().split()
    result = json.loads((tmp_path / "out" / "par" / "result.json").read_text())
    assert result["stats"]["jobs"] == 2


def test_jobs_overrides_the_paper(tmp_path, monkeypatch):
    monkeypatch.setattr(E, "papers", lambda: {"par": _paper()})
    lines: list[str] = []
    E.reproduce("par", out_dir=tmp_path / "out", runs_dir=str(tmp_path / "runs"), progress=lines.append,
                points={"rate": 10}, jobs=1)
    assert any("2 to run" in s for s in lines) and not any("at a time" in s for s in lines), lines
    result = json.loads((tmp_path / "out" / "par" / "result.json").read_text())
    assert result["stats"]["jobs"] == 1 and result["stats"]["ran"] == 2


def test_a_failing_run_stops_the_others_and_leaves_nothing_up(tmp_path, monkeypatch):
    from testbed import api

    real = api.run_one

    def one_fails(plan, path, set_vars, *a, **k):
        if set_vars.get("rate") == 20:
            raise RunError("b1: control request 'start' timed out after 5 s")
        return real(plan, path, set_vars, *a, **k)

    monkeypatch.setattr(api, "run_one", one_fails)
    monkeypatch.setattr(E, "papers", lambda: {"par": _paper()})
    with pytest.raises(RunError):
        E.reproduce("par", out_dir=tmp_path / "out", runs_dir=str(tmp_path / "runs"), progress=lambda s: None)
    root = tmp_path / "runs" / "reproduce-par-quick"
    assert not node_processes(str(root))
    active = root / ".active"
    assert not active.exists() or not active.read_text().split()


@pytest.mark.spark
def test_runs_a_grid_analyses_are_analysed_in_batches(tmp_path, monkeypatch):
    """A grid with ``analyze=True``: its made runs are analysed ANALYZE_BATCH at a time (one set of
    Spark jobs per batch, api.analyze_runs), each run's outputs written, every run in the index."""
    from testbed.experiments import runner

    paper = Paper(name="bat", title="paper bat", topology_dir=TINY, analyze=lambda ctx: None,
                  parallel={"quick": 2}, figures=(Figure(1, "f", ("g",), "stated"),),
                  grids=(Grid("g", "tiny.yaml", points={"quick": [{"rate": 10}, {"rate": 20}]},
                              repeats={"quick": 3}, analyze=True),))
    monkeypatch.setattr(E, "papers", lambda: {"bat": paper})
    monkeypatch.setattr(runner, "ANALYZE_BATCH", 4)
    lines: list[str] = []
    E.reproduce("bat", out_dir=tmp_path / "out", runs_dir=str(tmp_path / "runs"), progress=lines.append)
    # 6 runs: a batch of 4 once four were made, then the last 2
    assert [s for s in lines if "runs at once" in s] == ["bat: analysing 4 runs at once",
                                                         "bat: analysing 2 runs at once"], lines
    index = json.loads((tmp_path / "out" / "bat" / "index-quick.json").read_text())
    runs = [(tmp_path / "out" / "bat" / e["run"]).resolve() for e in index.values()]  # relative to the index
    assert len(runs) == 6 and len(set(runs)) == 6
    for r in runs:
        assert json.loads((r / "manifest.json").read_text())["status"] == "analyzed"
        checks = json.loads((r / "analysis" / "checks.json").read_text())
        by = {c["name"]: c for c in checks["checks"]}
        assert checks["ok"] and by["completeness"]["passed"] and by["no_duplicates"]["passed"], checks
