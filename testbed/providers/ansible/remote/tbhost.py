"""The host-side helper of the ansible provider (shipped to every host; stdlib only).

Run as ``<venv>/bin/python <code>/tbhost.py COMMAND ...`` (argument lists only, never a shell).
Layout under ``--root`` (default ``~/.testbed``)::

    venv/                         python3 -m venv --system-site-packages (made by prepare)
    code/<digest>/                testbed/__init__.py, testbed/nodes/**, vendor/msgpack (pure Python,
                                  on PYTHONPATH only where msgpack is missing), tbhost.py
    runs/<run id>/configs/<node>.json, logs/<node>.jsonl|.stderr, state/<node>/, pids/<node>.pid,
                  runtime.json (only when the run's nodes are containers: image, docker command)
    docker.json                   the docker command that works for this user (["docker"] or
                                  ["sudo", "-n", "docker"]), written by prepare when the host has an engine

Nodes run as processes in the virtualenv, or -- when ``start`` gets ``--image`` -- as one
container per node on the host's own Docker engine (``docker run --network host``: the node
listens on the host's address and ports like a process; the run's directory is bind-mounted at
the same path, so config, logs and state are where a process would have them; ``--user`` is the
SSH user's uid:gid, so everything stays removable without root). Containers are named
``tb-<run>-<node>`` and labeled ``testbed.ansible=1``, ``testbed.root=<root>``,
``testbed.run=<run>``, ``testbed.node=<node>``. Process faults map to the engine: KILL ->
``docker kill`` (waits until it is gone), STOP -> ``docker pause``, CONT -> ``docker unpause``,
spawn -> ``docker start`` of the same container (same config, log appended).

Commands (each prints one JSON object on stdout):

    prepare [--ports N] [--digest D] [--image REF]
                         the root's directories (0700), the virtualenv (--system-site-packages,
                         --without-pip), docker.json, then what ``probe`` says
    probe [--ports N] [--route-to ADDR]... [--image REF]
                         host facts: python, uid, msgpack, tc, docker (cli, engine, whether it
                         answers this user and how, its version, whether it has image REF),
                         sch_netem, clock, N free TCP ports, the egress device towards each ADDR
    check [--emulation auto|kernel|userspace] [--runtime auto|docker|process]
                         what ``prepare`` needs and this host lacks, as Debian package names
                         (``missing``), whether it runs apt (``apt``) and its ``uid``; tc is needed
                         for ``kernel``, and for ``auto`` when the kernel has sch_netem; docker.io
                         for runtime ``docker`` when there is no docker command
    image-load TAR --ref REF
                         ``docker load`` an image saved on the controller, delete TAR, check REF
    image-build TAR --ref REF --base BASE
                         ``docker build`` the node image from a build context TAR on the host
    start RUN [--configs TAR] [--image REF] NODE...
                         unpack the node configs (plain file names only), start each node detached
                         (own session; or a container of REF), write its pid file; {node: pid}
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
import threading
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
        self._dockers: dict[str, "Docker"] = {}

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

    def runtime(self, run: str) -> dict | None:
        """The run's container runtime on this host ({"image", "docker"}) or None (processes)."""
        try:
            with open(os.path.join(self.run_dir(run), "runtime.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def docker(self, run: str) -> Docker | None:
        """The run's docker (one per run and process, so the agent keeps its API connection)."""
        d = self._dockers.get(run)
        if d is None:
            rt = self.runtime(run)
            if rt is None:
                return None
            d = self._dockers[run] = Docker(rt["docker"])
        return d

    # -- containers ----------------------------------------------------------------------
    def run_container(self, run: str, node: str, rt: dict) -> int:
        d = Docker(rt["docker"])
        rd = self.run_dir(run)
        name = container_name(run, node)
        have = d.state(name)
        if have is None:
            d.run("run", "-d", "--name", name, "--network", "host", "--user", f"{os.getuid()}:{os.getgid()}",
                  "--label", "testbed.ansible=1", "--label", f"testbed.root={self.root}",
                  "--label", f"testbed.run={run}", "--label", f"testbed.node={node}",
                  "-v", f"{rd}:{rd}", "-e", "PYTHONUNBUFFERED=1", rt["image"],
                  os.path.join(rd, "configs", node + ".json"))
        else:
            d.act("start", name)
        info = d.state(name) or {}
        if info.get("status") != "running":
            raise RuntimeError(f"container {name} is {info.get('status', 'gone')}: {self.tail(run, node)}")
        return int(info["pid"])

    def container_signal(self, run: str, node: str, sig: str) -> dict:
        d = self.docker(run)
        name = container_name(run, node)
        info = d.state(name)
        if info is None or info["status"] not in ("running", "paused"):
            return {"ok": False, "error": "the node is not running"}
        if sig == "KILL":
            d.act("kill", name)
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                if (d.state(name) or {}).get("status") not in ("running", "paused"):
                    return {"ok": True, "pid": info["pid"]}
                time.sleep(0.005)
            return {"ok": False, "error": f"{name} survived docker kill"}
        if sig == "STOP":
            d.act("pause", name)
        elif sig == "CONT":
            d.act("unpause", name)
        else:
            d.run("kill", "--signal", sig, name)
        return {"ok": True, "pid": info["pid"]}

    def container_states(self, run: str) -> dict[str, dict]:
        """node -> {"pid", "state"} as a process would report it (R running, T paused, None gone)."""
        d = self.docker(run)
        names = [container_name(run, n) for n in self.nodes_started(run)]
        info = d.inspect(names)
        out = {}
        for n in self.nodes_started(run):
            i = info.get(container_name(run, n))
            st = {"running": "R", "paused": "T"}.get(i["status"]) if i else None
            out[n] = {"pid": i["pid"] if i and st else self.pid(run, n), "state": st,
                      "container": container_name(run, n)}
        return out

    def nodes_started(self, run: str) -> list[str]:
        pids_dir = os.path.join(self.run_dir(run), "pids")
        return sorted(f[:-4] for f in os.listdir(pids_dir) if f.endswith(".pid")) if os.path.isdir(pids_dir) else []

    def dump_container_logs(self, run: str) -> None:
        """Each container's output into logs/<node>.stderr (a process writes it there itself)."""
        d = self.docker(run)
        if d is None:
            return
        for n in self.nodes_started(run):
            path = os.path.join(self.run_dir(run), "logs", n + ".stderr")
            with open(path + ".tmp", "w") as f:
                r = subprocess.run([*d.cmd, "logs", container_name(run, n)], stdout=f, stderr=subprocess.STDOUT,
                                   timeout=DOCKER_TIMEOUT_S, stdin=subprocess.DEVNULL)
            if r.returncode == 0:
                os.replace(path + ".tmp", path)
            else:
                os.unlink(path + ".tmp")

    def tail(self, run: str, node: str) -> str:
        d = self.docker(run)
        if d is not None:
            r = d.run("logs", "--tail", "3", container_name(run, node), check=False)
            lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
            return lines[-1] if lines else "no output"
        path = os.path.join(self.run_dir(run), "logs", node + ".stderr")
        if not os.path.exists(path):
            return "no output"
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else "no output"

    def remove_containers(self, run: str | None) -> list[str]:
        """Remove the containers of one run (None: of every run under this root), output kept."""
        d = _docker_of(self) if run is None else (self.docker(run) or _docker_of(self))
        if d is None:
            return []
        labels = [f"testbed.root={self.root}"] + ([f"testbed.run={run}"] if run else [])
        ids = d.ids(*labels)
        if run is not None and self.runtime(run) is not None and os.path.isdir(self.run_dir(run)):
            self.dump_container_logs(run)
        if ids:
            d.run("rm", "-f", *ids)
        return ids

    # -- processes ---------------------------------------------------------------------
    def spawn(self, run: str, node: str) -> int:
        rd = self.run_dir(run)
        cfg = os.path.join(rd, "configs", _safe(node) + ".json")
        if not os.path.isfile(cfg):
            raise RuntimeError(f"no config {cfg}")
        os.makedirs(os.path.join(rd, "pids"), exist_ok=True)
        os.makedirs(os.path.join(rd, "logs"), exist_ok=True)
        os.makedirs(os.path.join(rd, "state", node), exist_ok=True)
        rt = self.runtime(run)
        if rt is not None:
            pid = self.run_container(run, node, rt)
            _write_json(self.pid_file(run, node), pid)
            return pid
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

    def stop(self, run: str | None) -> list:
        for p in self.agents(run):  # sessions a controller left open (they end with it anyway)
            _kill(p, signal.SIGTERM)
        containers = [c[:12] for c in self.remove_containers(run)]
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
        return procs + containers


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


# -- the host's Docker engine -------------------------------------------------------------
DOCKER_TIMEOUT_S = 120.0


def _docker_cmd_probe() -> tuple[list[str] | None, str]:
    """The docker command that reaches the engine as this user: plain, or ``sudo -n`` (no password)."""
    cli = shutil.which("docker") or shutil.which("docker", path="/usr/bin:/usr/local/bin")
    if cli is None:
        return None, "no docker command"
    why = ""
    for cmd in ([cli], ["sudo", "-n", cli]):
        if cmd[0] == "sudo" and (os.getuid() == 0 or shutil.which("sudo") is None):
            continue
        try:
            r = subprocess.run([*cmd, "version", "--format", "{{.Server.Version}}"], capture_output=True,
                               text=True, timeout=20, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as e:
            why = str(e)
            continue
        if r.returncode == 0 and r.stdout.strip():
            return cmd, r.stdout.strip()
        why = why or (r.stderr.strip().splitlines() or ["no answer"])[-1]
    return None, why


class EngineAPI:
    """The Docker Engine API on the engine's unix socket (stdlib only), for the calls on a fault's
    critical path: kill, pause, unpause, start and a container's state, over one kept-alive
    connection (a ``docker`` CLI call costs ~80 ms of its own; one of these a few ms)."""

    SOCKET = "/var/run/docker.sock"

    def __init__(self, path: str = SOCKET, timeout: float = 30.0):
        self.path = path
        self.timeout = timeout
        self._conn = None
        self._lock = threading.Lock()  # one connection: one request at a time

    @classmethod
    def for_user(cls, cmd: list[str]) -> "EngineAPI | None":
        """The API when this user reaches the socket itself (not through sudo), else None."""
        host = os.environ.get("DOCKER_HOST", "")
        if cmd[:1] == ["sudo"] or (host and host != "unix://" + cls.SOCKET):
            return None
        if not os.access(cls.SOCKET, os.R_OK | os.W_OK):
            return None
        api = cls()
        try:
            api.request("GET", "/_ping")
        except (OSError, RuntimeError):
            return None
        return api

    def _connect(self):
        import http.client

        path, timeout = self.path, self.timeout

        class Conn(http.client.HTTPConnection):
            def connect(self) -> None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(timeout)
                s.connect(path)
                self.sock = s

        return Conn("localhost", timeout=timeout)

    def request(self, method: str, path: str):
        """(status, parsed body); raises RuntimeError on an error status other than 304/404."""
        with self._lock:
            return self._request(method, path)

    def _request(self, method: str, path: str):
        import http.client

        for attempt in (0, 1):
            if self._conn is None:
                self._conn = self._connect()
            try:
                self._conn.request(method, path, headers={"Content-Length": "0"} if method == "POST" else {})
                r = self._conn.getresponse()
                body = r.read()
                break
            except (OSError, http.client.HTTPException):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
        data = None
        if body:
            try:
                data = json.loads(body)
            except ValueError:
                data = body.decode(errors="replace")
        if r.status >= 400 and r.status != 404:
            msg = data.get("message") if isinstance(data, dict) else data
            raise RuntimeError(f"docker {method} {path}: {msg or r.status}")
        return r.status, data

    def state(self, name: str) -> dict | None:
        status, data = self.request("GET", f"/containers/{name}/json")
        if status == 404 or not isinstance(data, dict):
            return None
        st = data.get("State") or {}
        return {"status": st.get("Status"), "pid": int(st.get("Pid") or 0)}

    def post(self, name: str, what: str) -> None:
        status, _ = self.request("POST", f"/containers/{name}/{what}")
        if status == 404:
            raise RuntimeError(f"docker {what}: no container {name}")


class Docker:
    """The docker CLI of this host (argument lists only), and the Engine API where it can be used."""

    def __init__(self, cmd: list[str]):
        self.cmd = list(cmd)
        self._api: EngineAPI | None | bool = False  # False: not looked for yet

    @property
    def api(self) -> EngineAPI | None:
        if self._api is False:
            self._api = EngineAPI.for_user(self.cmd)
        return self._api  # type: ignore[return-value]

    def state(self, name: str) -> dict | None:
        """{"status", "pid"} of one container, or None when there is none."""
        if self.api is not None:
            return self.api.state(name)
        return self.inspect([name]).get(name)

    def act(self, what: str, name: str) -> None:
        """kill (SIGKILL), pause, unpause or start one container."""
        if self.api is not None:
            self.api.post(name, "kill?signal=KILL" if what == "kill" else what)
        else:
            self.run(what, name)

    def run(self, *args: str, check: bool = True, timeout: float = DOCKER_TIMEOUT_S,
            stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
        r = subprocess.run([*self.cmd, *args], capture_output=True, text=True, timeout=timeout, stdin=stdin)
        if check and r.returncode != 0:
            last = (r.stderr.strip().splitlines() or [r.stdout.strip() or "no output"])[-1]
            raise RuntimeError(f"docker {args[0]}: {last}")
        return r

    def has_image(self, ref: str) -> bool:
        return self.run("image", "inspect", "--format", "{{.Id}}", ref, check=False).returncode == 0

    def ids(self, *labels: str) -> list[str]:
        args = ["ps", "-aq", "--no-trunc"]
        for lb in labels:
            args += ["--filter", f"label={lb}"]
        return self.run(*args).stdout.split()

    def inspect(self, names: list[str]) -> dict[str, dict]:
        """name -> {"status": running|paused|exited|..., "pid": int, "node": str}; missing names absent."""
        if not names:
            return {}
        r = self.run("inspect", "--type", "container", "--format",
                     '{{.Name}} {{.State.Status}} {{.State.Pid}} {{index .Config.Labels "testbed.node"}}',
                     *names, check=False)
        out = {}
        for ln in r.stdout.splitlines():
            parts = ln.split()
            if len(parts) == 4:
                out[parts[0].lstrip("/")] = {"status": parts[1], "pid": int(parts[2]), "node": parts[3]}
        return out


def container_name(run: str, node: str) -> str:
    return f"tb-{_safe(run)}-{_safe(node)}"


def _docker_of(host: "Host") -> Docker | None:
    try:
        with open(os.path.join(host.root, "docker.json")) as f:
            cmd = json.load(f)["cmd"]
    except (OSError, ValueError, KeyError):
        return None
    return Docker(cmd) if isinstance(cmd, list) and cmd else None


def _write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


# -- commands ---------------------------------------------------------------------------
def probe(ports: int, routes: list[str] | None = None, image: str | None = None) -> dict:
    out = {"home": os.path.expanduser("~"), "python": sys.version.split()[0], "executable": sys.executable,
           "hostname": socket.gethostname(), "kernel": os.uname().release}
    out["msgpack"] = _has_msgpack()
    out["tc"] = _tc()
    out["docker_cli"] = shutil.which("docker")
    out["docker_engine"] = os.path.exists("/var/run/docker.sock")
    cmd, version = _docker_cmd_probe() if out["docker_cli"] else (None, "no docker command")
    out["docker"] = {"cmd": cmd, "version": version if cmd else None, "error": None if cmd else version,
                     "image": bool(cmd and image and Docker(cmd).has_image(image))}
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


def check(host: Host, emulation: str, runtime: str = "auto") -> dict:
    """Missing packages (Debian names): python3-venv when ``python3 -m venv`` cannot make the
    virtualenv, iproute2 when tc is needed (kernel link emulation) and absent, docker.io when the
    topology asks for containers on this host (``runtime: docker``) and there is no docker command."""
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
    if runtime == "docker" and shutil.which("docker") is None:
        missing.append("docker.io")
    return {"missing": missing, "apt": shutil.which("apt-get") is not None, "uid": os.getuid()}


def prepare(host: Host, ports: int, digest: str | None, routes: list[str] | None = None,
            image: str | None = None) -> dict:
    if sys.version_info < (3, 11):
        raise SystemExit(f"tbhost: python3 >= 3.11 is needed, this host has {sys.version.split()[0]}")
    for d in ("", "bin", "code", "runs") + ((f"code/{_safe(digest)}",) if digest else ()):
        os.makedirs(os.path.join(host.root, d), mode=0o700, exist_ok=True)
    os.chmod(host.root, 0o700)
    venv = os.path.join(host.root, "venv")
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", venv],
                       check=True, stdout=subprocess.DEVNULL)
    out = probe(ports, routes, image)
    docker_json = os.path.join(host.root, "docker.json")
    if out["docker"]["cmd"]:
        _write_json(docker_json, {"cmd": out["docker"]["cmd"]})
    out["root"] = host.root
    out["venv"] = os.path.join(venv, "bin", "python")
    return out


def image_load(host: Host, tar_path: str, ref: str) -> dict:
    """``docker load`` a node image the controller saved; the tar is deleted either way."""
    d = _docker_of(host)
    try:
        if d is None:
            raise RuntimeError("no usable Docker engine on this host (prepare found none)")
        with open(tar_path, "rb") as f:
            d.run("load", stdin=f, timeout=900)
    finally:
        if os.path.exists(tar_path):
            os.unlink(tar_path)
    if not d.has_image(ref):
        raise RuntimeError(f"docker load did not give {ref}")
    return {"image": ref, "loaded": True}


def image_build(host: Host, tar_path: str, ref: str, base: str) -> dict:
    """``docker build`` the node image on this host from a build context tar (pulls ``base``)."""
    d = _docker_of(host)
    try:
        if d is None:
            raise RuntimeError("no usable Docker engine on this host (prepare found none)")
        if d.has_image(ref):
            return {"image": ref, "built": False}
        with open(tar_path, "rb") as f:  # the ref's tag names the context digest (ctx-<12 hex>)
            d.run("build", "--network", "host", "-t", ref, "--build-arg", f"BASE={base}",
                  "--label", "testbed.image=node", "--label", f"testbed.base={base}", "-", stdin=f, timeout=1800)
    finally:
        if os.path.exists(tar_path):
            os.unlink(tar_path)
    return {"image": ref, "built": True}


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
            elif op == "signal" and host.runtime(run) is not None:
                _out({"id": rid, **host.container_signal(run, _safe(req["node"]), str(req["sig"]))})
            elif op == "spawn" and host.runtime(run) is not None:
                node = _safe(req["node"])
                name = container_name(run, node)
                info = host.docker(run).state(name)
                if info is not None and info["status"] in ("running", "paused"):
                    _out({"id": rid, "ok": False, "error": "the node is still running"})
                    continue
                _out({"id": rid, "ok": True, "pid": host.spawn(run, node)})
            elif op == "tail" and host.runtime(run) is not None:
                _out({"id": rid, "ok": True, "lines": [host.tail(run, _safe(req["node"]))]})
            elif op == "status" and host.runtime(run) is not None:
                _out({"id": rid, "ok": True, "nodes": host.container_states(run)})
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
    p.add_argument("--image", default=None)
    p = sub.add_parser("prepare")
    p.add_argument("--ports", type=int, default=0)
    p.add_argument("--digest", default=None)
    p.add_argument("--route-to", action="append", default=[])
    p.add_argument("--image", default=None)
    p = sub.add_parser("check")
    p.add_argument("--emulation", choices=("auto", "kernel", "userspace"), default="auto")
    p.add_argument("--runtime", choices=("auto", "docker", "process"), default="auto")
    p = sub.add_parser("image-load")
    p.add_argument("tar")
    p.add_argument("--ref", required=True)
    p = sub.add_parser("image-build")
    p.add_argument("tar")
    p.add_argument("--ref", required=True)
    p.add_argument("--base", required=True)
    p = sub.add_parser("start")
    p.add_argument("run")
    p.add_argument("--configs", default=None)
    p.add_argument("--image", default=None)
    p.add_argument("nodes", nargs="*")
    for c in ("stop", "remove", "pack", "agent"):
        sub.add_parser(c).add_argument("run")
    sub.add_parser("wipe")
    a = ap.parse_args(argv)
    host = Host(a.root, a.code)
    if a.cmd == "probe":
        _out(probe(a.ports, a.route_to, a.image))
    elif a.cmd == "prepare":
        _out(prepare(host, a.ports, a.digest, a.route_to, a.image))
    elif a.cmd == "check":
        _out(check(host, a.emulation, a.runtime))
    elif a.cmd == "image-load":
        _out(image_load(host, a.tar, a.ref))
    elif a.cmd == "image-build":
        _out(image_build(host, a.tar, a.ref, a.base))
    elif a.cmd == "start":
        if a.configs:
            unpack_configs(host, a.run, a.configs)
        if a.image:
            d = _docker_of(host)
            if d is None:
                raise RuntimeError("no usable Docker engine on this host (prepare found none)")
            if not d.has_image(a.image):
                raise RuntimeError(f"the host has no image {a.image} (deploy did not ship it)")
            _write_json(os.path.join(host.run_dir(a.run), "runtime.json"), {"image": a.image, "docker": d.cmd})
        names = [_safe(n) for n in a.nodes]
        if a.image and len(names) > 1:  # `docker run` takes ~0.5 s each: start the containers together
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
                pids = list(pool.map(lambda n: host.spawn(a.run, n), names))
            _out(dict(zip(names, pids)))
        else:
            _out({n: host.spawn(a.run, n) for n in names})
    elif a.cmd == "stop":
        _out({"stopped": host.stop(a.run)})
    elif a.cmd == "remove":
        stopped = host.stop(a.run)
        shutil.rmtree(host.run_dir(a.run), ignore_errors=True)
        _out({"stopped": stopped, "removed": host.run_dir(a.run)})
    elif a.cmd == "pack":
        rd = host.run_dir(a.run)
        if host.runtime(a.run) is not None:
            host.dump_container_logs(a.run)
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
        images = []
        d = _docker_of(host)
        if d is not None:  # the node images testbed shipped or built here
            images = d.run("images", "-q", "--filter", "label=testbed.image=node", check=False).stdout.split()
            if images:
                d.run("rmi", "-f", *sorted(set(images)), check=False)
        shutil.rmtree(host.root, ignore_errors=True)
        _out({"stopped": stopped, "removed": host.root, "images": sorted(set(images))})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ValueError as e:
        print(f"tbhost: {e}", file=sys.stderr)
        sys.exit(2)
