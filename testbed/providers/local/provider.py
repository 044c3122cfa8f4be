"""Provider ``local``: every node is a process on this machine, on loopback.

Each node is started as ``python -m testbed.nodes <run>/configs/<node>.json``
in its own session (so signals reach only it), with stdout/stderr in
``<run>/logs/<node>.stderr``. Every pid is written to ``state.json`` right
after it is spawned; ``down`` and ``wipe`` additionally find node processes by
their command line (the config path names the run), so a controller killed in
the middle of ``up`` leaves nothing they cannot remove.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable

from testbed.errors import ProviderError
from testbed.providers.base import NodeStatus, Progress, Provider, process_status
from testbed.providers.control import Controls, run_secret, shutdown_nodes, write_private_json
from testbed.providers.hostside import procs
from testbed.providers.local import cgroups
from testbed.render.node_config import PlanParts, render_node_config
from testbed.runs.deployment import Deployment, Endpoint
from testbed.runs.rundir import RunDir
from testbed.topology.plan import Action, Plan

NODE_MODULE = procs.NODE_MODULE
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 60.0
SPAWN_THREADS = 8  # processes started at once by `up`


#: Ports handed out by free_ports() on this machine and when: not handed out again for
#: ``PORT_HOLD_S``. Between free_ports() and the nodes binding them the ports are free, so two
#: runs brought up at the same time (``testbed reproduce --jobs``, or two testbed processes:
#: two users' runs, a test suite beside a reproduction) could otherwise be given the same port.
#: The record is a file shared by every testbed process of this user, under a file lock, in
#: the user's private directory (:func:`private_dir`), written through ``mkstemp`` and read and
#: locked with ``O_NOFOLLOW``: no predictable name in the shared ``/tmp`` to plant a symlink at.
PORT_HOLD_S = 120.0
#: Ports are chosen from [PORT_FLOOR, the kernel's ephemeral range's start): the kernel never
#: gives those to an outgoing connection or a bind to port 0, which any process on the machine
#: (another run's nodes connecting to their peers) does all the time.
PORT_FLOOR = 10000
_ports_lock = threading.Lock()


def private_dir() -> Path:
    """``$TMPDIR/testbed-<uid>/``, mode 0700, owned by this user: where the port record lives.
    Made if missing; a symlink, another owner's directory or one open to others is refused
    (one line naming it), so nobody else can plant or swap files in it."""
    d = Path(tempfile.gettempdir()) / f"testbed-{os.getuid()}"
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise ProviderError(f"{d}: cannot make the private directory: {e.strerror}") from None
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ProviderError(f"{d}: not a private directory of this user (a symlink, another owner's, or open "
                            f"to others: mode {stat.S_IMODE(st.st_mode):o}); remove it and try again")
    return d


def _registry() -> Path:
    return private_dir() / "ports.json"


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _port_pool() -> "range | list[int] | None":
    """The ports free_ports() picks from: outside the ephemeral range, or None (too narrow:
    then the kernel picks, as bind to port 0 does)."""
    lo, hi = _ephemeral_range()
    if lo - PORT_FLOOR >= 4096:
        return range(PORT_FLOOR, lo)
    if 65535 - hi >= 4096:
        return range(hi + 1, 65536)
    return None


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _read_held(path: Path, now: float) -> dict[str, float]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            held = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(held, dict):
        return {}
    return {k: t for k, t in held.items() if isinstance(t, (int, float)) and now - t <= PORT_HOLD_S}


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports free right now on ``host``, outside the kernel's ephemeral range,
    none handed out by any testbed process of this user within the last ``PORT_HOLD_S`` s."""
    path = _registry()
    lock_fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with _ports_lock, os.fdopen(lock_fd, "r+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        now = time.time()
        held = _read_held(path, now)
        pool = _port_pool()
        ports: list[int] = []
        if pool is not None:
            rng = random.Random()
            for port in rng.sample(pool, len(pool)):
                if len(ports) == n:
                    break
                if f"{host}:{port}" not in held and _bindable(host, port):
                    ports.append(port)
        else:
            socks: list[socket.socket] = []
            try:
                for _ in range(50 * n + 100):
                    if len(ports) == n:
                        break
                    s = socket.socket()
                    s.bind((host, 0))
                    socks.append(s)  # held until all n are chosen: the kernel gives each once
                    port = s.getsockname()[1]
                    if f"{host}:{port}" not in held:
                        ports.append(port)
            finally:
                for s in socks:
                    s.close()
        if len(ports) < n:
            raise ProviderError(f"no {n} free ports on {host}")
        for port in ports:
            held[f"{host}:{port}"] = now
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="ports.", suffix=".tmp")  # O_EXCL, 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(held))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return ports


def node_processes(config_prefix: str | None = None) -> dict[int, str]:
    """Live node processes started by any testbed (or one run): {pid: config path}."""
    return procs.node_processes(config_prefix)


def controller_processes(run_path: str | None = None) -> list[int]:
    """Background schedule controllers (``python -m testbed.faults.controller RUN``)."""
    return [pid for pid, args in procs.python_module_processes("testbed.faults.controller")
            if len(args) >= 4 and (run_path is None or args[3] == run_path)]


def stop_controllers(run_path: str, known: Iterable[int] = ()) -> None:
    """SIGKILL a run's background controllers: the ``known`` pids (from state.json) and any
    found by command line; wait until they are gone."""
    pids = set(known) | set(controller_processes(run_path))
    for pid in pids:
        procs.kill(pid, signal.SIGKILL)
    procs.wait_gone(list(pids), 2.0)


class LocalProvider(Provider):
    name = "local"

    # -- up ------------------------------------------------------------------------
    def up(self, plan: Plan, run: RunDir, progress: Progress) -> Deployment:
        names = list(plan.nodes)
        groups = cgroups.setup(plan, run.run_id)  # cpu/memory limits (docs/topology.md, Capacity)
        ports = free_ports(2 * len(names), LOOPBACK)
        endpoints = {
            n: Endpoint(n, plan.nodes[n].host, (LOOPBACK, ports[2 * i]), (LOOPBACK, ports[2 * i + 1]))
            for i, n in enumerate(names)
        }
        emulation = "userspace"  # the kernel path is for real hosts (ansible/docker with sch_netem)
        peers = {n: ep.data for n, ep in endpoints.items()}
        secret = run_secret(run, create=True)
        parts = PlanParts(plan)
        for n in names:
            (run.node_state_dir(n)).mkdir(parents=True, exist_ok=True)
            cfg = render_node_config(
                plan, run.run_id, n, listen=endpoints[n].data, control=endpoints[n].control, peers=peers,
                emulation=emulation, log_path=str(run.logs_dir / f"{n}.jsonl"),
                state_dir=str(run.node_state_dir(n)), secret=secret, parts=parts,
            )
            write_private_json(run.configs_dir / f"{n}.json", cfg)
        deployment = Deployment(run.run_id, self.name, emulation, endpoints)
        run.write("deployment.json", deployment.to_dict())
        state = {"provider": self.name, "pids": {}, "config_prefix": str(run.configs_dir) + "/",
                 "cgroups": groups}
        run.save_state(state)
        progress(f"starting {len(names)} processes")
        # A spawn waits for the child's exec (vfork: the calling thread is suspended until it
        # execs, with the GIL released), which on a busy machine is a scheduling delay per
        # process: SPAWN_THREADS at a time overlap those waits (docs/benchmarks.md, bring-up).
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=max(1, min(SPAWN_THREADS, len(names)))) as pool:
            futures = {n: pool.submit(self._spawn, run, n, groups.get(n, [])) for n in names}
        for n in names:  # the plan's order, whatever order they started in
            try:
                pid = futures[n].result()
            except BaseException as e:  # noqa: BLE001 -- re-raised below, once the started ones are recorded
                errors.append(e)
                continue
            state["pids"][n] = pid
            endpoints[n].handle = str(pid)
        run.save_state(state)  # every started process is recorded before any error: `down` finds them
        if errors:
            raise errors[0]
        run.write("deployment.json", deployment.to_dict())
        controls = Controls(deployment, secret=secret)
        try:
            controls.wait_ready(names, START_TIMEOUT_S, alive=lambda n: self._dead_reason(run, n, state))
        finally:
            controls.close()
        progress(f"{len(names)} nodes answer on their control channels")
        return deployment

    def _spawn(self, run: RunDir, node: str, groups: list[str]) -> int:
        cfg = run.configs_dir / f"{node}.json"
        err = open(run.logs_dir / f"{node}.stderr", "ab")
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        try:
            proc = subprocess.Popen(
                cgroups.wrap([sys.executable, "-m", NODE_MODULE, str(cfg)], groups),
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True, env=env,
                close_fds=True,
            )
        finally:
            err.close()
        return proc.pid

    def dead_reason(self, run: RunDir, node: str) -> str | None:
        return self._dead_reason(run, node, run.state)

    def killed_by_limit(self, run: RunDir, node: str) -> bool:
        host = run.plan().nodes[node].host
        try:
            return cgroups.oom_kills(run.run_id, host, node) > 0
        except (OSError, cgroups.CgroupError):
            return False

    def confirm_node(self, run: RunDir, node: str, ping: dict) -> None:
        pid = run.state.get("pids", {}).get(node)
        if pid is None or ping.get("pid") != pid:
            raise ProviderError(f"the process answering on the node's control port (pid {ping.get('pid')}) is not "
                                f"the one started for it (pid {pid})", node=node)
        if not procs.alive(pid) or not procs.is_node(pid, str(run.configs_dir / f"{node}.json")):
            raise ProviderError(f"pid {pid} is not running the node's config", node=node)

    def _dead_reason(self, run: RunDir, node: str, state: dict) -> str | None:
        pid = state["pids"].get(node)
        if pid is None:
            return None
        if not procs.alive(pid):
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
        if action.op in ("throttle", "unthrottle"):  # its cgroup's share (a crashed node's too)
            cgroups.set_cpu(run.run_id, run.plan().nodes[node].host, node, action.cpu)
            return
        if action.op == "restart":
            if pid is not None and procs.alive(pid):
                raise ProviderError("restart: the node is still running", node=node)
            new = self._spawn(run, node, state.get("cgroups", {}).get(node, []))
            with run.locked():  # other nodes' faults run concurrently
                st = run.state
                st.setdefault("pids", {})[node] = new
                run.save_state(st)
            return
        if pid is None:
            raise ProviderError(f"{action.op}: no process recorded", node=node)
        if not procs.alive(pid):
            raise ProviderError(f"{action.op}: the node is not running", node=node)
        if not procs.is_node(pid, str(run.configs_dir / f"{node}.json")):  # the pid was reused
            raise ProviderError(f"{action.op}: pid {pid} is no longer this node's process (its command "
                                f"line does not name the node's config); not signalled", node=node)
        if action.op == "crash":
            procs.kill(pid, signal.SIGKILL)
            procs.wait_gone([pid], 5.0)
        elif action.op == "pause":
            procs.kill(pid, signal.SIGSTOP)
        elif action.op == "resume":
            procs.kill(pid, signal.SIGCONT)
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
                out.append(process_status(node, pid, procs.state(pid)))
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
        live = [p for p in pids if procs.alive(p)]
        if live:
            for p in live:
                procs.kill(p, signal.SIGCONT)  # a paused node cannot shut down
            shutdown_nodes(run, [pids[p] for p in live])
            live = procs.wait_gone(live, 3.0)
            live = procs.escalate(live, ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)))
            if live:
                raise ProviderError(f"processes survived SIGKILL: {live}")
        progress(f"stopped {len(pids)} node processes" if pids else "no node process was running")
        try:
            cgroups.record(run)  # the kernel's throttle and OOM counts, before the cgroups go
        except OSError as e:  # never block the cleanup
            progress(f"could not read the run's cgroup counts: {e}")
        if cgroups.remove_run(run.run_id):  # found by the run id: also after a killed up
            progress("removed the run's cgroups")

    @classmethod
    def wipe(cls, progress: Progress) -> list[str]:
        removed = []
        for pid in controller_processes():
            procs.kill(pid, signal.SIGKILL)
            removed.append(f"controller pid {pid}")
        nodes = node_processes()
        for pid in nodes:
            procs.kill(pid, signal.SIGCONT)
            procs.kill(pid, signal.SIGKILL)
        procs.wait_gone(list(nodes), 3.0)
        removed += [f"node pid {p} ({c})" for p, c in nodes.items()]
        removed += [f"cgroup {d}" for d in cgroups.remove_all()]
        progress(f"local: removed {len(removed)} processes")
        return removed
