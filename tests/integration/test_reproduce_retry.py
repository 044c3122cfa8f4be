"""A run of a reproduction that raised (an error of the testbed, e.g. a node missing a control
timeout on a loaded machine) is tried once more, and the failed attempt is kept in the index."""

import json
from pathlib import Path

import testbed.experiments as E
from testbed.errors import RunError
from testbed.experiments.grid import Figure, Grid, Paper

TINY = str(Path(__file__).resolve().parent / "topologies" / "tiny")


def _one_run_paper(analyze=lambda ctx: None):
    return Paper(name="r", title="paper r", topology_dir=TINY, analyze=analyze,
                 figures=(Figure(1, "f", ("g",), "stated"),),
                 grids=(Grid("g", "tiny.yaml", points={"quick": [{"rate": 10}]}, repeats={"quick": 1}),))


def test_a_run_that_raised_is_tried_once_more_and_the_failure_recorded(tmp_path, monkeypatch):
    """Real runs (the tiny topology, local processes): the first attempt is made to fail the way a
    loaded machine makes it fail (an error before the workload), the second is the real run."""
    from testbed import api

    real, calls = api.run_one, []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) == 1:
            raise RunError("b1: control request 'start' timed out after 5 s")
        return real(*a, **k)

    monkeypatch.setattr(api, "run_one", flaky)
    monkeypatch.setattr(E, "papers", lambda: {"r": _one_run_paper()})
    lines: list[str] = []
    E.reproduce("r", out_dir=tmp_path / "out", runs_dir=str(tmp_path / "runs"), progress=lines.append)
    assert len(calls) == 2
    assert any("trying it again (2/2)" in s for s in lines), lines
    [entry] = json.loads((tmp_path / "out" / "r" / "index-quick.json").read_text()).values()
    assert entry["failed_attempts"][0]["error"].startswith("RunError: b1: control request")
    assert (tmp_path / "out" / "r" / entry["run"]).is_dir()  # stored relative to the index
