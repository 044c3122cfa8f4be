"""``tbhost.py agent RUN``: process faults over one SSH session opened before the schedule starts
(the host side of :mod:`testbed.providers.ansible.agent`). One JSON request a line on stdin, one
reply a line on stdout. Stdlib only."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import procs
from host import Host, container_name, is_node, out, safe

SIGNALS = {"KILL": signal.SIGKILL, "STOP": signal.SIGSTOP, "CONT": signal.SIGCONT, "TERM": signal.SIGTERM}


def agent(host: Host, run: str) -> None:
    """Process faults, one request a line; the connection was opened before the schedule started."""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            rid = req.get("id")
            op = req.get("op")
            if op == "ping":
                out({"id": rid, "ok": True, "wall_ns": time.time_ns()})
            elif op == "throttle":  # docs/topology.md, Capacity: the node's CPU share now
                cpu = req.get("cpu")
                out({"id": rid, **host.throttle(run, safe(req["node"]), None if cpu is None else float(cpu))})
            elif op == "stats":
                out({"id": rid, "ok": True, "stats": host.limit_stats(run)})
            elif op == "signal" and host.runtime(run) is not None:
                out({"id": rid, **host.container_signal(run, safe(req["node"]), str(req["sig"]))})
            elif op == "spawn" and host.runtime(run) is not None:
                node = safe(req["node"])
                name = container_name(run, node)
                info = host.docker(run).state(name)
                if info is not None and info["status"] in ("running", "paused"):
                    out({"id": rid, "ok": False, "error": "the node is still running"})
                    continue
                out({"id": rid, "ok": True, "pid": host.spawn(run, node)})
            elif op == "tail" and host.runtime(run) is not None:
                out({"id": rid, "ok": True, "lines": [host.tail(run, safe(req["node"]))]})
            elif op == "status" and host.runtime(run) is not None:
                out({"id": rid, "ok": True, "nodes": host.container_states(run)})
            elif op == "signal":
                node = safe(req["node"])
                sig = SIGNALS[req["sig"]]
                pid = host.pid(run, node)
                if pid is None or not procs.alive(pid) or not is_node(pid, host, run, node):
                    out({"id": rid, "ok": False, "error": "the node is not running"})
                    continue
                os.kill(pid, sig)
                if sig == signal.SIGKILL and procs.wait_gone([pid], 5.0):
                    out({"id": rid, "ok": False, "error": f"pid {pid} survived SIGKILL"})
                    continue
                out({"id": rid, "ok": True, "pid": pid})
            elif op == "spawn":
                node = safe(req["node"])
                pid = host.pid(run, node)
                if pid is not None and procs.alive(pid) and is_node(pid, host, run, node):
                    out({"id": rid, "ok": False, "error": "the node is still running"})
                    continue
                out({"id": rid, "ok": True, "pid": host.spawn(run, node)})
            elif op == "tail":
                node = safe(req["node"])
                path = os.path.join(host.run_dir(run), "logs", node + ".stderr")
                lines = []
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        f.seek(max(0, os.path.getsize(path) - 4096))
                        lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
                out({"id": rid, "ok": True, "lines": lines[-3:]})
            elif op == "status":
                states = {}
                pids_dir = os.path.join(host.run_dir(run), "pids")
                for f in sorted(os.listdir(pids_dir)) if os.path.isdir(pids_dir) else []:
                    if f.endswith(".pid"):
                        node = f[:-4]
                        pid = host.pid(run, node)
                        st = procs.state(pid) if pid else None
                        alive = pid is not None and procs.alive(pid) and is_node(pid, host, run, node)
                        states[node] = {"pid": pid, "state": st if alive else None}
                out({"id": rid, "ok": True, "nodes": states})
            else:
                out({"id": rid, "ok": False, "error": f"unknown op {op!r}"})
        except Exception as e:  # one bad request must not end the agent
            out({"id": None, "ok": False, "error": f"{type(e).__name__}: {e}"})
