"""The batched checks (protocols/transactions/analysis/batch.py): many runs' histories in one Spark job per
check give each run the verdict the per-run checks give it: a broken run fails, with examples
naming its own ids, and the good runs beside it pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import api
from testbed.protocols.transactions.analysis.batch import check_runs
from testbed.experiments import topologies
from tests.unit.pubsub.harness import WALL0

from .test_checks import failed, history

pytestmark = pytest.mark.spark


def write_run(root: Path, name: str, variant: str, logs: list[dict], **params) -> str:
    """A run directory as the local provider leaves it: plan.json (reproduce.yaml's line of 3, the
    harness's node names), manifest.json, logs/<node>.jsonl."""
    path = str(topologies.find("transactions", "reproduce.yaml"))
    [plan] = [p for p in api.plans(path, {"variant": variant, "transactions": 3}, "local") if p.repeat_index == 0]
    d = plan.to_dict()
    d["params"].update(params)
    run = root / name
    (run / "logs").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps(d))
    (run / "manifest.json").write_text(json.dumps({"run_id": name, "t0_wall_ns": WALL0, "clock_offsets": {},
                                                   "duration_s": 6.0, "timeline": []}))
    by_node: dict[str, list[str]] = {}
    for r in logs:
        by_node.setdefault(r["node"], []).append(json.dumps(r))
    for n, lines in by_node.items():
        (run / "logs" / f"{n}.jsonl").write_text("\n".join(lines) + "\n")
    return str(run)


def test_batched_checks_give_every_run_its_own_verdict(spark, tmp_path):
    runs = {}
    for v in ("dtx", "stx", "blwait"):
        runs[f"{v}-good"] = write_run(tmp_path, f"run-{v}-good", v, history(v))
    # a second D-TX run whose b1 processed op5 before op3 of e-0.0:2 (P1), and the same ids as the
    # good D-TX run: only the namespacing keeps them apart
    bad = history("dtx")
    procs = {int(r["op_id"].rsplit("/", 1)[1]): r for r in bad
             if r["ev"] == "tx_proc" and r["node"] == "b1" and r["tx"] == "e-0.0:2"}
    procs[3]["k"], procs[5]["k"] = procs[5]["k"], procs[3]["k"]
    runs["dtx-bad"] = write_run(tmp_path, "run-dtx-bad", "dtx", bad)
    # a D-TXNI run with explicit aborts whose aborted op3 subscription stayed in b1's table (P5)
    leak = history("dtxni", abort_every=2)
    [r for r in leak if r["ev"] == "tx_tables" and r["node"] == "b1"][-1]["prt"]["e-0.0:2/3"] = "b2"
    runs["dtxni-leak"] = write_run(tmp_path, "run-dtxni-leak", "dtxni", leak, abort_every=2)

    res = check_runs(spark, runs)
    bad_of = {k: {c["check"] for c in rs if not c["passed"]} for k, rs in res.items()}
    assert bad_of == {"dtx-good": set(), "stx-good": set(), "blwait-good": set(),
                      "dtx-bad": {"transactions.p1_order"}, "dtxni-leak": {"transactions.p5_tables"}}
    # the same verdicts as the per-run checks
    assert set(failed(spark, bad, "dtx")) == {"transactions.p1_order"}
    p1 = next(c for c in res["dtx-bad"] if c["check"] == "transactions.p1_order")
    assert any(json.loads(e)["node"] == "b1" and json.loads(e)["a"] == "e-0.0:2/3" for e in p1["examples"])
    p5 = next(c for c in res["dtxni-leak"] if c["check"] == "transactions.p5_tables")
    assert p5["violations"] == 1 and json.loads(p5["examples"][0])["sub_id"] == "e-0.0:2/3"
    # what does not apply is said so: BL-WAIT has no tx_proc; P9 not with explicit aborts
    by = {c["check"]: c for c in res["blwait-good"]}
    assert by["transactions.p1_order"]["applies"] is False and by["transactions.p2_routing"]["applies"] is True
    assert next(c for c in res["dtxni-leak"] if c["check"] == "transactions.p9_no_aborts")["applies"] is False
    assert all(len(rs) == 9 for rs in res.values())  # P1-P6, p3_expected, p6_serial_order, P9


def test_batched_checks_keep_advpub_runs_srt_entries_apart(spark, tmp_path):
    """Two advpub runs (scenario advpub, same ids): their SRT keys are namespaced like the PRT's,
    so the good one passes P5 and only the one whose aborted advertisement stayed fails."""
    from .test_advpub import history as advpub_history

    good = advpub_history("dtxni")
    leak = advpub_history("dtxni")
    [r for r in leak if r["ev"] == "tx_tables" and r["node"] == "b2"][-1]["srt"]["e-0.0:3/3"] = "b1"
    runs = {k: write_run(tmp_path, f"run-{k}", "dtxni", logs, abort_every=3, scenario="advpub")
            for k, logs in (("good", good), ("leak", leak))}
    res = check_runs(spark, runs)
    bad_of = {k: {c["check"] for c in rs if not c["passed"]} for k, rs in res.items()}
    assert bad_of == {"good": set(), "leak": {"transactions.p5_tables"}}
    p5 = next(c for c in res["leak"] if c["check"] == "transactions.p5_tables")
    assert [(json.loads(e)["table"], json.loads(e)["sub_id"]) for e in p5["examples"]] == [("srt", "e-0.0:3/3")]


def test_p8_batched_over_runs_equals_each_run_alone(spark, tmp_path):
    """P8 (the pub/sub core's checks on the regular traffic, Fig 9) batched over several runs
    gives each run what check_run gives it alone: a run that lost a delivery fails completeness,
    the good runs beside it pass."""
    from testbed.protocols.transactions.analysis.measure import check_run, pubsub_check_runs

    from .harness import run as sim_run

    logs = {v: sim_run(v, seconds=4, transactions=2, regular_rate=40.0, round_size=40).logs for v in ("dtx", "stx")}
    runs = {f"{v}-good": write_run(tmp_path, f"run-{v}-good", v, logs[v], regular_rate=40.0, round_size=40)
            for v in logs}
    lossy = [dict(r) for r in logs["dtx"]]
    delivers = [i for i, r in enumerate(lossy) if r["ev"] == "deliver"]
    assert len(delivers) > 20
    del lossy[delivers[len(delivers) // 2]]
    runs["dtx-lossy"] = write_run(tmp_path, "run-dtx-lossy", "dtx", lossy, regular_rate=40.0, round_size=40)

    names = {"check_no_duplicates", "check_filter_match", "check_fifo", "check_completeness"}
    together = pubsub_check_runs(spark, runs)
    for key, d in runs.items():
        alone = check_run(spark, d, names)
        assert sorted(together[key], key=lambda c: c["check"]) == sorted(alone, key=lambda c: c["check"]), key
    failed_of = {k: {c["check"] for c in rs if not c["passed"]} for k, rs in together.items()}
    assert failed_of == {"dtx-good": set(), "stx-good": set(), "dtx-lossy": {"completeness"}}, together
