"""End to end: a synthetic run directory through analyze() with a real local Spark."""

import json

import pytest

from testbed.analysis.job import analyze, validate_run_dir
from testbed.testing.synthetic import make_run_dir
from testbed.errors import AnalysisError

pytestmark = pytest.mark.spark


def test_analyze_synthetic_run_end_to_end(spark, tmp_path):
    syn = make_run_dir(tmp_path, duration_s=20.0, publishers=2, subscribers=2, rate_per_s=5.0,
                       stall=(8.0, 10.0), rome_offset_ms=50.0, duplicate=True, torn=True, unknown_event=True)
    assert 300 <= syn.events <= 1000 and syn.lost_in_fault > 0
    lines: list[str] = []
    res = analyze(syn.path, spark=spark, progress=lines.append)
    out = syn.path / "analysis"

    # phases reported
    assert [ln.split(":")[0] for ln in lines][:1] == ["ingest"]
    assert any(ln.startswith("check completeness: PASS") for ln in lines)
    assert any(ln.startswith("check no_duplicates: FAIL") for ln in lines)

    # checks: the injected duplicate fails its check; the stall losses are attributed, not violations
    by = {c.name: c for c in res.checks}
    assert set(by) == {"no_duplicates", "filter_match", "fifo", "completeness", "control_provenance", "node_lives"}
    assert by["control_provenance"].passed and by["node_lives"].passed  # the runtime-wide checks, for every protocol
    assert not res.ok
    assert not by["no_duplicates"].passed and by["no_duplicates"].violations == 1
    assert by["no_duplicates"].examples[0]["client"] == "locs-0"
    assert by["filter_match"].passed and by["fifo"].passed
    comp = by["completeness"]
    assert comp.passed and comp.violations == 0
    assert comp.attributed == syn.lost_in_fault
    assert comp.details["attributed_by_fault"]["0"]["source"] == "{at: 8s, stall: b2, for: 2s}"

    cj = json.loads((out / "checks.json").read_text())
    assert cj["ok"] is False and [c["name"] for c in cj["checks"]] == [c.name for c in res.checks]
    assert next(c for c in cj["checks"] if c["name"] == "completeness")["attributed"] == syn.lost_in_fault

    # ingest: torn line and unknown event counted, not fatal
    ing = json.loads((out / "ingest.json").read_text())
    assert ing["malformed"] == 1 and ing["malformed_by_file"] == {"b2.jsonl": 1}
    assert ing["unknown"] == {"mystery_event": 1}
    assert sum(ing["events"].values()) == syn.events
    assert ing["events"]["deliver"] == syn.deliveries
    assert (out / "parquet" / "deliver").is_dir()

    # metrics: latency corrected by the 50 ms clock offset of the rome host
    m = json.loads((out / "metrics.json").read_text())
    lat = {(r["pub_site"], r["sub_site"]): r for r in m["latency"]}
    assert set(lat) == {("ny", "ny"), ("ny", "rome")}
    assert lat[("ny", "rome")]["p50_ms"] == pytest.approx(40.0, abs=0.01)  # 90 ms without the correction
    assert lat[("ny", "ny")]["p99_ms"] == pytest.approx(4.0, abs=1.01)  # 4 ms, the duplicate at +1 ms
    assert sum(r["count"] for r in m["latency"]) == syn.deliveries
    assert sum(m["rate"]["delivered"]) == syn.deliveries and m["rate"]["bin_s"] == 1.0
    f0 = m["faults"][0]
    assert f0["fault"] == 0 and f0["status"] == "done" and f0["missing_attributed"] == syn.lost_in_fault
    assert f0["actual"] == pytest.approx([8.012, 10.012])

    # figures: real PNGs
    names = sorted(p.name for p in res.figures)
    assert names == ["delivered_rate.png", "fault_timeline.png", "latency_cdf.png"]
    for p in res.figures:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000

    # report
    md = res.report.read_text()
    assert res.report == out / "report.md"
    assert "# Analysis of run `synthetic-run`" in md and "**Result: FAIL**" in md
    assert "| provider | local |" in md and "| emulation | userspace |" in md and "| version: testbed | 0.1.0 |" in md
    assert "| 0 | stall | b2 | 8.000 | 8.012 | 12.0 | done |" in md
    assert "| no_duplicates | **FAIL** | 1 | 0 |" in md
    assert f"| completeness | PASS | 0 | {syn.lost_in_fault} |" in md
    assert "| ny | rome |" in md and "![latency_cdf](figures/latency_cdf.png)" in md
    assert "`b2.jsonl`: 1 line(s)" in md
    assert res.report_html == out / "report.html" and "no_duplicates" in res.report_html.read_text()


def test_unattributed_loss_fails_end_to_end(spark, tmp_path):
    syn = make_run_dir(tmp_path, lost=True, torn=False, unknown_event=False, stall=(8.0, 10.0))
    res = analyze(syn.path, spark=spark, progress=lambda s: None)
    by = {c.name: c for c in res.checks}
    assert not res.ok
    assert not by["completeness"].passed and by["completeness"].violations == 1
    assert by["completeness"].attributed == syn.lost_in_fault
    assert by["no_duplicates"].passed
    assert "| completeness | **FAIL** | 1 |" in res.report.read_text()


def test_bad_run_dirs_are_one_line_errors(tmp_path):
    with pytest.raises(AnalysisError, match="no such run directory"):
        validate_run_dir(tmp_path / "nope")
    with pytest.raises(AnalysisError, match="no plan.json"):
        validate_run_dir(tmp_path)
    (tmp_path / "plan.json").write_text("{\"name\": ")
    with pytest.raises(AnalysisError, match=r"plan.json:1:\d+: invalid JSON"):
        validate_run_dir(tmp_path)
    (tmp_path / "plan.json").write_text("{\"name\": \"x\"}")
    with pytest.raises(AnalysisError, match="not a valid plan"):
        validate_run_dir(tmp_path)
    syn = make_run_dir(tmp_path / "r")
    for p in (syn.path / "logs").iterdir():
        p.unlink()
    with pytest.raises(AnalysisError, match="no event logs"):
        validate_run_dir(syn.path)


TOY_CHECKS = """
from testbed.analysis.checks import CheckResult


def check_publishes_counted(ctx):
    n = ctx.df("publish").count()
    return CheckResult("publishes_counted", n > 0, 0 if n else 1, details={"publishes": n})


def check_broken(ctx):
    raise RuntimeError("boom")


CHECKS = [check_publishes_counted, check_broken]
"""

TOY_FIGURES = """
def stall_count(ctx, out):
    import matplotlib.pyplot as plt

    n = ctx.df("stall").count()
    fig, ax = plt.subplots()
    ax.bar(["stall events"], [n])
    ax.set_ylabel("events")
    p = out / "zzproto_stalls.png"
    fig.savefig(p)
    plt.close(fig)
    return [p]


FIGURES = [stall_count]
"""


def test_other_protocol_runs_generic_parts_and_its_registered_checks_and_figures(spark, tmp_path, monkeypatch):
    """A protocol outside the repository (an entry point): its checks and figures run with the
    generic parts; a checker that raises fails its own check without losing the analysis."""
    import importlib.metadata as md
    import sys

    from testbed import registry as protocols

    proto = "zzproto"
    pkg = tmp_path / "src" / proto
    (pkg / "analysis").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "topology.py").write_text("from testbed.protocols.pubsub.topology import *  # noqa\n")
    (pkg / "analysis" / "__init__.py").write_text("")
    (pkg / "analysis" / "checks.py").write_text(TOY_CHECKS)
    (pkg / "analysis" / "figures.py").write_text(TOY_FIGURES)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))

    class EP:
        name, value, dist = proto, proto, None

        def load(self):
            import importlib

            return importlib.import_module(proto)

    monkeypatch.setattr(md, "entry_points", lambda group=None: [EP()] if group == protocols.ENTRY_POINT_GROUP else [])
    protocols.reset()
    monkeypatch.setattr(protocols, "_REGISTRY", None)  # rebuilt now, forgotten after the test
    assert [c.__name__ for c in protocols.checks_for(proto)] == ["check_publishes_counted", "check_broken"]

    syn = make_run_dir(tmp_path, duration_s=6.0, rate_per_s=2.0, subscribers=1, stall=(2.0, 3.0), torn=False)
    plan = json.loads((syn.path / "plan.json").read_text())
    plan["protocol"] = proto
    (syn.path / "plan.json").write_text(json.dumps(plan))

    res = analyze(syn.path, spark=spark, progress=lambda s: None)
    by = {c.name: c for c in res.checks}
    assert set(by) == {"publishes_counted", "broken", "control_provenance", "node_lives"}  # + the runtime-wide checks
    assert by["publishes_counted"].passed and by["publishes_counted"].details["publishes"] == syn.publications
    assert not by["broken"].passed and by["broken"].details["error"] == "RuntimeError: boom"
    assert not res.ok
    assert sorted(p.name for p in res.figures) == ["delivered_rate.png", "fault_timeline.png", "latency_cdf.png",
                                                   "zzproto_stalls.png"]
    report = res.report.read_text()
    assert "| protocol | zzproto |" in report and "| broken | **FAIL** |" in report
    assert "zzproto_stalls.png" in report
    for m in [m for m in sys.modules if m.startswith(proto)]:
        del sys.modules[m]
