"""The ordering protocol on real processes: brokers, TM servers and client hosts on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import api
from testbed.protocols.ordering.analysis.history import check_completeness, check_ooo_tags, check_tno
from testbed.protocols.ordering.analysis.logs import load_history

TOPO = Path(__file__).resolve().parents[2] / "topologies" / "ordering" / "smoke.yaml"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for ens in ("reliable", "unreliable"):
        [rd] = api.run(str(TOPO), set_vars={"duration": "3s", "ens": ens}, runs_dir=str(root),
                       analyze=False)
        out[ens] = Path(rd.path)
    return out


@pytest.mark.slow
def test_reliable_run_keeps_tno_and_completeness(runs):
    hist = load_history(runs["reliable"])
    notes = [h for h in hist if h["ev"] == "o_notify"]
    stamps = [h for h in hist if h["ev"] == "o_ens_publish"]
    assert len(stamps) > 50 and len(notes) > 50
    assert check_tno(hist)["passed"]
    last = max(h["t"] for h in notes)
    comp = check_completeness(hist, until=last - 1.0)
    assert comp["passed"], comp
    assert comp["expected"] > 20
    # the TM servers counted what they did
    stats = [json.loads(l) for l in (runs["reliable"] / "logs" / "tm1.jsonl").read_text().splitlines()
             if '"o_tm_stats"' in l]
    assert stats and stats[-1]["created"] > 0


@pytest.mark.slow
def test_unreliable_run_tags_correctly(runs):
    hist = load_history(runs["unreliable"])
    assert sum(h["ev"] == "o_notify" for h in hist) > 50
    assert check_ooo_tags(hist)["passed"]


@pytest.mark.slow
@pytest.mark.spark
def test_spark_checks_and_metrics(runs):
    from testbed.protocols.ordering.analysis.checks import CHECKS
    from testbed.analysis.context import AnalysisContext
    from testbed.analysis.ingest import ingest
    from testbed.protocols.ordering.analysis.metrics import run_metrics
    from testbed.analysis.session import spark_session

    run = runs["reliable"]
    spark = spark_session()
    ing = ingest(spark, run, write=False)
    ctx = AnalysisContext.build(spark, run, json.loads((run / "plan.json").read_text()),
                                json.loads((run / "manifest.json").read_text()), dict(ing))
    res = {r.name: r for r in (c(ctx) for c in CHECKS)}
    assert res["tno"].passed and res["completeness"].passed
    assert res["liveness"].passed, res["liveness"]
    assert 1.0 < res["liveness"].details["bound_s"] < 3.0  # the smoke topology's 20 ms links
    d = res["completeness"].details  # what the report's completeness line prints
    assert d["delivered"] == d["expected"] and d["settle_s"] > 0 and d["travel_margin_s"] >= 0
    assert res["completeness"].details["expected"] > 20
    m = run_metrics(dict(ing), spark)
    assert m["n"] > 50 and m["size_mean"] >= 1 and m["latency_mean_ms"] > 0
    assert set(m["servers"]) == {"tm1", "tm2"}


@pytest.mark.slow
@pytest.mark.spark
def test_reproduce_spark_path_reads_many_runs(runs):
    """The multi-run Spark job of ``testbed reproduce ordering`` (protocols/ordering/analysis/runs.py: metrics, checks)."""
    from testbed.protocols.ordering.analysis.runs import spark_checks, spark_metrics
    from testbed.analysis.session import spark_session

    spark = spark_session()
    dirs = {k: str(v) for k, v in runs.items()}
    summary, bw = spark_metrics(spark, dirs)
    for k in dirs:
        assert summary[k]["n"] > 50 and summary[k]["throughput_per_s"] > 0
        assert set(bw[k]) == {"tm1", "tm2"}
    checks = spark_checks(spark, dirs)
    props = {k: {r["property"]: r for r in v} for k, v in checks.items()}
    assert props["reliable"]["tno"]["passed"] and props["reliable"]["completeness"]["passed"]
    assert props["reliable"]["completeness"]["expected"] > 20
    assert props["unreliable"]["ooo_tagging"]["passed"]
    assert props["reliable"]["liveness"]["passed"] and props["unreliable"]["liveness"]["passed"]
