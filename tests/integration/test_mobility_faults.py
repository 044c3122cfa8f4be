"""Moves under faults, driven from the schedule, on real processes (reconfiguration protocol):
``topologies/mobility/faults.yaml`` with each ``case``. Scheduled moves and rejects fire through
the fault runner (control calls, actual times in the manifest); a target that rejects, a source
broker crash while its move waits for (2) and after it sent (4), and a link cut on the path.
In every case P2 and P3 hold (exactly one started copy, nothing delivered twice) and what is lost
is attributed to the fault by the checks. Plus a mobile publisher's scheduled moves (section 4.4).
The runs are analysed in one Spark session."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from testbed import api

TOPO = Path(__file__).resolve().parents[2] / "topologies" / "mobility" / "faults.yaml"
CASES = ("reject", "crash", "crash-xfer", "cut", "publisher")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for case in CASES:
        [rd] = api.run(str(TOPO), set_vars={"case": case}, runs_dir=str(root), analyze=False)
        out[case] = Path(rd.path)
    api.analyze_runs([str(p) for p in out.values()])
    return out


def checks(run: Path) -> dict:
    data = json.loads((run / "analysis" / "checks.json").read_text())
    items = data["checks"] if isinstance(data, dict) and "checks" in data else data
    return {c["name"].split("_", 1)[0]: c for c in items}


def events(run: Path, ev: str, **match) -> list[dict]:
    out = []
    for f in sorted((run / "logs").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            if f'"ev":"{ev}"' in line.replace(" ", ""):
                e = json.loads(line)
                if all(e.get(k) == v for k, v in match.items()):
                    out.append(e)
    return out


def timeline(run: Path) -> list[dict]:
    return json.loads((run / "manifest.json").read_text())["timeline"]


def all_pass(run: Path) -> dict:
    res = checks(run)
    assert {k: (v["violations"], v["examples"][:2]) for k, v in res.items() if not v["passed"]} == {}
    return res


@pytest.mark.slow
@pytest.mark.spark
def test_a_rejecting_target_makes_the_scheduled_move_fail_and_a_later_one_commit(runs):
    run = runs["reject"]
    res = all_pass(run)
    tl = timeline(run)
    # the schedule fired them as control calls; the broker hosting the client accepted each move
    assert [(e["op"], e["status"], e["accepted_by"]) for e in tl] == [
        ("reject", "done", ["b6"]), ("move", "done", ["b1"]), ("move", "done", ["b1"]), ("move", "done", ["b6"])]
    assert all(e["actual_s"] is not None and abs(e["actual_s"] - e["planned_s"]) < 1.0 for e in tl)
    ends = {e["mid"]: e["outcome"] for e in events(run, "move_end")}
    assert ends == {"m-0#1": "reject", "m-0#2": "commit", "m-1#1": "commit"}
    assert [e["dst"] for e in events(run, "move_end", mid="m-0#2")] == ["b5"]
    assert [e["mid"] for e in events(run, "move_step", step="reject_sent")] == ["m-0#1"]
    # the rejected move never started a target copy; nothing lost, nothing attributed
    assert not events(run, "client_state", mid="m-0#1", copy="tgt")
    assert res["P2"]["details"]["outcomes"] == {"commit": 2, "reject": 1}
    assert res["P4"]["attributed"] == 0 and res["P4"]["details"]["expected"] > 100


@pytest.mark.slow
@pytest.mark.spark
def test_a_source_crash_while_the_move_waits_loses_the_client_to_the_crash(runs):
    run = runs["crash"]
    res = all_pass(run)
    # the history shows the case: T queued a copy, S crashed before (2) came back
    assert [e["state"] for e in events(run, "client_state", mid="m-0#1")] == ["queued"]
    assert not events(run, "move_end", mid="m-0#1") and not events(run, "move_step", mid="m-0#1", step="xfer_sent")
    p2 = res["P2"]["details"]
    assert p2["moves_cut_by_source_crash"] == 1 and p2["clients_lost_in_crashes"] == 2  # m-0, m-2 (at b1)
    assert res["P8"]["details"]["left_by_source_crash"] > 0  # the blocked target's tentative entries
    assert set(res["P9"]["details"]["clients_lost_in_crashes"]) == {"m-0", "m-2"}
    assert res["P4"]["details"]["attributed_to_faults"] == res["P4"]["attributed"]
    # after the restart the other client's move commits
    assert [e["outcome"] for e in events(run, "move_end", client="m-1")] == ["commit"]


@pytest.mark.slow
@pytest.mark.spark
def test_a_source_crash_after_the_transfer_leaves_the_client_started_at_the_target(runs):
    run = runs["crash-xfer"]
    res = all_pass(run)
    steps = [e["step"] for e in events(run, "move_step", mid="m-0#1")]
    assert steps == ["xfer_sent", "xfer_recv"], steps  # (5) never reached the crashed source
    assert [e["node"] for e in events(run, "client_state", mid="m-0#1", state="started")] == ["b6"]
    assert not events(run, "move_end", mid="m-0#1")
    assert res["P2"]["details"]["moves_cut_by_source_crash"] == 1
    assert res["P2"]["details"]["clients_lost_in_crashes"] == 1  # m-2 stayed at b1; m-0 survived
    assert res["P3"]["passed"] and res["P1"]["passed"]


@pytest.mark.slow
@pytest.mark.spark
def test_a_cut_on_the_path_aborts_the_move_by_the_3pc_timeout(runs):
    run = runs["cut"]
    res = all_pass(run)
    ends = {e["mid"]: e for e in events(run, "move_end")}
    assert ends["m-0#1"]["outcome"] == "abort" and ends["m-0#1"]["dur_ms"] >= 1900  # move_timeout 2s
    assert ends["m-1#1"]["outcome"] == "commit"
    # the client kept running at its source: one started copy, no target copy started
    assert [e["state"] for e in events(run, "client_state", mid="m-0#1", copy="src")] == ["started"]
    assert not events(run, "client_state", mid="m-0#1", copy="tgt", state="started")
    p4 = res["P4"]
    assert p4["attributed"] == p4["details"]["attributed_to_faults"]  # losses only in the cut's window
    assert res["P2"]["details"]["outcomes"] == {"abort": 1, "commit": 1}


def _cli(*args: str, runs_dir: Path) -> "subprocess.CompletedProcess[str]":
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, TESTBED_RUNS=str(runs_dir)),
                          cwd=TOPO.parents[2])


@pytest.mark.slow
def test_testbed_inject_takes_move_and_reject_on_a_running_run(tmp_path):
    import time

    runs_dir = tmp_path / "runs"
    p = _cli("up", str(TOPO), "--set", "case=none", "--set", "duration=30s", runs_dir=runs_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    try:
        [run] = [d for d in runs_dir.iterdir() if d.is_dir()]
        deadline = time.monotonic() + 30
        while json.loads((run / "manifest.json").read_text()).get("status") != "running":
            assert time.monotonic() < deadline, "the workload never started"
            time.sleep(0.2)
        for fault in ("{reject: b6, for: 10s}", "{move: {client: m-0, to: b6}}"):
            p = _cli("inject", fault, runs_dir=runs_dir)
            assert p.returncode == 0, p.stdout + p.stderr
        time.sleep(1.0)  # the rejected move ends (one round trip on the path)
        for fault in ("{move: {client: m-0, to: b5}}", "{move: {client: m-9, to: b5}}"):
            p = _cli("inject", fault, runs_dir=runs_dir)
            assert p.returncode == 0, p.stdout + p.stderr
        bad = _cli("inject", "{move: {client: m-0, to: b9}}", runs_dir=runs_dir)
        assert bad.returncode != 0 and "move: unknown broker 'b9'" in bad.stdout + bad.stderr
        time.sleep(1.0)
    finally:
        _cli("down", runs_dir=runs_dir)
    injected = json.loads((run / "manifest.json").read_text())["injected"]
    assert [(e["op"], e["status"], e["accepted_by"]) for e in injected] == [
        ("reject", "done", ["b6"]), ("move", "done", ["b1"]), ("move", "done", ["b1"]), ("move", "skipped", [])]
    assert "client not started here" in injected[3]["error"]
    assert len({e["req"] for e in injected if e["op"] == "move"}) == 3  # one id per request, sent to every broker
    ends = {e["mid"]: (e["outcome"], e["dst"]) for e in events(run, "move_end")}
    assert ends == {"m-0#1": ("reject", "b6"), "m-0#2": ("commit", "b5")}
    # only the broker hosting the client logged anything about the moves (the others answered quietly)
    assert events(run, "move_skipped") == []


@pytest.mark.slow
@pytest.mark.spark
def test_a_mobile_publisher_moves_on_schedule_and_nothing_is_lost_or_duplicated(runs):
    run = runs["publisher"]
    res = all_pass(run)
    ends = [(e["src"], e["dst"], e["outcome"]) for e in events(run, "move_end", client="p-0")]
    assert ends == [("b1", "b6", "commit"), ("b6", "b7", "commit"), ("b7", "b1", "commit")]
    by_broker = collections.Counter(e["broker"] for e in events(run, "publish", client="p-0"))
    assert set(by_broker) == {"b1", "b6", "b7"}  # it published from every broker it lived at
    assert sum(1 for e in events(run, "deliver", publisher="p-0")) > 50
    assert res["P4"]["attributed"] == 0 and res["P3"]["passed"]
    # the advertisement ends where the publisher is: b1 holds it locally, every other broker toward b1
    dumps = {e["node"]: e for e in events(run, "rt_dump")}
    assert [x[1] for x in dumps["b1"]["srt"] if x[0] == "p-0:a1"] == ["@p-0"]
    assert [x[1] for x in dumps["b6"]["srt"] if x[0] == "p-0:a1"] == ["b5"]
