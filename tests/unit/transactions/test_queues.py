"""The brokers' queues over a run's transactions (analysis.measure.broker_queues) and what Figs 7-8's
explanations cite from them (experiments.analyze.concurrency_evidence), on synthetic logs."""

import json
import math

import pytest

from testbed.protocols.transactions.analysis import measure as M
from testbed.protocols.transactions.experiments.analyze import concurrency_evidence

T0 = 1_000_000_000_000_000_000
S = 10**9


def _run(root, name, busy, wait_ms, first_s=10, last_s=40, flood=(0.99, 5000.0)):
    """A run whose brokers b1 (``busy``, ``wait_ms`` during the transactions) and b2 (a tenth of it)
    log a service line per second; before the first transaction + 5 s they show the settle's flood."""
    run = root / name
    (run / "logs").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"t0_wall_ns": T0}))
    for node, k in (("b1", 1.0), ("b2", 0.1)):
        lines = []
        for sec in range(0, 50):
            b, w = (flood if sec < first_s + 5 else (busy * k, wait_ms * k))
            lines.append({"t": T0 + sec * S, "node": node, "ev": "service", "queued": 1, "max_queued": 2,
                          "busy": b, "served": 10, "wait_ms": w})
        (run / "logs" / f"{node}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    txc = [{"t": T0 + first_s * S, "ev": "tx_begin", "tx": "t1"}, {"t": T0 + (first_s + 1) * S, "ev": "tx_op"},
           {"t": T0 + last_s * S, "ev": "tx_end", "tx": "t9", "latency_ms": 5.0}]
    (run / "logs" / "a.jsonl").write_text("\n".join(json.dumps(dict(x, node="a")) for x in txc) + "\n")
    return str(run)


def test_the_queues_are_read_over_the_transactions_only(tmp_path):
    run = _run(tmp_path, "r", busy=0.6, wait_ms=12.0)
    assert M.tx_span(run) == (10.0, 40.0)
    q = M.broker_queues(run)
    # the settle's flood (busy 0.99, 5 s waits) before first + 5 s and the drain after the last tx_end are left out
    assert q["busy_broker"] == "b1" and q["busy_mean_max"] == pytest.approx(0.6)
    assert q["wait_ms_busiest"] == pytest.approx(12.0)
    assert q["wait_ms"] == pytest.approx((12.0 + 1.2) / 2)  # every broker's messages, weighted by served


def test_no_transactions_or_no_service_time_is_not_measured(tmp_path):
    run = _run(tmp_path, "r", busy=0.6, wait_ms=12.0)
    (tmp_path / "r" / "logs" / "a.jsonl").write_text("")
    assert M.tx_span(run) is None and math.isnan(M.broker_queues(run)["busy_mean_max"])
    bare = _run(tmp_path, "s", busy=0.6, wait_ms=12.0)
    for f in ("b1", "b2"):
        (tmp_path / "s" / "logs" / f"{f}.jsonl").write_text("")
    assert M.broker_queues(bare)["busy_broker"] is None


def test_concurrency_evidence_averages_the_seeds_and_bounds_the_throughput(tmp_path):
    table, dirs = [], {}
    for v, b1, bn, w1, wn in (("stx", 0.6, 0.95, 10, 280), ("dtx", 0.4, 0.9, 1, 60), ("dtxni", 0.4, 0.9, 1, 60),
                              ("blwait", 0.25, 0.8, 3, 45)):
        for n, busy, wait in ((1, b1, w1), (10, bn, wn)):
            for seed, d in enumerate((-0.01, 0.0, 0.01)):
                key = f"{v}/t{n}/r{seed}"
                dirs[key] = _run(tmp_path, key.replace("/", "-"), busy + d, wait)
                table.append({"key": key, "variant": v, "overlay": "line3", "threads": n, "instances": 1})
    waits = {"line3": {"wait_ms": 250}, "t10": {"wait_ms": 750}, "i10": {"wait_ms": 700}}
    lat = {"blwait": {1: (300.0, 310.0, 320.0), 10: (900.0, 930.0, 960.0)}}
    ev = concurrency_evidence(7, table, dirs, waits, lat, [1, 2, 5, 10])
    assert ev["most"] == "10 threads" and ev["stx_busy_1"] == pytest.approx(0.6)
    assert ev["stx_busy_n"] == pytest.approx(0.95) and ev["stx_qwait_n"] == pytest.approx(280)
    assert ev["stx_bound"] == pytest.approx(1 / 0.6) and ev["dtx_bound"] == pytest.approx(1 / 0.4)
    assert (ev["blwait_wait_1"], ev["blwait_wait_n"]) == (250, 750)
    assert ev["blwait_lat_ratio"] == pytest.approx(3.0) and ev["blwait_thr_bound"] == pytest.approx(10 / 3.0)
    # Fig 8 reads the instance counts: none here, so nothing is measured (the explanations say "not explained")
    ev8 = concurrency_evidence(8, table, dirs, waits, {}, [1, 2, 5, 10])
    assert ev8["most"] == "40 clients" and ev8["blwait_wait_n"] == 700
    assert math.isnan(ev8["stx_busy_n"]) and math.isnan(ev8["blwait_lat_ratio"])


def _ends(run, times_s):
    """Committed ``tx_end`` lines at ``times_s`` (and one aborted one) added to the run's client log."""
    lines = [{"t": T0 + int(t * S), "node": "a", "ev": "tx_end", "tx": f"e{i}", "outcome": "committed",
              "latency_ms": 5.0} for i, t in enumerate(times_s)]
    lines.append({"t": T0 + 20 * S, "node": "a", "ev": "tx_end", "tx": "ab", "outcome": "aborted", "latency_ms": -1})
    with open(f"{run}/logs/a.jsonl", "a") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))


def test_broker_work_is_the_service_and_messages_per_transaction_in_the_window(tmp_path):
    run = _run(tmp_path, "r", busy=0.6, wait_ms=12.0)
    _ends(run, [12, 16, 20, 30, 39])  # the one at 12 s ends before first + 5 s: not counted (nor the abort)
    w = M.broker_work(run)
    # [15 s, 40 s): 25 lines per broker, 10 served each; b1 busy 0.6, b2 0.06 of 1 s intervals;
    # 5 committed ends in the window (16, 20, 30, 39 and _run's own at 40)
    assert w["tx"] == 5
    assert w["served_per_tx"] == pytest.approx(2 * 25 * 10 / 5)
    assert w["service_ms_per_tx"] == pytest.approx(1000 * 25 * (0.6 + 0.06) / 5)
    assert w["ms_per_msg"] == pytest.approx(1000 * 25 * 0.66 / 500)
    # no service time: nothing measured
    bare = _run(tmp_path, "s", busy=0.6, wait_ms=12.0)
    for f in ("b1", "b2"):
        (tmp_path / "s" / "logs" / f"{f}.jsonl").write_text("")
    assert math.isnan(M.broker_work(bare)["service_ms_per_tx"])


def test_overlay_evidence_compares_the_smallest_and_largest_overlay(tmp_path):
    from testbed.protocols.transactions.experiments.analyze import overlay_evidence

    table, dirs = [], {}
    for v, b_lo, b_hi in (("stx", 0.1, 0.3), ("dtx", 0.2, 0.8), ("dtxni", 0.2, 0.7), ("blwait", 0.05, 0.1)):
        for o, busy in (("single", b_lo), ("line3", (b_lo + b_hi) / 2), ("tree9", b_hi)):
            for p in range(3):
                key = f"{v}/{o}/p{p}"
                dirs[key] = _run(tmp_path, key.replace("/", "-"), busy, 1.0)
                table.append({"key": key, "variant": v, "overlay": o, "threads": 1, "instances": 1})
    waits = {"single": {"wait_ms": 250}, "line3": {"wait_ms": 250}, "tree9": {"wait_ms": 350}}
    lat = {"dtx": {1: (200.0, 210.0, 220.0), 9: (800.0, 840.0, 880.0)}}
    ev = overlay_evidence(table, dirs, waits, lat)
    assert (ev["lo"], ev["hi"]) == (1, 9) and (ev["blwait_wait_lo"], ev["blwait_wait_hi"]) == (250, 350)
    # one transaction ends in each synthetic window (at 40 s): the work is the window's whole service
    assert ev["dtx_work_lo"] == pytest.approx(1000 * 25 * 0.22)
    assert ev["dtx_work_ratio"] == pytest.approx(0.8 / 0.2) and ev["stx_work_ratio"] == pytest.approx(3.0)
    assert ev["dtx_msgs_hi"] == pytest.approx(500) and ev["dtx_ms_per_msg_hi"] == pytest.approx(1000 * 25 * 0.88 / 500)
    assert ev["dtx_lat_ratio"] == pytest.approx(4.0)
    assert math.isnan(ev["stx_lat_ratio"])  # no latencies given for S-TX
    # one overlay only: nothing to compare
    assert overlay_evidence([r for r in table if r["overlay"] == "tree9"], dirs, waits, lat)["lo"] is None
