"""Provider ``local``: every node is a process on this machine, on loopback.

Each node is started as ``python -m testbed.nodes <run>/configs/<node>.json``
in its own session (so signals reach only it), with stdout/stderr in
``<run>/logs/<node>.stderr``. Every pid is written to ``state.json`` right
after it is spawned; ``down`` and ``wipe`` additionally find node processes by
their command line (the config path names the run), so a controller killed in
the middle of ``up`` leaves nothing they cannot remove.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from testbed.errors import ProviderError
from testbed.nodes.runtime.harness import free_ports
from testbed.providers.base import Deployment, Endpoint, NodeStatus, Progress, Provider, process_status
from testbed.providers.control import Controls, run_secret, shutdown_nodes, write_private_json
from testbed.render.node_config import render_node_config
from testbed.runs.rundir import RunDir, write_json_atomic
from testbed.topology.plan import Action, Plan

NODE_MODULE = "testbed.nodes"
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 60.0


def _proc_state(pid: int) -> str | None:
    """The /proc state letter of a pid (R, S, T, Z, ...), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
        return data[data.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return None


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def node_processes(config_prefix: str | None = None) -> dict[int, str]:
    """Live node processes started by any testbed (or one run): {pid: config path}."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        args = _cmdline(pid)
        if len(args) >= 4 and args[1:3] == ["-m", NODE_MODULE] and args[3].endswith(".json"):
            if "/configs/" not in args[3]:
                continue
            if config_prefix is None or args[3].startswith(config_prefix):
                if _proc_state(pid) not in (None, "Z"):
                    found[pid] = args[3]
    return found


def controller_processes(run_path: str | None = None) -> list[int]:
    """Background schedule controllers (``python -m testbed.faults.controller RUN``)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            args = _cmdline(int(entry))
            if len(args) >= 4 and args[1:3] == ["-m", "testbed.faults.controller"]:
                if run_path is None or args[3] == run_path:
                    if _proc_state(int(entry)) not in (None, "Z"):
                        out.append(int(entry))
    return out


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        for p in alive:
            _reap(p)
        alive = [p for p in alive if _proc_state(p) not in (None, "Z")]
        if alive:
            time.sleep(0.02)
    return alive


class LocalProvider(Provider):
    name = "local"

    # -- up ------------------------------------------------------------------------
    def up(self, plan: Plan, run: RunDir, progress: Progress) -> Deployment:
        names = list(plan.nodes)
        ports = free_ports(2 * len(names), LOOPBACK)
        endpoints = {
            n: Endpoint(n, plan.nodes[n].host, (LOOPBACK, ports[2 * i]), (LOOPBACK, ports[2 * i + 1]))
            for i, n in enumerate(names)
        }
        emulation = "userspace"  # the kernel path is for real hosts (ansible/docker with sch_netem)
        peers = {n: ep.data for n, ep in endpoints.items()}
        secret = run_secret(run, create=True)
        for n in names:
            (run.node_state_dir(n)).mkdir(parents=True, exist_ok=True)
            cfg = render_node_config(
                plan, run.run_id, n, listen=endpoints[n].data, control=endpoints[n].control, peers=peers,
                emulation=emulation, log_path=str(run.logs_dir / f"{n}.jsonl"),
                state_dir=str(run.node_state_dir(n)), secret=secret,
            )
            write_private_json(run.configs_dir / f"{n}.json", cfg)
        deployment = Deployment(run.run_id, self.name, emulation, endpoints)
        run.write("deployment.json", deployment.to_dict())
        state = {"provider": self.name, "pids": {}, "config_prefix": str(run.configs_dir) + "/"}
        run.save_state(state)
        progress(f"starting {len(names)} processes")
        for n in names:
            pid = self._spawn(run, n)
            state["pids"][n] = pid
            endpoints[n].handle = str(pid)
        run.save_state(state)
        run.write("deployment.json", deployment.to_dict())
        controls = Controls(deployment, secret=secret)
        try:
            controls.wait_ready(names, START_TIMEOUT_S, alive=lambda n: self._dead_reason(run, n, state))
        finally:
            controls.close()
        progress(f"{len(names)} nodes answer on their control channels")
        return deployment

    def _spawn(self, run: RunDir, node: str) -> int:
        cfg = run.configs_dir / f"{node}.json"
        err = open(run.logs_dir / f"{node}.stderr", "ab")
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", NODE_MODULE, str(cfg)],
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True, env=env,
                close_fds=True,
            )
        finally:
            err.close()
        return proc.pid

    def _dead_reason(self, run: RunDir, node: str, state: dict) -> str | None:
        pid = state["pids"].get(node)
        if pid is None:
            return None
        _reap(pid)
        if _proc_state(pid) in (None, "Z"):
            tail = ""
            p = run.logs_dir / f"{node}.stderr"
            if p.exists():
                lines = [ln for ln in p.read_text(errors="replace").splitlines() if ln.strip()]
                tail = lines[-1] if lines else ""
            return tail or "no output (see the stderr file)"
        return None

    # -- process faults ----------------------------------------------------------------
    def process_action(self, run: RunDir, action: Action) -> None:
        node = action.target[0]
        state = run.state
        pid = state.get("pids", {}).get(node)
        if action.op == "restart":
            if pid is not None and _proc_state(pid) not in (None, "Z"):
                raise ProviderError("restart: the node is still running", node=node)
            new = self._spawn(run, node)
            with run.locked():  # other nodes' faults run concurrently
                st = run.state
                st.setdefault("pids", {})[node] = new
                run.save_state(st)
            return
        if pid is None:
            raise ProviderError(f"{action.op}: no process recorded", node=node)
        if _proc_state(pid) in (None, "Z"):
            raise ProviderError(f"{action.op}: the node is not running", node=node)
        if action.op == "crash":
            _kill(pid, signal.SIGKILL)
            _wait_gone([pid], 5.0)
        elif action.op == "pause":
            _kill(pid, signal.SIGSTOP)
        elif action.op == "resume":
            _kill(pid, signal.SIGCONT)
        else:
            raise self.unsupported(action.op)

    # -- status / logs ---------------------------------------------------------------
    def status(self, run: RunDir) -> list[NodeStatus]:
        pids = run.state.get("pids", {})
        out = []
        for node in run.plan().nodes:
            pid = pids.get(node)
            if pid is None:
                out.append(NodeStatus(node, "unknown", "never started"))
            else:
                out.append(process_status(node, pid, _proc_state(pid)))
        return out

    def collect(self, run: RunDir, progress: Progress) -> None:
        progress("logs are written in the run directory already")

    # -- down / wipe -------------------------------------------------------------------
    def down(self, run: RunDir, progress: Progress) -> None:
        state = run.state
        pids = {int(p): n for n, p in state.get("pids", {}).items()}
        prefix = state.get("config_prefix") or str(run.configs_dir) + "/"
        for pid, cfg in node_processes(prefix).items():
            pids.setdefault(pid, Path(cfg).stem)
        live = [p for p in pids if _proc_state(p) not in (None, "Z")]
        if live:
            for p in live:
                _kill(p, signal.SIGCONT)  # a paused node cannot shut down
            shutdown_nodes(run, [pids[p] for p in live])
            live = _wait_gone(live, 3.0)
            for p in live:
                _kill(p, signal.SIGTERM)
            live = _wait_gone(live, 2.0)
            for p in live:
                _kill(p, signal.SIGKILL)
            live = _wait_gone(live, 2.0)
            if live:
                raise ProviderError(f"processes survived SIGKILL: {live}")
        progress(f"stopped {len(pids)} node processes" if pids else "no node process was running")

    @classmethod
    def wipe(cls, progress: Progress) -> list[str]:
        removed = []
        for pid in controller_processes():
            _kill(pid, signal.SIGKILL)
            removed.append(f"controller pid {pid}")
        procs = node_processes()
        for pid in procs:
            _kill(pid, signal.SIGCONT)
            _kill(pid, signal.SIGKILL)
        _wait_gone(list(procs), 3.0)
        removed += [f"node pid {p} ({c})" for p, c in procs.items()]
        progress(f"local: removed {len(removed)} processes")
        return removed
