"""Progress with an ETA (testbed/ui.py): the estimate, its learned history, both display modes."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from testbed import ui


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def history(tmp_path, monkeypatch):
    path = tmp_path / "eta.json"
    monkeypatch.setenv("TESTBED_ETA_HISTORY", str(path))
    return path


def test_eta_counts_down_known_and_guessed_phases(history):
    c = Clock()
    eta = ui.ETA([("up", None), ("workload", 10.0), ("collect", None)], history_key="run", guess=5.0, clock=c)
    eta.enter("up")
    assert eta.remaining() == 20.0  # guess 5 + exact 10 + guess 5
    c.t += 3
    assert eta.remaining() == 17.0 and eta.elapsed() == 3.0
    c.t += 4  # up overruns its guess: nothing left of it, never negative
    assert eta.remaining() == 15.0
    eta.enter("workload")
    c.t += 6
    assert eta.remaining() == 9.0
    assert eta.fraction() == pytest.approx(13 / 22)
    eta.enter("collect")
    c.t += 1
    eta.finish()
    assert eta.remaining() == 0.0
    # learned: the guessed phases' real durations; the exact one is not stored
    assert json.loads(history.read_text()) == {"run": {"up": 7.0, "collect": 1.0}}
    again = ui.ETA([("up", None), ("workload", 10.0), ("collect", None)], history_key="run", clock=c)
    again.enter("up")
    assert again.remaining() == 18.0


def test_history_leans_on_recent_runs_and_sweep_phases_share_it(history):
    history.write_text(json.dumps({"run": {"up": 10.0}}))
    c = Clock()
    eta = ui.ETA([("up#0", None), ("up#1", None)], history_key="run", clock=c)
    assert eta.remaining() == 20.0  # "up#1" learns from "up"
    eta.enter("up#0")
    c.t += 2
    eta.enter("up#1")
    c.t += 2
    eta.finish()
    assert json.loads(history.read_text())["run"]["up"] == pytest.approx(4.0)  # 10 -> 6 -> 4


def test_a_skipped_phase_is_done_and_teaches_nothing(history):
    c = Clock()
    eta = ui.ETA([("a", None), ("settle", None), ("b", 4.0)], history_key="k", guess=3.0, clock=c)
    eta.enter("a")
    c.t += 1
    eta.enter("b")  # settle never happened
    assert eta.remaining() == 4.0
    eta.finish()
    assert json.loads(history.read_text()) == {"k": {"a": 1.0}}


def test_unreadable_history_falls_back_to_the_guess(history):
    history.write_text("{not json")
    assert ui.ETA([("x", None)], history_key="k", guess=7.0).remaining() == 7.0


def test_format_duration():
    assert [ui.format_duration(x) for x in (None, 0, 4.6, 75, 3725)] == ["?", "0s", "5s", "1m15s", "1h02m"]


def test_without_a_terminal_plain_timestamped_lines_with_the_time_left(history):
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=False, width=200)
    with ui.Live("up", ui.ETA([("up", 30.0)]), stream=con) as live:
        assert not live.interactive
        live.phase("up", "bringing up [3 nodes]")
        live.line("all 3 nodes up")
    lines = buf.getvalue().splitlines()
    assert re.fullmatch(r"\d\d:\d\d:\d\d bringing up \[3 nodes\]: about 30s left", lines[0]), lines
    assert re.fullmatch(r"\d\d:\d\d:\d\d all 3 nodes up", lines[1])
    assert "\x1b" not in buf.getvalue()  # no escape codes in a pipe


def test_on_a_terminal_one_live_line_with_bar_and_eta(history):
    import time

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, width=120)
    with ui.Live("run", ui.ETA([("work", 60.0)]), stream=con) as live:
        assert live.interactive
        live.phase("work", "workload 60s")
        time.sleep(0.6)  # the ticker redraws every 0.25 s
        live.line("fault fired")
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())
    # 60 s less what has elapsed of the phase, shown as 59s, or 1m00s while under a second has
    assert "run: workload 60s" in out and re.search(r"elapsed, ETA (59s|60s|1m00s)", out)
    assert "fault fired" in out
    assert "about" not in out  # the phase line is the live bar, not a printed line


def test_analyze_follows_the_jobs_progress_lines(history):
    buf = io.StringIO()
    with ui.LiveAnalyze(stream=Console(file=buf, force_terminal=False, width=200)) as live:
        assert live.eta.current == "ingest"
        live.line("ingest: 5 logs, 560 events of 8 types")
        assert live.eta.current == "checks"
        live.line("check fifo: PASS")
        live.line("metrics: 2 site pair(s)")
        assert live.eta.current == "figures"
        live.line("figures: 3 written")
        assert live.eta.current == "report"
    assert set(json.loads(history.read_text())["analyze"]) == {"ingest", "checks", "figures", "report"}


def test_run_phases_come_from_the_plans_and_the_run_events(history):
    from pathlib import Path

    from testbed.topology.loader import plans

    smoke = str(Path(__file__).resolve().parents[3] / "topologies" / "smoke.yaml")
    ps = plans(smoke, {}, None)
    buf = io.StringIO()
    live = ui.LiveRun(ps, analyze=True, drain_s=2.0, stream=Console(file=buf, force_terminal=False, width=200))
    assert live.eta.phases == ["up#0", "settle#0", "workload#0", "collect#0", "analyze#1"]
    assert live.eta.expected["workload#0"] == 22.0 and live.eta.expected["settle#0"] == 1.0
    with live:
        live.event({"kind": "phase", "phase": "up"})
        live.line("settling 1s (subscriptions propagate)")
        assert live.eta.current == "settle#0"
        live.event({"kind": "workload", "phase": "start", "duration_s": 20.0})
        assert live.eta.current == "workload#0"
        live.event({"kind": "phase", "phase": "collect"})
        live.event({"kind": "phase", "phase": "analyze"})
        assert live.eta.current == "analyze#1"
    assert "workload 20s: about" in buf.getvalue()


def test_plain_lines_are_not_wrapped_in_logs(history):
    buf = io.StringIO()
    with ui.Live("x", stream=Console(file=buf, force_terminal=False, width=40)) as live:
        live.line("a long message " * 8)
    assert len(buf.getvalue().splitlines()) == 1


def test_run_history_is_kept_per_provider(history):
    from pathlib import Path

    from testbed.topology.loader import plans

    smoke = str(Path(__file__).resolve().parents[3] / "topologies" / "smoke.yaml")
    history.write_text(json.dumps({"run/docker": {"up": 40.0}, "run/local": {"up": 2.0}}))
    local = ui.LiveRun(plans(smoke, {}, None), stream=Console(file=io.StringIO()))
    docker = ui.LiveRun(plans(smoke, {}, "docker"), stream=Console(file=io.StringIO()))
    assert local.eta.expected["up#0"] == 2.0 and docker.eta.expected["up#0"] == 40.0
