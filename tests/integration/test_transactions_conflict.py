"""On real processes: the §3.3 conflict workload (topologies/transactions/conflict.yaml) for D-TX,
D-TXNI and S-TX, checked by the batched checks (protocols/transactions/analysis/batch.py) over the three
runs at once. D-TX keeps P6 (no committed publication reaches both the old and the new
subscriber; commits in one order) with the workload really overlapping (probes aborted on a
conflict); D-TXNI and S-TX report P6, never fail it. Each run ends when its transactions are done
(the run-end condition), well before its 30 s bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import api

TOPO = Path(__file__).resolve().parents[2] / "topologies" / "transactions" / "conflict.yaml"
VARIANTS = ("dtx", "dtxni", "stx")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for v in VARIANTS:
        [rd] = api.run(str(TOPO), set_vars={"variant": v, "transactions": 10, "service_ms": 0, "link_delay": "5ms",
                                                     "link_jitter": "1ms"}, runs_dir=str(root), analyze=False)
        out[v] = str(rd.path)
    return out


def events(run: str, ev: str) -> list[dict]:
    out = []
    for f in sorted((Path(run) / "logs").glob("*.jsonl")):
        out += [json.loads(line) for line in f.read_text().splitlines() if f'"ev":"{ev}"' in line]
    return out


@pytest.mark.slow
def test_conflict_runs_end_when_their_transactions_are_done(runs):
    for v, run in runs.items():
        m = json.loads((Path(run) / "manifest.json").read_text())
        assert m.get("ended") == "finished" and m["workload_end_s"] < m["duration_s"] - 5, (v, m.get("workload_end_s"))
        begins = events(run, "tx_begin")
        ends = {e["tx"]: e for e in events(run, "tx_end")}
        assert len(ends) == len(begins)  # every begun transaction ended before the run did
        disp = [b["tx"] for b in begins if b["kind"] == "dispatch"]
        assert len(disp) == 10 and all(ends[t]["outcome"] == "committed" for t in disp), v
        assert any(b["kind"] == "probe" for b in begins)


@pytest.mark.slow
@pytest.mark.spark
def test_dtx_keeps_p6_in_a_conflict_run_and_the_others_report_it(runs):
    from testbed.analysis.session import spark_session
    from testbed.protocols.transactions.analysis.batch import check_runs

    res = check_runs(spark_session(), runs)
    for v in VARIANTS:
        by = {c["check"]: c for c in res[v]}
        bad = {k: c["examples"] for k, c in by.items() if not c["passed"]}
        assert bad == {}, (v, bad)
        assert by["transactions.p9_no_aborts"]["applies"] is False  # probes may abort on a conflict
        p6 = by["transactions.p6_commit_order"]
        assert p6["applies"] and p6["required"] == (v == "dtx")
    # D-TX: the workload overlapped the dispatches (a prepare found a conflict, its probe aborted)
    probes = {b["tx"] for b in events(runs["dtx"], "tx_begin") if b["kind"] == "probe"}
    assert any(p["conflict"] for p in events(runs["dtx"], "tx_phase") if p["phase"] == "prepare" and p["tx"] in probes)
    assert {e["outcome"] for e in events(runs["dtx"], "tx_end") if e["tx"] in probes} == {"committed", "aborted"}
