"""``testbed explore`` options: bad input is one clear line (exit 2) and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cli import main
from testbed.errors import UsageError
from testbed.explore.runner import parse_budget, parse_kinds

ROOT = Path(__file__).resolve().parents[3]


def test_budget_and_kinds_parse_or_say_what_is_allowed():
    assert parse_budget("90s") == 90 and parse_budget("30m") == 1800 and parse_budget("2h") == 7200
    for bad in ("30", "m", "-1m", "1x"):
        with pytest.raises(UsageError, match="a time with a unit"):
            parse_budget(bad)
    assert parse_kinds("cut, crash,cut", ("crash", "cut"), "--faults") == ("cut", "crash")
    assert parse_kinds(None, ("crash", "cut"), "--faults") == ("crash", "cut")
    assert parse_kinds(None, ("links",), "--vary") == ()
    with pytest.raises(UsageError, match=r"--vary 'speed': one of links"):
        parse_kinds("speed", ("links",), "--vary")


@pytest.mark.parametrize("args,message", [
    (["topologies/smoke.yaml", "--faults", "crash,boom"], "--faults 'boom': one of crash, stall, pause"),
    (["topologies/echo/smoke.yaml"], "duration 3s is too short to explore"),
    (["topologies/ordering/fig10-quick.yaml"], "has a sweep/repeat of 10 runs; explore takes one topology"),
    (["--resume", "nope"], "--resume nope: no exploration there"),
    (["topologies/smoke.yaml", "--jobs", "0"], "--jobs: at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["explore", *args, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_runs_and_budget_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as e:
        main(["explore", "topologies/smoke.yaml", "--runs", "3", "--budget", "5m"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_summary_markdown_keeps_one_cell_per_column():
    from testbed.explore.runner import summary_markdown

    doc = {"id": "x", "settings": {"topology": "t.yaml", "seed": 3, "provider": None, "jobs": 1},
           "fault_kinds": ["partition"], "vary": [], "skipped": ["--vary links: skipped: because"],
           "quiet_tail_s": 6.0, "cases": 1, "status": {"violation": 1}, "violations": {"completeness": 1},
           "run_s": {"mean": 20.0, "min": 20.0, "max": 20.0}, "check_s": None, "wall_s": 30.0,
           "minimal": {"completeness": {"file": "m.yaml", "entries_after": 1,
                                        "faults_after": ["partition a | b at 1s for 2s"], "runs": 3,
                                        "exhausted": False, "case": 0}},
           "per_case": [{"case": 0, "status": "violation", "failed": ["completeness"],
                         "faults": ["partition a | b at 1s for 2s"], "run_s": 20.0, "check_s": None,
                         "run_dir": "r", "error": None}]}
    md = summary_markdown(doc)
    [violations] = [ln for ln in md.splitlines() if ln.startswith("| completeness")]
    [case] = [ln for ln in md.splitlines() if ln.startswith("| 0 ")]
    assert violations.replace("\\|", "").count("|") == 5, violations  # 4 columns
    assert case.replace("\\|", "").count("|") == 6, case  # 5 columns
    assert "- --vary links: skipped: because" in md and "**1 cases** (1 violation)" in md
