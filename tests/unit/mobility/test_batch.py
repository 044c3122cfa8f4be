"""The batched checks (protocols/mobility/analysis/batch.py) give every run the verdict, violation count and
attributed count the per-run checks (checks.py) give it: on real histories logged by the broker
code (a clean reconfiguration run, a covering run whose losses are attributed to moves, and
reconfiguration runs broken in six ways), all checked together in one batch, so a broken run is
named among good ones whose node and client names are the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.analysis.context import AnalysisOptions
from testbed.protocols.mobility.analysis.batch import NAMES, check_runs

from .test_checks import AFTER, _mover_delivery, history, mutate, results, write_run

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000_000_000 + int(AFTER * 1e9)


def two_copies(logs):
    last = max(r["m"] for r in logs if r["node"] == "b4")
    logs.append({"t": logs[-1]["t"], "m": last + 1, "node": "b4", "ev": "client_state", "mid": "",
                 "client": "m-0", "copy": "tgt", "state": "started"})


def lose_in_move(logs):
    ends = {r["mid"]: r["t"] for r in logs if r["ev"] == "move_end"}
    wins = [(r["client"], r["t"], ends[r["mid"]]) for r in logs if r["ev"] == "move_begin"]
    i = next(i for i, r in enumerate(logs) if r["ev"] == "deliver" and r["client"].startswith("m-")
             and r["pub_t"] < T0 + int(4e9)
             and any(c == r["client"] and lo - int(0.3e9) <= r["pub_t"] <= hi + int(0.3e9) for c, lo, hi in wins))
    del logs[i]


def duplicate_at_source(logs):
    b, d = _mover_delivery(logs)
    logs.append(dict(d, node=b["src"], m=max(r["m"] for r in logs if r["node"] == b["src"]) + 1))


def tentative_left(logs):
    dump = next(r for r in logs if r["ev"] == "rt_dump" and r["node"] == "b3")
    dump["tentative"] = [["m-0#1", "m-0:s1", "b4"]]


def off_path(logs):
    ch = next(r for r in logs if r["ev"] == "rt_change")
    logs.append(dict(ch, node="b7", m=ch["m"]))
    dump = next(r for r in logs if r["ev"] == "rt_dump" and r["node"] == "b3")
    dump["prt"] = [e for e in dump["prt"] if not e[0].startswith("stay-1")]


def fifo_swap(logs):
    ds = [i for i, r in enumerate(logs) if r["ev"] == "deliver" and r["client"] == "stay-0"
          and r["publisher"] == "pubs-0"]
    i, j = ds[5], ds[6]
    logs[i]["t"], logs[j]["t"], logs[i]["m"], logs[j]["m"] = logs[j]["t"], logs[i]["t"], logs[j]["m"], logs[i]["m"]


def both(*fns):
    def apply(logs):
        for fn in fns:
            fn(logs)
    return apply


# three broken runs, two independent breaks each (fewer runs: each costs a per-run analysis here). A
# second started copy also has no routing entries where it lives: P9 fails with P2 (per run too).
# (run directory names without "+": read_runs url-decodes the path, "+" would read as a space)
BROKEN = {"dup-tentative": (both(duplicate_at_source, tentative_left), {"P1", "P3", "P8"}),
          "copies-fifo": (both(two_copies, fifo_swap), {"P2", "P9", "P6"}),
          "lost-off-path": (both(lose_in_move, off_path), {"P4", "P7", "P9"})}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    cfgs, logs = history("reconfiguration")
    dirs = {"clean": write_run(root / "clean", cfgs, logs)}
    dirs["covering"] = write_run(root / "covering", *history("covering"))
    for name, (fn, _) in BROKEN.items():
        dirs[name] = write_run(root / name, cfgs, mutate(logs, fn))
    return {k: str(d) for k, d in dirs.items()}


@pytest.fixture(scope="module")
def fault_runs(tmp_path_factory):
    """Moves under faults (tests/unit/mobility/test_checks_faults.py's histories): a covering move cut
    on its path, with and without the cut in the manifest (same node and client names, one group:
    only the run's own fault windows tell them apart), and a reconfiguration client lost with its
    broker (its later misses attributed to the crash), also with the client groups in the plan."""
    from .test_checks_faults import crash, cut, move, restart, simulate

    tmp_path = tmp_path_factory.mktemp("faults")

    def timeline(run, rows):
        m = json.loads((run / "manifest.json").read_text())
        m["timeline"] = rows
        (run / "manifest.json").write_text(json.dumps(m))
        return run

    cfgs, logs, _ = simulate(tmp_path / "c", [(0.0, cut), (1.2, move("m-0", "b6"))], movement="covering",
                             delays=None)
    dirs = {"cut": timeline(write_run(tmp_path / "cut", cfgs, logs), [
        {"fault": 0, "op": op, "target": ["b3", "b4"], "planned_s": at, "actual_s": at, "status": "done",
         "window": [1.0, 2.0], "source": "cut: [b3, b4]"} for op, at in (("cut", 1.0), ("heal", 2.0))]),
        "cut-unrecorded": write_run(tmp_path / "cut-unrecorded", cfgs, logs)}
    cfgs, logs, restarts = simulate(tmp_path / "l", [(0.0, move("m-0", "b6")), (2.3, crash("b6")),
                                                     (2.6, restart("b6"))], rate=100.0, delays=None)
    dirs["lost"] = timeline(write_run(tmp_path / "lost", cfgs, logs, restarts=restarts), [
        {"fault": 0, "op": "crash", "target": ["b6"], "planned_s": 2.3, "actual_s": 2.3, "status": "done",
         "window": [2.3, 2.6], "source": "crash: b6"},
        {"fault": 1, "op": "restart", "target": ["b6"], "planned_s": 2.6, "actual_s": 2.6, "status": "done",
         "window": [2.6, 2.6], "source": "restart: b6"}])
    # the same history with the client groups in the plan: attribution by route (the restart's window
    # ends at the re-syncs the brokers logged), still equal batched and alone
    dirs["lost-routed"] = timeline(write_run(tmp_path / "lost-routed", cfgs, logs, restarts=restarts,
                                             clients=True),
                                   json.loads((dirs["lost"] / "manifest.json").read_text())["timeline"])
    return {k: str(d) for k, d in dirs.items()}


@pytest.fixture(scope="module")
def batched(spark, runs, fault_runs):
    """Both tests' runs checked in one batch (one set of Spark jobs per group, not one per test: issue
    #26; more runs side by side, each still given its own verdict)."""
    return check_runs(spark, {**runs, **fault_runs}, options=AnalysisOptions(settle_s=0.3, travel_margin_s=0.5))


def test_batched_verdicts_equal_the_per_run_checks(spark, runs, fault_runs, batched):
    assert set(batched) == set(runs) | set(fault_runs)
    for key, d in runs.items():
        per = {k: (r.passed, r.violations, r.attributed) for k, r in results(spark, Path(d)).items()}
        got = {c["check"].split("_", 1)[0]: (c["passed"], c["violations"], c["attributed"]) for c in batched[key]}
        assert [c["check"] for c in batched[key]] == NAMES
        assert got == per, key
    # the clean runs pass every check (covering: its losses attributed to moves); each broken run
    # fails exactly the checks its break is about, and is named among the good ones
    failing = {k: {c["check"].split("_", 1)[0] for c in v if not c["passed"]} for k, v in batched.items()}
    assert failing["clean"] == set() and failing["covering"] == set()
    cov_p4 = next(c for c in batched["covering"] if c["check"] == "P4_completeness")
    assert cov_p4["attributed"] > 0
    for name, (_, want) in BROKEN.items():
        assert failing[name] == want, name
    ex = next(c for c in batched["lost-off-path"] if c["check"] == "P9_routing_consistency")["examples"]
    assert any("stay-1:s1" in e for e in ex)
    ex = next(c for c in batched["dup-tentative"] if c["check"] == "P3_exactly_once")["examples"]
    assert ex and "|" not in ex[0]  # ids without the run prefix


def test_batched_fault_attribution_uses_each_runs_own_windows(spark, fault_runs, batched):
    """The fault runs (``fault_runs``): batched = per run, verdicts and attributions; the cut
    attributed only where the manifest has it, the lost client's misses attributed to the crash."""
    for key, d in fault_runs.items():
        per = {k: (r.passed, r.violations, r.attributed) for k, r in results(spark, Path(d)).items()}
        got = {c["check"].split("_", 1)[0]: (c["passed"], c["violations"], c["attributed"]) for c in batched[key]}
        assert got == per, key
    p2 = {k: next(c for c in batched[k] if c["check"] == "P2_move_atomicity") for k in fault_runs}
    assert p2["cut"]["passed"] and p2["cut"]["attributed"] == 2
    assert not p2["cut-unrecorded"]["passed"] and p2["cut-unrecorded"]["violations"] == 2
    p4 = next(c for c in batched["lost"] if c["check"] == "P4_completeness")
    assert p4["passed"] and p4["attributed"] > 0
