"""The batched checks (analysis/mobility/batch.py) give every run the verdict, violation count and
attributed count the per-run checks (checks.py) give it: on real histories logged by the broker
code (a clean reconfiguration run, a covering run whose losses are attributed to moves, and
reconfiguration runs broken in six ways), all checked together in one batch, so a broken run is
named among good ones whose node and client names are the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.analysis.context import AnalysisOptions
from testbed.analysis.mobility.batch import NAMES, check_runs

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


# a second started copy also has no routing entries where it lives: P9 fails with P2 (per run too)
BROKEN = {"two-copies": (two_copies, {"P2", "P9"}), "lost": (lose_in_move, {"P4"}),
          "dup": (duplicate_at_source, {"P1", "P3"}), "tentative": (tentative_left, {"P8"}),
          "off-path": (off_path, {"P7", "P9"}), "fifo": (fifo_swap, {"P6"})}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    cfgs, logs = history("reconfiguration")
    dirs = {"clean": write_run(root / "clean", cfgs, logs)}
    dirs["covering"] = write_run(root / "covering", *history("covering"))
    for name, (fn, _) in BROKEN.items():
        dirs[name] = write_run(root / name, cfgs, mutate(logs, fn))
    return {k: str(d) for k, d in dirs.items()}


def test_batched_verdicts_equal_the_per_run_checks(spark, runs):
    batched = check_runs(spark, runs, options=AnalysisOptions(settle_s=0.3, travel_margin_s=0.5))
    assert set(batched) == set(runs)
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
    ex = next(c for c in batched["off-path"] if c["check"] == "P9_routing_consistency")["examples"]
    assert any("stay-1:s1" in e for e in ex)
    ex = next(c for c in batched["dup"] if c["check"] == "P3_exactly_once")["examples"]
    assert ex and "|" not in ex[0]  # ids without the run prefix
