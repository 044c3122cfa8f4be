"""The node runtime with real processes on loopback: `python -m testbed.nodes CONFIG.json`.

Each test writes hand-made configs into a tmp dir, starts 2-3 node processes
(echo protocol), drives them over the control channel and checks their logs.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from testbed.nodes.runtime.control_client import ControlClient
from testbed.testing.harness import NodeProc, make_configs, read_log, wait_for

pytestmark = pytest.mark.timeout(120)


@contextlib.contextmanager
def cluster(tmp_path, names, start=None, **kw):
    cfgs = make_configs(str(tmp_path), names, **kw)
    procs = {n: NodeProc(c) for n, c in cfgs.items()}
    try:
        for n in (start if start is not None else names):
            procs[n].start()
        for n in (start if start is not None else names):
            procs[n].wait_ready()
        yield procs
    finally:
        for p in procs.values():
            if p.proc is not None:
                p.kill()


def recv_events(p, src=None, kind="ping"):
    return [e for e in p.log() if e["ev"] == "echo_recv" and e["kind"] == kind and (src is None or e["src"] == src)]


def received(p, key="a/ping"):
    return p.call("received")["recv"].get(key, 0)


def evs(p, ev):
    return [e for e in p.log() if e["ev"] == ev]


def test_delivery_fifo_and_delay_over_a_jittery_link(tmp_path):
    links = {"a": {"b": {"delay_ms": 30, "jitter_ms": 5, "distribution": "normal"}}}
    with cluster(tmp_path, ["a", "b"], links=links) as ps:
        a, b = ps["a"], ps["b"]
        a.call("send", dst="b", n=300)
        wait_for(lambda: received(b) == 300)
        assert b.call("received")["fifo_violations"] == 0
        assert a.stop() == 0 and b.stop() == 0
        got = recv_events(b, "a")
        assert [e["seq"] for e in got] == list(range(1, 301))  # all, in order, once
        delays_ms = [(e["t"] - e["sent_t"]) / 1e6 for e in got]
        assert min(delays_ms) >= 30 - 5 * 4 - 0.5  # never earlier than the +-4 sigma table allows
        sched = evs(a, "sched")
        assert sched and sched[0]["peer"] == "b" and sched[0]["n"] == 300


def test_a_service_time_queues_messages_at_the_receiver(tmp_path):
    """b handles a's messages one at a time, 20 ms each (constant): a burst of 40 sent at once is
    handled over ~0.8 s in order, each no earlier than 20 ms after it was sent, and b's periodic
    ``service`` lines count them and show the queue it had."""
    with cluster(tmp_path, ["a", "b"], service={"b": {"mean_s": 0.02, "distribution": "constant"}}) as ps:
        a, b = ps["a"], ps["b"]
        a.call("send", dst="b", n=40)
        wait_for(lambda: received(b) == 40)
        assert a.stop() == 0 and b.stop() == 0
        got = recv_events(b, "a")
        assert [e["seq"] for e in got] == list(range(1, 41))
        delays_ms = [(e["t"] - e["sent_t"]) / 1e6 for e in got]
        assert min(delays_ms) >= 19.5
        assert (got[-1]["t"] - got[0]["t"]) / 1e6 >= 39 * 20 - 5  # served back to back, not in parallel
        svc = evs(b, "service")
        assert sum(e["served"] for e in svc) >= 40  # periodic samples and the last one at stop
        assert max(e["max_queued"] for e in svc) >= 10
        assert not evs(a, "service")  # only the node with the key has a queue


def test_reorder_link_does_reorder(tmp_path):
    links = {"a": {"b": {"delay_ms": 20, "jitter_ms": 5, "distribution": "normal", "reorder": True}}}
    with cluster(tmp_path, ["a", "b"], links=links) as ps:
        ps["a"].call("send", dst="b", n=300)
        wait_for(lambda: received(ps["b"]) == 300)
        assert ps["b"].call("received")["fifo_violations"] > 0


def test_cut_drops_heal_restores_and_reasons_compose(tmp_path):
    with cluster(tmp_path, ["a", "b"]) as ps:
        a, b = ps["a"], ps["b"]
        a.call("send", dst="b", n=10)
        wait_for(lambda: received(b) == 10)
        a.call("cut", peers=["b"])
        a.call("send", dst="b", n=25)
        a.call("partition", peers=["b"], id="p1")
        a.call("heal", peers=["b"])  # the partition still holds b down
        a.call("send", dst="b", n=5)
        st = a.call("status")
        assert st["down"] == {"b": ["partition:p1"]}
        a.call("heal_partition", id="p1")
        assert a.call("status")["down"] == {}
        a.call("send", dst="b", n=7)
        wait_for(lambda: received(b) == 17)
        time.sleep(0.2)
        assert received(b) == 17
        st = a.call("status")
        assert st["drops"] == {"link-down": 30}
        assert st["counters"]["dropped"] == 30
        assert a.stop() == 0
        drops = evs(a, "drop")
        assert sum(d["count"] for d in drops if d["reason"] == "link-down" and d["peer"] == "b") == 30
        states = [(e["up"], e["reason"]) for e in evs(a, "link_state")]
        assert states == [(False, "cut"), (False, "partition:p1"), (False, "cut"), (True, "partition:p1")]
        seqs = [e["seq"] for e in recv_events(b)]
        assert seqs == list(range(1, 11)) + list(range(41, 48))


def test_stall_holds_then_releases(tmp_path):
    links = {"a": {"b": {"delay_ms": 5}}}
    with cluster(tmp_path, ["a", "b"], links=links) as ps:
        a, b = ps["a"], ps["b"]
        a.call("send", dst="b", n=3)
        wait_for(lambda: received(b) == 3)
        assert a.call("stall") == {"ok": True, "held": 0}
        a.call("send", dst="b", n=20)
        time.sleep(0.3)
        assert received(b) == 3
        assert a.call("status")["held"] == 20
        assert a.call("unstall")["released"] == 20
        wait_for(lambda: received(b) == 23)
        assert b.call("received")["fifo_violations"] == 0
        assert a.stop() == 0
        assert [(e["on"], e["held"]) for e in evs(a, "stall")] == [(True, 0), (False, 20)]


def test_sigkill_during_stall_loses_held_but_log_keeps_flushed_lines_then_restart_appends(tmp_path):
    with cluster(tmp_path, ["a", "b"]) as ps:
        a, b = ps["a"], ps["b"]
        a.call("send", dst="b", n=2)
        wait_for(lambda: received(b) == 2)
        a.call("stall")
        a.call("send", dst="b", n=20)
        time.sleep(0.35)  # > log_flush_ms: the sends are on disk
        a.signal(signal.SIGKILL)
        a.wait()
        log = a.log()
        assert [e["ev"] for e in log].count("echo_send") == 22
        assert any(e["ev"] == "stall" and e["on"] for e in log)
        assert not any(e["ev"] == "node_stop" for e in log)
        time.sleep(0.2)
        assert received(b) == 2  # the held frames died with the process
        # restart: the log is appended to and node_start says restarted
        a.start()
        a.wait_ready()
        a.call("send", dst="b", n=1)
        wait_for(lambda: received(b) == 3)
        assert a.stop() == 0
        starts = [e for e in a.log() if e["ev"] == "node_start"]
        assert [s["restarted"] for s in starts] == [False, True]
        assert a.log()[:len(log)] == log


def test_sigstop_then_sigcont(tmp_path):
    links = {"a": {"b": {"delay_ms": 50}}}
    with cluster(tmp_path, ["a", "b"], links=links) as ps:
        a, b = ps["a"], ps["b"]
        a.call("send", dst="b", n=1)
        wait_for(lambda: received(b) == 1)
        b.signal(signal.SIGSTOP)  # receiver paused: TCP buffers the frames
        a.call("send", dst="b", n=30)
        a.signal(signal.SIGSTOP)  # sender paused with frames in its 50 ms delay line
        time.sleep(0.3)
        a.signal(signal.SIGCONT)
        b.signal(signal.SIGCONT)
        wait_for(lambda: received(b) == 31)
        assert b.call("received")["fifo_violations"] == 0
        assert a.stop() == 0 and b.stop() == 0


def test_graceful_shutdown_and_sigterm_write_node_stop(tmp_path):
    with cluster(tmp_path, ["a", "b"]) as ps:
        a, b = ps["a"], ps["b"]
        assert a.call("shutdown") == {"ok": True}
        assert a.wait() == 0
        b.signal(signal.SIGTERM)
        assert b.wait() == 0
        for p, why in ((a, "shutdown"), (b, "sigterm")):
            log = p.log()
            assert log[0]["ev"] == "node_start" and log[0]["restarted"] is False
            assert log[-1]["ev"] == "node_stop" and log[-1]["reason"] == why
            assert any(e["ev"] == "cpu" for e in log) and any(e["ev"] == "stats" for e in log)


def test_queue_until_first_connect_then_drop_while_disconnected(tmp_path):
    with cluster(tmp_path, ["a", "b"], start=["a"]) as ps:
        a, b = ps["a"], ps["b"]
        a.call("send", dst="b", n=15)  # b not running yet: queued
        time.sleep(0.2)
        b.start()
        b.wait_ready()
        wait_for(lambda: received(b) == 15)
        assert "up:b" in a.call("received")["peer_events"]
        b.kill()
        wait_for(lambda: "down:b" in a.call("received")["peer_events"])
        a.call("send", dst="b", n=10)  # connection lost: dropped
        assert a.call("status")["drops"].get("no-connection") == 10
        b.start()
        b.wait_ready()
        wait_for(lambda: a.call("received")["peer_events"].count("up:b") == 2, timeout=5)
        a.call("send", dst="b", n=4)
        wait_for(lambda: received(b) == 4)  # a fresh process counts from 0
        assert a.stop() == 0
        names = [e["ev"] for e in a.log() if e["ev"] in ("peer_up", "peer_down")]
        assert names == ["peer_up", "peer_down", "peer_up"]


def test_set_links_applies_to_later_messages(tmp_path):
    with cluster(tmp_path, ["a", "b"]) as ps:
        a, b = ps["a"], ps["b"]
        a.call("send", dst="b", n=5)
        wait_for(lambda: received(b) == 5)
        assert a.call("set_links", links={"b": {"delay_ms": 300}}) == {"ok": True, "applied": ["b"]}
        assert a.call("status")["links"]["b"]["delay_ms"] == 300.0
        a.call("send", dst="b", n=5)
        wait_for(lambda: received(b) == 10)
        with pytest.raises(RuntimeError, match="unknown key"):
            a.call("set_links", links={"b": {"delay": 1}})
        with pytest.raises(RuntimeError, match="unknown destination 'zz'"):
            a.call("set_links", links={"zz": {"delay_ms": 1}})
        assert a.stop() == 0 and b.stop() == 0
        d = [(e["t"] - e["sent_t"]) / 1e6 for e in recv_events(b)]
        assert max(d[:5]) < 250 and min(d[5:]) >= 299.5
        assert [e["spec"]["delay_ms"] for e in evs(a, "link_set")] == [300.0]


def test_control_ops_and_errors(tmp_path):
    with cluster(tmp_path, ["a", "b"]) as ps:
        a = ps["a"]
        assert a.call("ping") == {"ok": True, "node": "a", "run": a.cfg["run_id"], "pid": a.proc.pid}
        c = a.call("clock")
        assert abs(c["wall_ns"] - time.time_ns()) < 5e9 and c["mono_ns"] > 0
        st = a.call("status")
        for k in ("node", "pid", "uptime_s", "counters", "stalled", "down", "node_status"):
            assert k in st
        assert st["pid"] == a.proc.pid and st["stalled"] is False
        with pytest.raises(RuntimeError, match="unknown op 'nope'"):
            a.call("nope")
        with pytest.raises(RuntimeError, match="peers"):
            a.call("cut", peers="b")
        with pytest.raises(RuntimeError, match="unknown peer 'q'"):
            a.call("cut", peers=["q"])
        with pytest.raises(RuntimeError, match="t0_wall_ns"):
            a.call("start", duration_s=1)


def test_workload_start_at_t0_and_end(tmp_path):
    params = {"a": {"targets": ["b"], "rate_per_s": 200}}
    with cluster(tmp_path, ["a", "b"], params=params) as ps:
        a, b = ps["a"], ps["b"]
        t0 = time.time_ns() + 200_000_000
        a.call("start", t0_wall_ns=t0, duration_s=0.5)
        wait_for(lambda: a.call("status")["workload"] == "done", timeout=10)
        wait_for(lambda: received(b) >= 80)
        time.sleep(0.2)
        n = received(b)
        assert 80 <= n <= 101  # 200/s for 0.5 s
        assert a.stop() == 0
        w = evs(a, "workload")
        assert [e["phase"] for e in w] == ["start", "end"]
        assert 0 <= w[0]["t"] - t0 < 1_000_000_000  # not before t0
        first_send = min(e["t"] for e in evs(a, "echo_send"))
        assert first_send >= t0


def test_uncaught_exception_in_protocol_code_exits_nonzero(tmp_path):
    with cluster(tmp_path, ["a", "b"]) as ps:
        a = ps["a"]
        a.call("crash")
        assert a.wait() == 1
        assert "RuntimeError: echo: crash requested" in a.stderr()
        assert a.log()[-1]["ev"] == "node_error"
        assert "crash requested" in a.log()[-1]["error"]


def test_kernel_mode_applies_no_delay_but_still_cuts(tmp_path):
    links = {"a": {"b": {"delay_ms": 10_000, "loss": 1.0}}}
    with cluster(tmp_path, ["a", "b"], links=links, emulation="kernel") as ps:
        a, b = ps["a"], ps["b"]
        a.call("send", dst="b", n=3)
        wait_for(lambda: received(b) == 3, timeout=8)
        a.call("cut", peers=["b"])
        a.call("send", dst="b", n=3)
        time.sleep(0.1)
        assert received(b) == 3


def test_bad_config_is_one_line_and_exit_2(tmp_path):
    cfg = tmp_path / "bad.json"
    cfg.write_text(json.dumps({"node": "a"}))
    r = subprocess.run([sys.executable, "-m", "testbed.nodes", str(cfg)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert "bad.json: missing key(s) run_id" in r.stderr
    cfgs = make_configs(str(tmp_path), ["x", "y"], links={"x": {"y": {"delay_ms": -3}}})
    r = subprocess.run([sys.executable, "-m", "testbed.nodes", cfgs["x"]["_path"]], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "links.y: link spec: delay_ms must be a number >= 0" in r.stderr


def test_control_client_errors():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError):
        ControlClient("127.0.0.1", port, timeout=1, secret=b"k" * 32).call("ping")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    conns = []
    t = threading.Thread(target=lambda: conns.append(srv.accept()), daemon=True)
    t.start()
    try:
        with pytest.raises(TimeoutError, match="no challenge"):
            ControlClient("127.0.0.1", srv.getsockname()[1], timeout=0.3, secret=b"k" * 32).call("ping")
    finally:
        t.join(2)
        for c, _ in conns:
            c.close()
        srv.close()


def test_three_nodes_forwarding_and_a_partition_of_two_peers(tmp_path):
    params = {"b": {"forward_to": "c"}}
    links = {"a": {"b": {"delay_ms": 2}}, "b": {"c": {"delay_ms": 3, "jitter_ms": 1}}}
    with cluster(tmp_path, ["a", "b", "c"], params=params, links=links) as ps:
        a, b, c = ps["a"], ps["b"], ps["c"]
        a.call("send", dst="b", n=50)
        wait_for(lambda: received(c, "b/ping") == 50)
        assert c.call("received")["fifo_violations"] == 0
        a.call("partition", peers=["b", "c"], id="x")
        a.call("send", dst="b", n=5)
        a.call("send", dst="c", n=5)
        assert a.call("status")["down"] == {"b": ["partition:x"], "c": ["partition:x"]}
        a.call("heal_partition", id="x")
        a.call("send", dst="c", n=2)
        wait_for(lambda: received(c, "a/ping") == 2)
        time.sleep(0.1)
        assert received(b) == 50 and received(c, "b/ping") == 50
        for p in ps.values():
            assert p.stop() == 0
        assert [(e["peer"], e["up"]) for e in evs(a, "link_state")] == [
            ("b", False), ("c", False), ("b", True), ("c", True)]


def test_cut_with_close_is_seen_at_once_and_stays_closed_until_heal(tmp_path):
    with cluster(tmp_path, ["a", "b"]) as ps:
        a, b = ps["a"], ps["b"]
        a.call("send", dst="b", n=3)
        b.call("send", dst="a", n=3)
        wait_for(lambda: received(b) == 3 and received(a, "b/ping") == 3)
        assert "b" in a.call("status")["connected"] and "a" in b.call("status")["connected"]
        t_cut = time.time()
        assert a.call("cut", peers=["b"], close=True)["closed"] == ["b"]
        assert b.call("cut", peers=["a"], close=True)["closed"] == ["a"]
        wait_for(lambda: evs(a, "peer_down") and evs(b, "peer_down"), timeout=2)
        assert time.time() - t_cut < 2  # at once, not after some timeout
        time.sleep(0.5)  # the reconnect loop would have reconnected within 0.05-0.1 s
        assert a.call("status")["connected"] == [] and b.call("status")["connected"] == []
        assert [e["peer"] for e in evs(a, "peer_up")] == ["b"]  # only the first connect
        a.call("send", dst="b", n=4)
        time.sleep(0.2)
        assert received(b) == 3
        a.call("heal", peers=["b"])
        b.call("heal", peers=["a"])
        wait_for(lambda: "b" in a.call("status")["connected"])
        wait_for(lambda: [e["peer"] for e in evs(a, "peer_up")] == ["b", "b"])
        a.call("send", dst="b", n=2)
        wait_for(lambda: received(b) == 5)
        with pytest.raises(Exception, match="close"):
            a.call("cut", peers=["b"], close="yes")
