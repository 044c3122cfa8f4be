"""Only a run's own controller and peers may drive its nodes (real node processes, real sockets).

* a stranger's stall / shutdown / set_links is refused, logged, and changes nothing;
* a node started with another run's secret (or of another run) cannot join;
* a replayed control frame is refused, on its connection and on another one;
* fuzz: >= 1,000 random and malformed frames to both ports of a running broker and of a
  client host during a smoke run (local provider), whose history checks then all pass.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from auth_helpers import closed_by_peer, connect, fuzz, fuzz_frames, recv_frame
from testbed.nodes.runtime import auth, codec
from testbed.testing.harness import NodeProc, make_configs, read_log, wait_for, write_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "topologies" / "smoke.yaml"


def events(cfg, ev):
    return [e for e in read_log(cfg["log_path"]) if e["ev"] == ev]


@pytest.fixture
def pair(tmp_path):
    cfgs = make_configs(str(tmp_path), ["a", "b"], neighbors={"a": ["b"]}, links={"a": {"b": {"delay_ms": 1}}})
    procs = {n: NodeProc(c) for n, c in cfgs.items()}
    for p in procs.values():
        p.start()
    try:
        for p in procs.values():
            p.wait_ready()
        yield cfgs, procs
    finally:
        for p in procs.values():
            p.kill()


def test_config_is_private_and_secret_never_logged(pair):
    cfgs, procs = pair
    assert os.stat(cfgs["a"]["_path"]).st_mode & 0o777 == 0o600
    procs["a"].call("send", dst="b", n=3)
    procs["a"].stop()
    text = Path(cfgs["a"]["log_path"]).read_text() + procs["a"].stderr()
    assert cfgs["a"]["secret"] not in text


def test_config_without_a_good_secret_is_one_line_error(tmp_path):
    import subprocess
    import sys

    cfg = {k: v for k, v in make_configs(str(tmp_path), ["a"])["a"].items() if k not in ("_path", "secret")}
    for name, secret, msg in (("none", None, "missing key(s) secret"),
                              ("short", "abcd", "secret: 2 bytes, at least 16 are needed"),
                              ("nothex", "zz" * 32, "secret: not a hex string")):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(cfg if secret is None else {**cfg, "secret": secret}))
        r = subprocess.run([sys.executable, "-m", "testbed.nodes", str(path)], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert secret is None or secret not in r.stderr


def test_strangers_stall_shutdown_set_links_are_refused_and_change_nothing(pair):
    cfgs, procs = pair
    a = procs["a"]
    before = a.call("status")
    assert before["stalled"] is False and before["links"]["b"]["up"] is True and not before["down"]
    requests = [{"op": "stall"}, {"op": "shutdown"}, {"op": "set_links", "links": {"b": {"up": False}}},
                {"op": "ping"}]
    for req in requests:
        s, ch = connect(cfgs["a"]["control"])
        assert ch["k"] == "challenge" and ch["node"] == "a"  # all a stranger learns
        s.sendall(codec.frame(req))
        rep = codec.decode(recv_frame(s))
        assert rep["ok"] is False and rep["error"].startswith("refused: unauthenticated"), rep
        assert closed_by_peer(s)
        s.close()
    # sealed with a wrong secret: refused too
    s, ch = connect(cfgs["a"]["control"])
    key = auth.control_key(b"x" * 32, ch["run"], ch["node"], ch["nonce"])
    s.sendall(codec.frame(auth.seal_request(key, 1, codec.encode({"op": "stall"}))))
    rep = codec.decode(recv_frame(s))
    assert rep["ok"] is False and "bad MAC" in rep["error"]
    s.close()

    after = a.call("status")  # the controller (the right secret) still gets through
    assert a.proc.poll() is None
    assert after["stalled"] is False and after["links"]["b"] == before["links"]["b"] and not after["down"]
    assert after["rejected"] == {"control:unauthenticated": 4, "control:bad-mac": 1}
    a.call("send", dst="b", n=5)
    wait_for(lambda: procs["b"].call("received")["recv"].get("a/ping") == 5)
    a.stop()
    rej = events(cfgs["a"], "conn_rejected")
    assert sum(e["count"] for e in rej) == 5
    assert {e["reason"] for e in rej} == {"unauthenticated", "bad-mac"}
    assert all(e["channel"] == "control" and e["peer"].startswith("127.0.0.1:") for e in rej)
    assert not events(cfgs["a"], "stall")
    assert not [e for e in events(cfgs["a"], "link_set")]
    applied = events(cfgs["a"], "ctl_applied")
    assert {e["op"] for e in applied} <= {"send", "shutdown"} and all(e["origin"] == "housekeeping"
                                                                      for e in applied)
    assert [e["reason"] for e in events(cfgs["a"], "node_stop")] == ["shutdown"]  # ours, at the end


def test_node_with_another_runs_secret_cannot_join(tmp_path):
    cfgs = make_configs(str(tmp_path), ["a", "b", "c"])
    for name, change in (("b", {"secret": "ab" * 32}), ("c", {"run_id": "another-run"})):
        cfg = {k: v for k, v in cfgs[name].items() if k != "_path"}
        cfg.update(change)
        cfgs[name] = write_config(str(tmp_path), name, cfg)
    procs = {n: NodeProc(c) for n, c in cfgs.items()}
    try:
        for p in procs.values():
            p.start()
        for p in procs.values():
            p.wait_ready()
        procs["a"].call("send", dst="b", n=3)
        procs["a"].call("send", dst="c", n=3)
        procs["b"].call("send", dst="a", n=3)  # the intruder sends too
        wait_for(lambda: {e.get("reason") for e in events(cfgs["a"], "conn_rejected")} >= {"bad-mac"}, 15)
        wait_for(lambda: events(cfgs["b"], "conn_rejected") and events(cfgs["c"], "conn_rejected"), 15)
        time.sleep(0.5)
        assert procs["a"].call("received")["recv"] == {}
        assert procs["b"].call("received")["recv"] == {} and procs["c"].call("received")["recv"] == {}
        assert procs["a"].call("status")["connected"] == []  # no peer is up
        for n in ("a", "b", "c"):
            procs[n].stop()
        assert not events(cfgs["a"], "peer_up") and not events(cfgs["b"], "peer_up")
        reasons = {n: {(e["channel"], e["reason"]) for e in events(cfgs[n], "conn_rejected")} for n in cfgs}
        assert ("data", "bad-mac") in reasons["a"]  # b's hello, made with the wrong secret
        assert ("data", "bad-mac") in reasons["b"]  # a's hello does not match b's secret either
        assert ("data", "other-run") in reasons["c"]  # a's hello names a's run
    finally:
        for p in procs.values():
            p.kill()


def test_replayed_control_frame_is_refused(pair):
    cfgs, procs = pair
    secret = bytes.fromhex(cfgs["a"]["secret"])
    s, ch = connect(cfgs["a"]["control"])
    key = auth.control_key(secret, ch["run"], ch["node"], ch["nonce"])
    frame = codec.frame(auth.seal_request(key, 1, codec.encode({"op": "stall", "origin": "inject"})))
    s.sendall(frame)
    assert codec.decode(recv_frame(s))["ok"] is True
    s.sendall(frame)  # the same frame again on its connection
    rep = codec.decode(recv_frame(s))
    assert rep["ok"] is False and "replayed" in rep["error"]
    assert closed_by_peer(s)
    s.close()
    s2, _ = connect(cfgs["a"]["control"])  # ... and on another connection (another nonce)
    s2.sendall(frame)
    rep = codec.decode(recv_frame(s2))
    assert rep["ok"] is False and "bad MAC" in rep["error"]
    s2.close()
    assert procs["a"].call("status")["rejected"] == {"control:replay": 1, "control:bad-mac": 1}
    procs["a"].call("unstall")
    procs["a"].stop()
    stalls = [e["on"] for e in events(cfgs["a"], "stall")]
    assert stalls == [True, False]  # applied once, undone once: the replays changed nothing
    applied = [(e["op"], e["origin"]) for e in events(cfgs["a"], "ctl_applied")]
    assert applied[:2] == [("stall", "inject"), ("unstall", "housekeeping")]


# -- fuzz ---------------------------------------------------------------------------------------
def test_fuzz_both_ports_of_a_broker_and_a_client_host_then_checks_pass(tmp_path):
    from testbed import api

    runs = tmp_path / "runs"
    rd = api.up(str(SMOKE), runs_dir=str(runs))
    try:
        dep = json.loads((rd.path / "deployment.json").read_text())
        targets = ["b1", "sub-bond"]  # a broker and a client host (its subscribers attach to b2, b1)
        addrs = [tuple(dep["endpoints"][n][port]) for n in targets for port in ("data", "control")]
        wait_for(lambda: rd.manifest.get("status") == "running", 60, 0.1)
        frames = fuzz_frames(random.Random(15), rd.run_id, "b2", 1200)
        sent = fuzz(addrs, frames)
        assert sent >= 1000
        wait_for(lambda: rd.manifest.get("status") == "workload-done", 120, 0.2)
        st = {n["node"]: n for n in api.status(rd.run_id, runs_dir=str(runs))["nodes"]}
        for n in targets:
            assert st[n]["state"] == "running" and st[n]["info"]["stalled"] is False
            assert sum(st[n]["info"]["rejected"].values()) >= 0.9 * sent / len(targets), st[n]["info"]["rejected"]
    finally:
        api.down(rd.run_id, runs_dir=str(runs))
    res = api.analyze_run(str(rd.path))
    failed = [(r.name, r.examples, r.details) for r in res.checks if not r.passed]
    assert res.ok, failed
    prov = next(r for r in res.checks if r.name == "control_provenance")
    # smoke's stall/unstall of b3 and cut/heal of b1-b5, applied by the schedule, nothing else
    assert prov.details["by_origin"] == {"schedule": 6}, prov.details
    rej = res.metrics["rejected"]
    assert set(rej["by_node"]) == set(targets) and rej["control"] > 400
    assert rej["total"] == sent, rej  # every frame was one refused connection, each counted once
    report = res.report.read_text()
    assert "control request(s) or connection(s) were refused" in report.split("## Event logs")[0]
    for n in targets:  # rate-limited: far fewer lines than refusals, the counts exact
        lines = [json.loads(ln) for ln in (rd.logs_dir / f"{n}.jsonl").read_text().splitlines()
                 if '"conn_rejected"' in ln]
        assert len(lines) < sum(e["count"] for e in lines) / 3
