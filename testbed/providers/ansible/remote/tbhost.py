"""The host-side helper of the ansible provider (shipped to every host; stdlib only).

Run as ``<venv>/bin/python <code>/tbhost.py COMMAND ...`` (argument lists only, never a shell).
Layout under ``--root`` (default ``~/.testbed``)::

    venv/                         python3 -m venv --system-site-packages (made by prepare)
    code/<digest>/                testbed/__init__.py, testbed/nodes/**, vendor/msgpack (pure Python,
                                  on PYTHONPATH only where msgpack is missing), tbhost.py
    runs/<run id>/configs/<node>.json, logs/<node>.jsonl|.stderr, state/<node>/, pids/<node>.pid

Commands (each prints one JSON object on stdout):

    prepare [--ports N] [--digest D]
                         the root's directories (0700), the virtualenv (--system-site-packages,
                         --without-pip), then what ``probe`` says
    probe [--ports N] [--route-to ADDR]...
                         host facts: python, uid, msgpack, tc, docker, sch_netem, clock, N free TCP
                         ports, the egress device towards each ADDR (``routes``)
    check [--emulation auto|kernel|userspace]
                         what ``prepare`` needs and this host lacks, as Debian package names
                         (``missing``), whether it runs apt (``apt``) and its ``uid``; tc is needed
                         for ``kernel``, and for ``auto`` when the kernel has sch_netem
    start RUN [--configs TAR] NODE...
                         unpack the node configs (plain file names only), start each node detached
                         (own session), write its pid file; {node: pid}
    stop RUN             SIGCONT+SIGTERM, then SIGKILL, every process of the run; remove nothing
    remove RUN           stop, then delete runs/<run id>
    pack RUN             tar.gz the run's logs to runs/<run id>/logs.tgz; its path
    wipe                 stop every run, delete the whole root
    agent RUN            a request loop on stdin/stdout (one JSON object a line) for process faults:
                         {"op": "signal", "node", "sig": "KILL|STOP|CONT|TERM"}, {"op": "spawn", "node"},
                         {"op": "status"}, {"op": "tail", "node"} (last stderr lines), {"op": "ping"}; replies {"ok": bool, ...}. Exits on EOF.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time

SIGNALS = {"KILL": signal.SIGKILL, "STOP": signal.SIGSTOP, "CONT": signal.SIGCONT, "TERM": signal.SIGTERM}


def _out(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _safe(name: str) -> str:
    """Names come from the plan ([a-z][a-z0-9-]*, run ids add digits and -); refuse anything else."""
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise ValueError(f"bad name {name!r}")
    return name


class Host:
    def __init__(self, root: str, code: str | None = None):
        self.root = os.path.abspath(os.path.expanduser(root))
        self.code = code

    def run_dir(self, run: str) -> str:
        return os.path.join(self.root, "runs", _safe(run))

    def pid_file(self, run: str, node: str) -> str:
        return os.path.join(self.run_dir(run), "pids", _safe(node) + ".pid")

    def pid(self, run: str, node: str) -> int | None:
        try:
            with open(self.pid_file(run, node)) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    # -- processes ---------------------------------------------------------------------
    def spawn(self, run: str, node: str) -> int:
        rd = self.run_dir(run)
        cfg = os.path.join(rd, "configs", _safe(node) + ".json")
        if not os.path.isfile(cfg):
            raise RuntimeError(f"no config {cfg}")
        os.makedirs(os.path.join(rd, "pids"), exist_ok=True)
        os.makedirs(os.path.join(rd, "logs"), exist_ok=True)
        os.makedirs(os.path.join(rd, "state", node), exist_ok=True)
        code = self.code or os.path.dirname(os.path.abspath(__file__))
        path = code if _has_msgpack() else code + os.pathsep + os.path.join(code, "vendor")
        env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        with open(os.path.join(rd, "logs", node + ".stderr"), "ab") as err:
            p = subprocess.Popen([sys.executable, "-m", "testbed.nodes", cfg], cwd=code, env=env,
                                 stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True,
                                 close_fds=True)
        tmp = self.pid_file(run, node) + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(p.pid))
        os.replace(tmp, self.pid_file(run, node))
        _children[p.pid] = p
        return p.pid

    def run_processes(self, run: str | None) -> dict[int, str]:
        """Live node processes of one run (None: of every run under this root), by command line."""
        prefix = os.path.join(self.root, "runs") + "/"
        if run is not None:
            prefix = self.run_dir(run) + "/"
        found = {}
        for e in os.listdir("/proc"):
            if not e.isdigit():
                continue
            args = _cmdline(int(e))
            if len(args) >= 4 and args[1:3] == ["-m", "testbed.nodes"] and args[3].startswith(prefix):
                if _state(int(e)) not in (None, "Z"):
                    found[int(e)] = args[3]
        return found

    def agents(self, run: str | None) -> list[int]:
        """Other ``tbhost.py ... agent RUN`` processes of this root (of one run, or all)."""
        out = []
        for e in os.listdir("/proc"):
            if not e.isdigit() or int(e) == os.getpid():
                continue
            args = _cmdline(int(e))
            if (len(args) >= 3 and args[1].endswith("tbhost.py") and "agent" in args
                    and "--root" in args and os.path.abspath(os.path.expanduser(
                        args[args.index("--root") + 1])) == self.root
                    and (run is None or args[-1] == run)):
                out.append(int(e))
        return out

    def stop(self, run: str | None) -> list[int]:
        for p in self.agents(run):  # sessions a controller left open (they end with it anyway)
            _kill(p, signal.SIGTERM)
        procs = list(self.run_processes(run))
        for p in procs:
            _kill(p, signal.SIGCONT)
            _kill(p, signal.SIGTERM)
        left = _wait_gone(procs, 3.0)
        for p in left:
            _kill(p, signal.SIGKILL)
        left = _wait_gone(left, 3.0)
        if left:
            raise RuntimeError(f"processes survived SIGKILL: {left}")
        return procs


_children: dict[int, subprocess.Popen] = {}


def _has_msgpack() -> bool:
    try:
        import msgpack  # noqa: F401

        return True
    except ImportError:
        return False


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _state(pid: int) -> str | None:
    p = _children.get(pid)
    if p is not None:
        p.poll()
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
        return data[data.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return None


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive:
        alive = [p for p in alive if _state(p) not in (None, "Z")]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return alive


def _is_node(pid: int, host: Host, run: str, node: str) -> bool:
    args = _cmdline(pid)
    cfg = os.path.join(host.run_dir(run), "configs", node + ".json")
    return len(args) >= 4 and args[1:3] == ["-m", "testbed.nodes"] and args[3] == cfg


# -- commands ---------------------------------------------------------------------------
def probe(ports: int, routes: list[str] | None = None) -> dict:
    out = {"home": os.path.expanduser("~"), "python": sys.version.split()[0], "executable": sys.executable,
           "hostname": socket.gethostname(), "kernel": os.uname().release}
    out["msgpack"] = _has_msgpack()
    out["tc"] = _tc()
    out["docker_cli"] = shutil.which("docker")
    out["docker_engine"] = os.path.exists("/var/run/docker.sock")
    out["sch_netem"] = _has_netem()
    out["uid"] = os.getuid()
    out["routes"] = {a: _route_dev(a) for a in (routes or [])}
    socks, free = [], []
    try:
        for _ in range(ports):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("0.0.0.0", 0))
            socks.append(s)
            free.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    out["ports"] = free
    out["wall_ns"] = time.time_ns()
    return out


def _has_netem() -> bool:
    """Loaded, or a module of the running kernel that loads on demand."""
    if os.path.isdir("/sys/module/sch_netem"):
        return True
    d = os.path.join("/lib/modules", os.uname().release, "kernel", "net", "sched")
    try:
        return any(f.startswith("sch_netem.ko") for f in os.listdir(d))
    except OSError:
        return False


def _tc() -> str | None:
    return shutil.which("tc") or shutil.which("tc", path="/usr/sbin:/sbin")


def _route_dev(addr: str) -> str | None:
    """The device ``ip route get ADDR`` names (None without ip or a route)."""
    ip = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if ip is None:
        return None
    try:
        r = subprocess.run([ip, "-o", "route", "get", addr], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    words = r.stdout.split()
    if r.returncode != 0 or "dev" not in words or words.index("dev") + 1 >= len(words):
        return None
    return words[words.index("dev") + 1]


def check(host: Host, emulation: str) -> dict:
    """Missing packages (Debian names): python3-venv when ``python3 -m venv`` cannot make the
    virtualenv, iproute2 when tc is needed (kernel link emulation) and absent."""
    missing = []
    venv = os.path.join(host.root, "venv")
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        import tempfile

        with tempfile.TemporaryDirectory(prefix="tb-venv-check-") as d:
            r = subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                                os.path.join(d, "v")], capture_output=True)
            if r.returncode != 0:
                missing.append("python3-venv")
    need_tc = emulation == "kernel" or (emulation == "auto" and _has_netem())
    if need_tc and _tc() is None:
        missing.append("iproute2")
    return {"missing": missing, "apt": shutil.which("apt-get") is not None, "uid": os.getuid()}


def prepare(host: Host, ports: int, digest: str | None, routes: list[str] | None = None) -> dict:
    if sys.version_info < (3, 11):
        raise SystemExit(f"tbhost: python3 >= 3.11 is needed, this host has {sys.version.split()[0]}")
    for d in ("", "bin", "code", "runs") + ((f"code/{_safe(digest)}",) if digest else ()):
        os.makedirs(os.path.join(host.root, d), mode=0o700, exist_ok=True)
    os.chmod(host.root, 0o700)
    venv = os.path.join(host.root, "venv")
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", venv],
                       check=True, stdout=subprocess.DEVNULL)
    out = probe(ports, routes)
    out["root"] = host.root
    out["venv"] = os.path.join(venv, "bin", "python")
    return out


def unpack_configs(host: Host, run: str, tar_path: str) -> None:
    rd = host.run_dir(run)
    for d in ("configs", "logs", "state", "pids"):
        os.makedirs(os.path.join(rd, d), mode=0o700, exist_ok=True)
    with tarfile.open(tar_path) as tf:
        for m in tf.getmembers():
            if not m.isfile() or "/" in m.name or not m.name.endswith(".json"):
                continue
            _safe(m.name[:-5])
            f = tf.extractfile(m)
            with open(os.path.join(rd, "configs", m.name), "wb") as out:
                out.write(f.read() if f else b"")
    os.unlink(tar_path)


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
                _out({"id": rid, "ok": True, "wall_ns": time.time_ns()})
            elif op == "signal":
                node = _safe(req["node"])
                sig = SIGNALS[req["sig"]]
                pid = host.pid(run, node)
                if pid is None or _state(pid) in (None, "Z") or not _is_node(pid, host, run, node):
                    _out({"id": rid, "ok": False, "error": "the node is not running"})
                    continue
                os.kill(pid, sig)
                if sig == signal.SIGKILL and _wait_gone([pid], 5.0):
                    _out({"id": rid, "ok": False, "error": f"pid {pid} survived SIGKILL"})
                    continue
                _out({"id": rid, "ok": True, "pid": pid})
            elif op == "spawn":
                node = _safe(req["node"])
                pid = host.pid(run, node)
                if pid is not None and _state(pid) not in (None, "Z") and _is_node(pid, host, run, node):
                    _out({"id": rid, "ok": False, "error": "the node is still running"})
                    continue
                _out({"id": rid, "ok": True, "pid": host.spawn(run, node)})
            elif op == "tail":
                node = _safe(req["node"])
                path = os.path.join(host.run_dir(run), "logs", node + ".stderr")
                lines = []
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        f.seek(max(0, os.path.getsize(path) - 4096))
                        lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
                _out({"id": rid, "ok": True, "lines": lines[-3:]})
            elif op == "status":
                states = {}
                pids_dir = os.path.join(host.run_dir(run), "pids")
                for f in sorted(os.listdir(pids_dir)) if os.path.isdir(pids_dir) else []:
                    if f.endswith(".pid"):
                        node = f[:-4]
                        pid = host.pid(run, node)
                        st = _state(pid) if pid else None
                        alive = st not in (None, "Z") and pid is not None and _is_node(pid, host, run, node)
                        states[node] = {"pid": pid, "state": st if alive else None}
                _out({"id": rid, "ok": True, "nodes": states})
            else:
                _out({"id": rid, "ok": False, "error": f"unknown op {op!r}"})
        except Exception as e:  # one bad request must not end the agent
            _out({"id": None, "ok": False, "error": f"{type(e).__name__}: {e}"})


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="tbhost")
    ap.add_argument("--root", default="~/.testbed")
    ap.add_argument("--code", default=None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe")
    p.add_argument("--ports", type=int, default=0)
    p.add_argument("--route-to", action="append", default=[])
    p = sub.add_parser("prepare")
    p.add_argument("--ports", type=int, default=0)
    p.add_argument("--digest", default=None)
    p.add_argument("--route-to", action="append", default=[])
    p = sub.add_parser("check")
    p.add_argument("--emulation", choices=("auto", "kernel", "userspace"), default="auto")
    p = sub.add_parser("start")
    p.add_argument("run")
    p.add_argument("--configs", default=None)
    p.add_argument("nodes", nargs="*")
    for c in ("stop", "remove", "pack", "agent"):
        sub.add_parser(c).add_argument("run")
    sub.add_parser("wipe")
    a = ap.parse_args(argv)
    host = Host(a.root, a.code)
    if a.cmd == "probe":
        _out(probe(a.ports, a.route_to))
    elif a.cmd == "prepare":
        _out(prepare(host, a.ports, a.digest, a.route_to))
    elif a.cmd == "check":
        _out(check(host, a.emulation))
    elif a.cmd == "start":
        if a.configs:
            unpack_configs(host, a.run, a.configs)
        _out({n: host.spawn(a.run, _safe(n)) for n in a.nodes})
    elif a.cmd == "stop":
        _out({"stopped": host.stop(a.run)})
    elif a.cmd == "remove":
        stopped = host.stop(a.run)
        shutil.rmtree(host.run_dir(a.run), ignore_errors=True)
        _out({"stopped": stopped, "removed": host.run_dir(a.run)})
    elif a.cmd == "pack":
        rd = host.run_dir(a.run)
        dest = os.path.join(rd, "logs.tgz")
        with tarfile.open(dest + ".tmp", "w:gz") as tf:
            if os.path.isdir(os.path.join(rd, "logs")):
                tf.add(os.path.join(rd, "logs"), arcname="logs")
        os.replace(dest + ".tmp", dest)
        _out({"path": dest})
    elif a.cmd == "agent":
        agent(host, a.run)
    elif a.cmd == "wipe":
        stopped = host.stop(None)
        shutil.rmtree(host.root, ignore_errors=True)
        _out({"stopped": stopped, "removed": host.root})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ValueError as e:
        print(f"tbhost: {e}", file=sys.stderr)
        sys.exit(2)
