"""A connection flood does not kill a node (issue #32, attack 1; real processes, loopback only).

3,000 idle connections to each port of a running broker (the local provider's smoke run, without
its faults, so that no node of the topology connects to it during the flood): the
node survives, refuses the connections beyond its caps at once and counts them (``over-limit``),
closes the ones it holds pre-authentication after their timeout, and the run's checks pass.
Before the caps a node using select() died at the first descriptor >= 1024 without a word.
"""

from __future__ import annotations

import json
import select
import socket
import time
from pathlib import Path

import pytest

from testbed.testing.harness import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "topologies" / "smoke.yaml"
N = 3000
# Connections a node never sees or never has to refuse: the ones held within its
# pre-authentication cap when the test closes them, and the ones the kernel completed for the
# client while the listener's accept queue (its backlog) was full, which reach the node late or never.
SLACK = {"data": 32 + 128, "control": 8 + 100}


def flood(addr: tuple[str, int], n: int, deadline_s: float = 30.0) -> list[socket.socket]:
    """``n`` TCP connections to ``addr`` (non-blocking connects, bounded in time); the ones made."""
    socks: list[socket.socket] = []
    made: list[socket.socket] = []
    end = time.monotonic() + deadline_s
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(addr)
        socks.append(s)
        if len(socks) >= 200:  # a few hundred in flight: the listener's backlog stays small
            made += _settle(socks, end)
            socks = []
    made += _settle(socks, end)
    return made


def _settle(socks: list[socket.socket], end: float) -> list[socket.socket]:
    pending = {s.fileno(): s for s in socks}
    ok: list[socket.socket] = []
    poller = select.poll()
    for fd in pending:
        poller.register(fd, select.POLLOUT)
    while pending and time.monotonic() < end:
        for fd, _ in poller.poll(200):
            s = pending.pop(fd, None)
            if s is None:
                continue
            poller.unregister(fd)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                ok.append(s)
            else:
                s.close()
    for s in pending.values():
        s.close()
    return ok


def _without_faults(dest: Path) -> Path:
    """The smoke topology without its fault schedule. CI on 2026-11-29 counted 3003 data refusals
    for 3000 flood connections (the run directory was not kept, so which connections the 3 extra
    were is not measured). The schedule's restart of b3 at 14 s is one source of such refusals:
    b3, a neighbour of b1, dials b1 again and is refused while the flood holds b1's caps (a loaded
    machine stretches the flood into that window). Without faults no node of the topology
    connects to b1 during the flood, and every refusal counted is the flood's."""
    from testbed.explore.files import load_base, to_yaml

    topology, _ = load_base(SMOKE)  # read as the loader reads it (YAML 1.2: `off` stays a string)
    assert topology.pop("faults")
    out = dest / "smoke-flood.yaml"
    out.write_text(to_yaml(topology))
    return out


def test_flood_of_3000_connections_to_each_port_of_a_broker(tmp_path):
    from testbed import api

    runs = tmp_path / "runs"
    rd = api.up(str(_without_faults(tmp_path)), runs_dir=str(runs))
    held: list[socket.socket] = []
    try:
        dep = json.loads((rd.path / "deployment.json").read_text())
        wait_for(lambda: rd.manifest.get("status") == "running", 60, 0.1)
        made = {}
        for port in ("data", "control"):
            socks = flood(tuple(dep["endpoints"]["b1"][port]), N)
            made[port] = len(socks)
            held += socks
        assert made["data"] >= 0.9 * N and made["control"] >= 0.9 * N, made
        time.sleep(6.0)  # past both pre-authentication timeouts: every held connection is refused
        for s in held:
            s.close()
        held = []
        last: list = []

        def counted():
            st = {n["node"]: n for n in api.status(rd.run_id, runs_dir=str(runs))["nodes"]}
            assert st["b1"]["state"] == "running", st["b1"]
            rej = st["b1"]["info"]["rejected"]
            per = {ch: sum(v for k, v in rej.items() if k.startswith(ch + ":")) for ch in made}
            last[:] = [made, rej]
            # each connection refused once: over the cap at accept, or held until its timeout (a
            # connection accepted only after the test closed it, within the caps, is not counted)
            return rej if all(made[ch] - SLACK[ch] <= per[ch] <= made[ch] for ch in made) else None

        try:
            rej = wait_for(counted, 30, 0.5)
        except TimeoutError:
            raise AssertionError(f"refusals not counted once per connection: {last}") from None
        assert rej["data:over-limit"] >= made["data"] - 100 - SLACK["data"], rej
        assert rej["control:over-limit"] >= made["control"] - 100 - SLACK["control"], rej
        wait_for(lambda: rd.manifest.get("status") == "workload-done", 120, 0.2)
        st = {n["node"]: n for n in api.status(rd.run_id, runs_dir=str(runs))["nodes"]}
        assert st["b1"]["state"] == "running", st["b1"]
    finally:
        for s in held:
            s.close()
        api.down(rd.run_id, runs_dir=str(runs))
    res = api.analyze_run(str(rd.path))
    failed = [(r.name, r.examples, r.details) for r in res.checks if not r.passed]
    assert res.ok, failed
    assert next(r for r in res.checks if r.name == "node_lives").passed
    rej = res.metrics["rejected"]
    for ch in made:
        assert made[ch] - SLACK[ch] <= rej["by_node"]["b1"][ch] <= made[ch], rej


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))


def test_pre_authentication_control_connections_hold_bounded_memory(tmp_path):
    """Issue #32, attack 5: 200 control connections each sending most of a large first frame held
    1 MiB each for 10 s; now at most CTL_MAX_PRE_AUTH of them are served, each at most
    CTL_PRE_AUTH_MAX_FRAME bytes, for AUTH_TIMEOUT_S."""
    import struct

    from testbed.nodes.runtime import control
    from testbed.testing.harness import NodeProc, make_configs

    cfg = make_configs(str(tmp_path), ["a"])["a"]
    node = NodeProc(cfg).start()
    socks: list[socket.socket] = []
    try:
        node.wait_ready()
        before = _rss_kb(node.proc.pid)
        big = struct.pack(">I", 1024 * 1024) + b"x" * (1024 * 1024 - 1)  # a 1 MiB frame, one byte short
        near = struct.pack(">I", control.CTL_PRE_AUTH_MAX_FRAME) + b"x" * (control.CTL_PRE_AUTH_MAX_FRAME - 1)
        for i in range(200):
            s = socket.create_connection(tuple(cfg["control"]), timeout=5)
            try:
                s.sendall(big if i % 2 else near)
            except OSError:
                pass  # refused and closed while sending: counted below
            socks.append(s)
        time.sleep(0.5)
        grown = _rss_kb(node.proc.pid) - before
        assert grown < 16 * 1024, f"the node grew by {grown} kB"  # was 213 MB for 200 connections
        st = wait_for(lambda: (r := node.call("status")) and sum(r["rejected"].values()) >= 200 and r,
                      control.AUTH_TIMEOUT_S + 10, 0.2)
        rej = st["rejected"]
        # each refused once: beyond the cap at accept, a 1 MiB frame before authentication at once
        # (too-large), the rest after the timeout
        assert rej["control:over-limit"] + rej.get("control:too-large", 0) + rej.get("control:timeout", 0) == 200, rej
        assert rej["control:over-limit"] >= 150 and rej.get("control:too-large", 0) >= 1, rej
        assert node.proc.poll() is None
    finally:
        for s in socks:
            s.close()
        node.kill()


def test_an_exception_escaping_the_event_loop_logs_node_error_with_the_refusal_counts(tmp_path):
    """What killed a node before #32 (select() raising on a descriptor >= 1024) escaped the loop and
    the node exited without a word; now anything escaping it is node_error with the refusal counts."""
    import subprocess
    import sys

    from auth_helpers import connect
    from testbed.nodes.runtime import codec
    from testbed.testing.harness import make_configs, read_log

    cfg = make_configs(str(tmp_path), ["a"])["a"]
    # the node, with select() made to fail as it did on a descriptor >= 1024 once a file says so
    trap = tmp_path / "trap"
    code = ("import os, selectors, sys\n"
            "real = selectors.SelectSelector.select\n"
            "def select(self, timeout=None):\n"
            f"    if os.path.exists({str(trap)!r}):\n"
            "        raise ValueError('filedescriptor out of range in select()')\n"
            "    return real(self, timeout)\n"
            "selectors.SelectSelector.select = select\n"
            "from testbed.nodes.runtime.node_main import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, cfg["_path"]], stderr=subprocess.PIPE,
                            env={**__import__("os").environ, "TESTBED_NODE_SELECTOR": "select"})
    try:
        wait_for(lambda: any(e["ev"] == "node_start" for e in read_log(cfg["log_path"])), 20, 0.05)
        for _ in range(3):  # three strangers, refused and counted
            s, _ch = connect(cfg["control"])
            s.sendall(codec.frame({"op": "stall"}))
            s.close()
        wait_for(lambda: any(e["ev"] == "conn_rejected" for e in read_log(cfg["log_path"])), 10, 0.05)
        time.sleep(0.3)
        trap.touch()
        assert proc.wait(timeout=20) == 1
        err = proc.stderr.read().decode()
        assert "uncaught exception in the event loop" in err and "filedescriptor out of range" in err
        last = read_log(cfg["log_path"])[-1]
        assert last["ev"] == "node_error" and last["where"] == "the event loop", last
        assert "select()" in last["error"] and last["rejected"] == {"control:unauthenticated": 3}, last
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
