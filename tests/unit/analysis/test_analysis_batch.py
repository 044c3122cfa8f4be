"""batch.read_runs: one file scan over many runs' Parquet, each run with its own t0 and clock offsets."""

import json

import pytest

from testbed.analysis.batch import read_runs
from testbed.analysis.ingest import ingest
from testbed.testing.synthetic import make_run_dir
from testbed.errors import AnalysisError


def _shift_t0(run, by_ns):
    m = json.loads((run / "manifest.json").read_text())
    m["t0_wall_ns"] += by_ns
    (run / "manifest.json").write_text(json.dumps(m))


def test_read_runs_is_one_scan_with_run_ids_and_per_run_time(spark, tmp_path):
    a = make_run_dir(tmp_path / "a", run_id="run-a", duration_s=4, publishers=1, subscribers=1, rate_per_s=3,
                     stall=None, torn=False, unknown_event=False)
    b = make_run_dir(tmp_path / "b", run_id="run-b", duration_s=6, publishers=1, subscribers=2, rate_per_s=2,
                     stall=None, torn=False, unknown_event=False, rome_offset_ms=300.0)
    _shift_t0(b.path, 1_000_000_000)  # run b's t_rel_s is 1 s earlier than its raw clock says
    ingest(spark, a.path)  # a is already ingested (its Parquet is reused), b is ingested by read_runs

    df = read_runs(spark, [a.path, b.path], "deliver")
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert plan.count("FileScan") == 1 or plan.count("Scan parquet") == 1, plan
    got = {r["run_id"]: r["count"] for r in df.groupBy("run_id").count().collect()}
    assert got == {"run-a": a.deliveries, "run-b": b.deliveries}

    for syn in (a, b):  # same rows, same t_rel_s as the run's own ingest
        own = ingest(spark, syn.path)
        assert own.report.reused
        mine = sorted((r["pub_id"], r["client"], round(r["t_rel_s"], 9), r["t_corr"]) for r in own["deliver"].collect())
        theirs = sorted((r["pub_id"], r["client"], round(r["t_rel_s"], 9), r["t_corr"])
                        for r in df.where(df.run_id == syn.path.name).collect())
        assert mine == theirs

    assert read_runs(spark, [a.path], "g_stats").count() == 0  # no such events: empty, typed
    with pytest.raises(AnalysisError, match="not declared"):
        read_runs(spark, [a.path], "martian")


def test_read_events_reads_the_parquet_with_the_runs_keys_and_the_logged_fields(spark, tmp_path):
    """read_events (the ordering and transactions figures' reader) gives every event of the type with its
    fields as logged (``t`` uncorrected) and the caller's run key; it reads the stored Parquet, making it
    first for a run without one, and the same rows come back once the Parquet exists."""
    from testbed.analysis.batch import read_events
    from testbed.analysis.ingest import event_schema
    from testbed.nodes.runtime.events import all_events

    a = make_run_dir(tmp_path / "a", run_id="run-a", duration_s=4, publishers=1, subscribers=1, rate_per_s=3,
                     stall=None)
    b = make_run_dir(tmp_path / "b", run_id="run-b", duration_s=3, publishers=2, subscribers=1, rate_per_s=2,
                     stall=None, rome_offset_ms=300.0)
    want = []
    for key, syn in (("A", a), ("B", b)):
        for p in sorted((syn.path / "logs").glob("*.jsonl")):
            for ln in p.read_text().splitlines():
                try:
                    e = json.loads(ln)
                except ValueError:
                    continue  # the torn line
                if e.get("ev") == "deliver":
                    want.append((key, e["t"], e["client"], e["pub_id"], e["hops"]))
    assert want
    for _ in range(2):  # converts the logs, then reuses the Parquet
        df = read_events(spark, {"A": str(a.path), "B": str(b.path)}, "deliver")
        assert df.columns == [f.name for f in event_schema(all_events()["deliver"]).fields] + ["run"]
        got = [(r["run"], r["t"], r["client"], r["pub_id"], r["hops"]) for r in df.collect()]
        assert sorted(got) == sorted(want)
        assert (a.path / "analysis" / "parquet" / "deliver").is_dir()


def test_read_runs_keeps_a_run_directory_name_with_plus_space_and_percent(spark, tmp_path):
    # Spark gives each row's file as a URI: the name is decoded back, a literal '+' not read as a space
    a = make_run_dir(tmp_path / "a", run_id="run+1 x%41", duration_s=3, publishers=1, subscribers=1, rate_per_s=3,
                     stall=None, torn=False, unknown_event=False)
    df = read_runs(spark, [a.path], "deliver")
    assert {r["run_id"] for r in df.select("run_id").distinct().collect()} == {a.path.name}
    assert a.path.name == "run+1 x%41"
