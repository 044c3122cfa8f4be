"""analyze_batch: the shared checks and the metrics computed once over many runs give every run the
same checks.json and metrics.json as its analysis alone, on clean and broken runs."""

import json

from testbed.analysis.job import analyze, analyze_batch
from testbed.testing.synthetic import make_run_dir


def _outputs(run):
    a = run / "analysis"
    return json.loads((a / "checks.json").read_text()), json.loads((a / "metrics.json").read_text())


def _runs(tmp_path):
    clean = make_run_dir(tmp_path / "clean", run_id="clean", duration_s=12, rate_per_s=4)
    broken = make_run_dir(tmp_path / "broken", run_id="broken", duration_s=16, rate_per_s=5, duplicate=True,
                          lost=True, subscribers=3, rome_offset_ms=120.0)
    # a run whose fault timeline lost its entries: the stall's ctl changes and misses are unexplained
    unexplained = make_run_dir(tmp_path / "unexplained", run_id="unexplained", duration_s=12, rate_per_s=3,
                               stall=(4.0, 6.0), publishers=1, torn=False)
    m = json.loads((unexplained.path / "manifest.json").read_text())
    m["timeline"] = []
    m["workload_end_s"] = 9.0  # another end of workload than the others' (completeness is per-run)
    (unexplained.path / "manifest.json").write_text(json.dumps(m))
    log = unexplained.path / "logs" / "b2.jsonl"
    first = json.loads(log.read_text().splitlines()[0])  # b2's node_start, 2 s before t0
    stall = {"t": first["t"] + 6_000_000_000, "m": first["m"] + 6_000_000_000, "node": "b2", "ev": "ctl_applied",
             "op": "stall", "origin": "unknown", "peer": "127.0.0.1:1", "ok": True, "args": ["2.0"]}
    with log.open("a") as f:
        f.write(json.dumps(stall) + "\n")
    nofault = make_run_dir(tmp_path / "nofault", run_id="nofault", duration_s=8, rate_per_s=6, stall=None,
                           torn=False, unknown_event=False)
    return [clean.path, broken.path, unexplained.path, nofault.path]


def test_batch_equals_each_run_alone(spark, tmp_path):
    runs = _runs(tmp_path)
    alone = {}
    for r in runs:
        analyze(r, spark=spark, progress=lambda _: None)
        alone[r.name] = _outputs(r)
    lines = []
    res = analyze_batch(runs, spark=spark, progress=lines.append)
    assert [x.run_dir.name for x in res] == [r.name for r in runs]
    for r, x in zip(runs, res):
        checks, metrics = _outputs(r)
        assert checks == alone[r.name][0], r.name
        assert metrics == alone[r.name][1], r.name
        assert x.ok == alone[r.name][0]["ok"]
    # the runs are really different, clean and broken, so the equality above means something
    verdicts = {r.name: {c["name"]: (c["passed"], c["violations"], c["attributed"]) for c in alone[r.name][0]["checks"]}
                for r in runs}
    assert verdicts["clean"]["no_duplicates"] == (True, 0, 0)
    assert verdicts["clean"]["completeness"][2] > 0  # the stall's misses attributed
    assert verdicts["broken"]["no_duplicates"] == (False, 1, 0)
    assert verdicts["broken"]["completeness"][:2] == (False, 1)
    assert verdicts["unexplained"]["control_provenance"][0] is False
    assert verdicts["unexplained"]["control_provenance"][1] == 1
    assert verdicts["nofault"]["completeness"] == (True, 0, 0)
    assert any(ln.startswith("batch pubsub_checks: 4 run(s) at once") for ln in lines), lines
    assert any(ln.startswith("ingest: 4 runs") for ln in lines) and any(ln.startswith("metrics: 4 run(s)")
                                                                         for ln in lines)
    assert any("batched" in ln for ln in lines)


def test_a_failing_batched_part_is_computed_run_by_run(spark, tmp_path, monkeypatch):
    """A batched part that raises does not fail the batch: each run computes it alone, same outputs."""
    from testbed.analysis import batch_checks

    runs = _runs(tmp_path)[1:3]
    alone = {}
    for r in runs:
        analyze(r, spark=spark, progress=lambda _: None)
        alone[r.name] = _outputs(r)

    def boom(self):
        raise RuntimeError("injected")

    monkeypatch.setattr(batch_checks.Batch, "_provenance", boom)
    monkeypatch.setattr(batch_checks.Batch, "_metrics", boom)
    lines = []
    analyze_batch(runs, spark=spark, progress=lines.append)
    for r in runs:
        assert _outputs(r) == alone[r.name], r.name
    assert any("batch control_provenance: failed (RuntimeError: injected)" in ln for ln in lines), lines
    assert sum("check control_provenance" in ln and "batched" not in ln for ln in lines) == 2
