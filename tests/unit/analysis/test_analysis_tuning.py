"""Per-run tuning of a shared session and the per-analysis persisted tables (a real local Spark)."""

from testbed.analysis.context import AnalysisContext
from testbed.analysis.ingest import ingest
from testbed.protocols.pubsub.analysis import checks as P
from testbed.testing.synthetic import make_run_dir


def test_tune_for_input_turns_aqe_and_codegen_off_for_small_runs_and_back_on_for_large(spark):
    from testbed.analysis.session import configure, tune_for_input

    keys = ("spark.sql.adaptive.enabled", "spark.sql.codegen.wholeStage", "spark.sql.shuffle.partitions")
    before = {k: spark.conf.get(k) for k in keys}
    try:
        assert tune_for_input(spark, 1 << 20) == 1
        assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
        n = tune_for_input(spark, 400 << 20)
        assert n == int(spark.conf.get("spark.sql.shuffle.partitions")) > 1
        assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
        configure(conf={"spark.sql.adaptive.enabled": "true"})  # --spark-conf wins
        tune_for_input(spark, 1 << 20)
        assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    finally:
        configure()
        for k, v in before.items():
            spark.conf.set(k, v)



def test_checks_share_one_pairs_table(spark, tmp_path):
    import json

    syn = make_run_dir(tmp_path, duration_s=6.0, rate_per_s=2.0, subscribers=1, duplicate=True, torn=False)
    ev = ingest(spark, syn.path)
    plan = json.loads((syn.path / "plan.json").read_text())
    manifest = json.loads((syn.path / "manifest.json").read_text())
    ctx = AnalysisContext.build(spark, syn.path, plan, manifest, dict(ev))
    dup = P.check_no_duplicates(ctx)
    assert not dup.passed and dup.violations == 1  # the injected duplicate, from the shared pass
    shared = ctx.results["pubsub.judged"]
    assert P.check_filter_match(ctx).passed and P.check_completeness(ctx).passed
    assert ctx.results["pubsub.judged"] is shared  # one aggregation and one tally for the three checks
    details = ctx.results["completeness"]
    assert details["expected"] == details["delivered"] > 0 and details["attributed_by_fault"] == {}
    ctx.release()
