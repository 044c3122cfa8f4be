"""A crashed node cannot be impersonated (issue #32, attack 2; real processes, loopback only).

* after the smoke run's scheduled crash of b3, a stranger binds b3's ports and answers its control
  channel as b3 would, without the run secret: the restart is recorded as failed (the new process
  cannot bind, and the impostor cannot seal a reply), and the run is not PASS;
* the control client refuses an unsealed reply, a reply sealed for another request, and a
  challenge that names another node than the one it meant to reach.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from auth_helpers import recv_frame
from testbed.nodes.runtime import auth, codec
from testbed.nodes.runtime.control_client import ControlClient
from testbed.testing.harness import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "topologies" / "smoke.yaml"


class Impostor:
    """Listens on a node's ports; on the control port it sends a challenge naming ``node`` and
    answers every request ``reply(n, frame)`` (default: an unsealed ``ok: true``)."""

    def __init__(self, addrs, node: str, run: str, reply=None) -> None:
        self.node, self.run = node, run
        self.reply = reply or (lambda n, frame: codec.frame({"ok": True, "node": node}))
        self.socks = []
        for a in addrs:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(tuple(a))
            s.listen(64)
            self.socks.append(s)
        self.conns: list[socket.socket] = []
        self.requests = 0
        self.stop = False
        self.threads = [threading.Thread(target=self._serve, args=(s,), daemon=True) for s in self.socks]
        for t in self.threads:
            t.start()

    def _serve(self, srv: socket.socket) -> None:
        srv.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = srv.accept()
            except (socket.timeout, OSError):
                continue
            self.conns.append(c)
            threading.Thread(target=self._talk, args=(c,), daemon=True).start()

    def _talk(self, c: socket.socket) -> None:
        try:
            c.sendall(codec.frame({"k": "challenge", "nonce": auth.nonce(), "node": self.node, "run": self.run}))
            n = 0
            while not self.stop:
                frame = recv_frame(c)
                n += 1
                self.requests += 1
                c.sendall(self.reply(n, frame))
        except OSError:
            pass

    def close(self) -> None:
        self.stop = True
        for t in self.threads:  # out of accept() (0.2 s timeout) before the listener closes
            t.join(2)
        for s in self.socks + self.conns:
            s.close()


def test_port_squat_after_a_scheduled_crash_fails_the_restart(tmp_path):
    from testbed import api

    runs = tmp_path / "runs"
    rd = api.up(str(SMOKE), runs_dir=str(runs))
    imp = None
    try:
        dep = json.loads((rd.path / "deployment.json").read_text())
        ep = dep["endpoints"]["b3"]

        def crashed():
            return any(e["op"] == "crash" and e.get("status") == "done" for e in rd.manifest.get("timeline") or [])

        wait_for(crashed, 90, 0.02)
        imp = Impostor([ep["data"], ep["control"]], "b3", rd.run_id)
        wait_for(lambda: rd.manifest.get("status") == "workload-done", 120, 0.2)
        restart = next(e for e in rd.manifest["timeline"] if e["op"] == "restart")
        assert restart["status"] == "failed", restart
        assert "b3" in restart["error"] and "address already in use" in restart["error"], restart
    finally:
        if imp is not None:
            imp.close()
        api.down(rd.run_id, runs_dir=str(runs))
    res = api.analyze_run(str(rd.path))
    assert not res.ok
    lives = next(r for r in res.checks if r.name == "node_lives")
    assert not lives.passed and [e["kind"] for e in lives.examples] == ["restart failed"], lives.examples
    assert "node_lives" in res.report.read_text()


def test_control_client_refuses_unsealed_and_missealed_replies_and_another_node(tmp_path):
    secret = auth.new_secret()
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    addr = free.getsockname()
    free.close()

    def sealed_for(seq_of):  # a reply sealed with the right key but for another request
        def reply(n, frame):
            env = codec.decode(frame)
            return codec.frame({"ok": True, "seq": seq_of(n), "body": codec.encode({"ok": True}),
                                "mac": env["mac"]})  # the request's MAC: no key needed, still refused
        return reply

    for reply, match in ((None, "unauthenticated reply"), (sealed_for(lambda n: n + 1), "reply to request 2, not 1"),
                         (sealed_for(lambda n: n), "bad MAC")):
        imp = Impostor([addr], "b3", "run-x", reply)
        try:
            c = ControlClient(addr[0], addr[1], timeout=2.0, secret=secret, run_id="run-x", node="b3")
            with pytest.raises(ConnectionError, match=match):
                c.call("ping")
            assert imp.requests == 1
        finally:
            imp.close()
    imp = Impostor([addr], "b2", "run-x")
    try:
        c = ControlClient(addr[0], addr[1], timeout=2.0, secret=secret, run_id="run-x", node="b3")
        with pytest.raises(ConnectionError, match="names node 'b2', not 'b3'"):
            c.call("ping")
        assert imp.requests == 0  # nothing was sent to it
    finally:
        imp.close()


def test_local_provider_does_not_signal_a_pid_that_is_no_longer_the_node(tmp_path):
    import subprocess
    import sys

    from testbed.errors import ProviderError
    from testbed.providers.hostside import procs
    from testbed.providers.local.provider import LocalProvider
    from testbed.runs.rundir import RunDir
    from testbed.topology.plan import Action

    run = RunDir.create(tmp_path, "r1")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # reused the node's pid
    try:
        run.save_state({"provider": "local", "pids": {"b1": other.pid}})
        for op in ("crash", "pause"):
            with pytest.raises(ProviderError, match="no longer this node's process"):
                LocalProvider().process_action(run, Action(at_s=1.0, op=op, fault=0, target=("b1",)))
        assert procs.state(other.pid) in ("S", "R")  # neither killed nor stopped
    finally:
        other.kill()
        other.wait()
