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
