"""The brokers' congestion read back from synthetic logs (the generic testbed.analysis.congestion,
which mobility's measure re-exports, and measure.msgs_over_time): per-second queue, CPU share and
received rate; a window's busiest broker."""

import json
import math

import pandas as pd
import pytest

from testbed.analysis import congestion as CG
from testbed.protocols.mobility.analysis import measure as M

T0 = 1_000_000_000_000_000_000


def _write(run, node, lines):
    (run / "logs").mkdir(parents=True, exist_ok=True)
    with open(run / "logs" / f"{node}.jsonl", "w") as f:
        for d in lines:
            f.write(json.dumps(dict(d, node=node)) + "\n")


def _node(busy_by_s, queue_by_s, cpu_per_s, recv_per_s, service=True):
    out = [{"t": T0 - 10**9, "ev": "cpu", "user_s": 0.0, "sys_s": 0.0},
           {"t": T0 - 10**9, "ev": "stats", "received": 0},
           {"t": T0 - 10**9 + 5, "ev": "deliver", "pub_id": "x"}]  # other events are skipped
    cpu, recv = 0.0, 0
    for i, (b, q) in enumerate(zip(busy_by_s, queue_by_s)):
        t = T0 + i * 10**9
        cpu += cpu_per_s
        recv += recv_per_s
        out += [{"t": t, "ev": "cpu", "user_s": cpu * 0.75, "sys_s": cpu * 0.25},
                {"t": t + 1000, "ev": "stats", "received": recv}]
        if service:
            out.append({"t": t + 2000, "ev": "service", "queued": q // 2, "max_queued": q, "busy": b,
                        "served": 10, "wait_ms": 4.0 * q})
    return out


@pytest.fixture
def run(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"t0_wall_ns": T0}))
    _write(tmp_path, "b1", _node([0.1, 0.2, 0.9, 0.9], [0, 1, 30, 40], 0.5, 100))
    _write(tmp_path, "b2", _node([0.3, 0.3, 0.3, 0.3], [2, 2, 2, 2], 0.1, 20))
    _write(tmp_path, "pubs", _node([0.0] * 4, [0] * 4, 0.9, 5, service=False))
    return tmp_path


def test_per_second_rows_of_the_brokers(run):
    cg = CG.congestion(run, {"b1", "b2"})
    assert set(cg["node"]) == {"b1", "b2"}
    b1 = cg[cg["node"] == "b1"].reset_index(drop=True)
    assert list(b1["max_queued"]) == [0, 1, 30, 40]
    assert list(b1["t"]) == pytest.approx([0, 1, 2, 3], abs=1e-5)
    assert b1["cpu_share"].tolist() == pytest.approx([0.5] * 4)  # CPU seconds per wall second
    assert b1["recv_per_s"].tolist() == pytest.approx([100.0] * 4, rel=1e-4)


def test_the_summary_names_the_busiest_broker_of_a_window(run):
    cg = CG.congestion(run, {"b1", "b2"})
    late = CG.congestion_summary(cg, 2.0, 4.0)
    assert late["service"] and late["busy_broker"] == "b1"
    assert late["busy_mean_max"] == pytest.approx(0.9) and late["queue_max"] == 40
    assert late["wait_ms_mean"] == pytest.approx((120 + 160 + 8 + 8) / 4)  # weighted by served (10 each)
    early = CG.congestion_summary(cg, 0.0, 2.0)
    assert early["busy_broker"] == "b2" and early["busy_mean_max"] == pytest.approx(0.3)
    assert early["queue_max"] == 2
    assert early["cpu_mean_max"] == pytest.approx(0.5) and early["recv_per_s_max"] == pytest.approx(100, rel=1e-4)


def test_without_a_service_time_there_is_no_queue_to_report(run):
    cg = CG.congestion(run, {"pubs"})
    s = CG.congestion_summary(cg, 0.0, 4.0)
    assert s["service"] is False and s["busy_broker"] is None and math.isnan(s["queue_max"])
    assert s["cpu_max"] == pytest.approx(0.9)
    assert math.isnan(CG.congestion_summary(cg, 10.0, 20.0)["cpu_max"])  # an empty window


def test_messages_per_move_over_time():
    df = pd.DataFrame({"begin": [0.2, 0.7, 1.5, 3.1, 3.2], "outcome": ["commit", "commit", "commit", "abort", "commit"],
                       "msgs": [24, 400, 24, 24, 30], "dur_ms": [10.0, 50.0, 20.0, 99.0, 30.0]})
    mt = M.msgs_over_time(df, 1.0)
    assert mt["bin_s"].tolist() == [0.0, 1.0, 3.0]
    assert mt["moves"].tolist() == [2, 1, 1]
    assert mt["msgs_mean"].tolist() == [212.0, 24.0, 30.0]
    assert mt["lat_mean_ms"].tolist() == [30.0, 20.0, 30.0]
    assert M.msgs_over_time(df[df["outcome"] == "x"], 1.0).empty


def test_run_summary_script_counts_committed_moves_after_the_warmup(run):
    """scripts/mobility_run_summary.py: only committed moves begun at or after the warm-up count;
    their latency and messages, and the window's busiest broker, come out on one line."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "mobility_run_summary", Path(__file__).resolve().parents[3] / "scripts" / "mobility_run_summary.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    moves = []
    for i, (begin_s, outcome, dur, msgs) in enumerate([(0.5, "commit", 900, 50),  # in the warm-up
                                                         (1.5, "commit", 100, 20), (2.5, "commit", 300, 40),
                                                         (3.0, "abort", 5000, 99)]):
        t = T0 + int(begin_s * 1e9)
        moves += [{"t": t, "ev": "move_begin", "mid": f"m{i}"},
                  {"t": t + 1, "ev": "move_traffic", "mid": f"m{i}", "msgs": msgs},
                  {"t": t + 2, "ev": "move_end", "mid": f"m{i}", "outcome": outcome, "dur_ms": dur}]
    _write(run, "c1", moves)
    line = mod.summarize(str(run), 1.0)
    assert "2 counted moves, mean 200 ms" in line and "30.0 msgs/move" in line, line
    assert "'commit': 3, 'abort': 1" in line and "busiest broker b1 busy 0.67" in line, line  # (0.2+0.9+0.9)/3
