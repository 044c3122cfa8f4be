"""One host's testbed root: run directories, pid files, and the run's nodes as processes or containers.

Layout under the root: see tbhost.py. Stdlib only; the ansible provider ships this folder to
every host.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time

import cgroups
import procs
from engine import DOCKER_TIMEOUT_S, Docker, docker_of


def out(obj) -> None:
    """Print one JSON object on its own line (every command's reply, every agent reply)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def safe(name: str) -> str:
    """Names come from the plan ([a-z][a-z0-9-]*, run ids add digits and -); refuse anything else."""
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise ValueError(f"bad name {name!r}")
    return name


def container_name(run: str, node: str) -> str:
    return f"tb-{safe(run)}-{safe(node)}"


def write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def has_msgpack() -> bool:
    try:
        import msgpack  # noqa: F401

        return True
    except ImportError:
        return False


#: The node image's unprivileged user (``testbed.providers.image.NODE_UID``): a container never
#: runs as root; as this user when the SSH user is root, else as the SSH user.
NODE_UID = 10001
NODE_GID = 10001
#: Where a container sees its run's files (the ansible provider renders container configs with
#: it): ``configs/<node>.json`` (read-only), ``logs/``, ``state/<node>/``, each its own bind mount,
#: so no directory of the SSH user's home needs to be passable inside the container.
IN_RUN = "/run/testbed"

_children: dict[int, subprocess.Popen] = {}  # node processes this process started (kept, not leaked)


class Host:
    def __init__(self, root: str, code: str | None = None):
        self.root = os.path.abspath(os.path.expanduser(root))
        self.code = code
        self._dockers: dict[str, Docker] = {}

    def run_dir(self, run: str) -> str:
        return os.path.join(self.root, "runs", safe(run))

    def pid_file(self, run: str, node: str) -> str:
        return os.path.join(self.run_dir(run), "pids", safe(node) + ".pid")

    def pid(self, run: str, node: str) -> int | None:
        try:
            with open(self.pid_file(run, node)) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def _run_json(self, run: str, name: str) -> dict | None:
        try:
            with open(os.path.join(self.run_dir(run), name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def runtime(self, run: str) -> dict | None:
        """The run's container runtime on this host ({"image", "docker"}) or None (processes)."""
        return self._run_json(run, "runtime.json")

    def limits(self, run: str) -> dict | None:
        """The run's CPU/memory limits on this host (``limits.json``: {"host", "spec", "procs"}), or None."""
        return self._run_json(run, "limits.json")

    def set_limits(self, run: str, path: str) -> None:
        """Take the limits the controller sent (``path``: {"host": the plan's name of this host,
        "spec": :func:`testbed.providers.capacity.spec` of its nodes}) into ``limits.json``; for
        nodes run as processes, make their cgroups now (``cgroups.make``: raises
        ``cgroups.Refused`` when this host cannot enforce them)."""
        with open(path) as f:
            lim = json.load(f)
        os.unlink(path)
        host, spec = safe(str(lim["host"])), lim["spec"]
        for n, v in spec["nodes"].items():
            safe(n)
            safe(str(v[0]))
        lim = {"host": host, "spec": spec, "procs": {}}
        if self.runtime(run) is None:
            lim["procs"] = cgroups.make(safe(run), spec["hosts"], spec["nodes"], bool(spec["cpu"]),
                                        bool(spec["memory"]))
        write_json(os.path.join(self.run_dir(run), "limits.json"), lim)

    def throttle(self, run: str, node: str, cores: float | None) -> dict:
        """A node's CPU share now: its cgroup's quota, or ``docker update --cpus`` of its container
        (no limit: every CPU of the host)."""
        d = self.docker(run)
        if d is not None:
            n = cores if cores is not None else float(os.cpu_count() or 1)
            d.run("update", "--cpus", f"{n:.3f}", container_name(run, node))
            return {"ok": True}
        lim = self.limits(run)
        if lim is None:
            return {"ok": False, "error": "throttle: the run was brought up without cgroups on this host"}
        try:
            cgroups.set_cpu(run, lim["host"], node, cores)
        except cgroups.CgroupError as e:
            return {"ok": False, "error": str(e)}
        return {"ok": True}

    def limit_stats(self, run: str) -> dict[str, dict]:
        """The kernel's counts per node: its cgroup's (nr_periods, nr_throttled, throttled_s,
        oom_kill), or for a container whether the OOM killer ended it (State.OOMKilled). Empty for
        a run without limits on this host."""
        lim = self.limits(run)
        if lim is None:
            return {}
        d = self.docker(run)
        if d is not None:
            names = [container_name(run, n) for n in self.nodes_started(run)]
            if not names:
                return {}
            r = d.run("inspect", "--type", "container", "--format",
                      '{{index .Config.Labels "testbed.node"}} {{.State.OOMKilled}}', *names, check=False)
            return {p[0]: {"oom_kill": 1 if p[1] == "true" else 0}
                    for p in (ln.split() for ln in r.stdout.splitlines()) if len(p) == 2}
        return cgroups.stats(run, {n: lim["host"] for n in lim["spec"]["nodes"]})

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
            limits = []  # docs/topology.md, Capacity: the container's NanoCpus and Memory (no swap)
            _, cpu, mem = ((self.limits(run) or {}).get("spec") or {}).get("nodes", {}).get(node) or (None, None, None)
            if cpu is not None:
                limits += ["--cpus", f"{float(cpu):.3f}"]
            if mem is not None:
                limits += ["--memory", str(int(mem)), "--memory-swap", str(int(mem))]
            cfg = os.path.join(rd, "configs", node + ".json")
            logs = os.path.join(rd, "logs")
            state = os.path.join(rd, "state", node)
            if os.getuid() == 0:  # never root inside: the image's user gets the node's files
                user = f"{NODE_UID}:{NODE_GID}"
                for p in (cfg, logs, state):
                    os.chown(p, NODE_UID, NODE_GID, follow_symlinks=False)
            else:
                user = f"{os.getuid()}:{os.getgid()}"
            d.run("run", "-d", "--name", name, "--network", "host", "--user", user, *limits,
                  "--label", "testbed.ansible=1", "--label", f"testbed.root={self.root}",
                  "--label", f"testbed.run={run}", "--label", f"testbed.node={node}",
                  "-v", f"{cfg}:{IN_RUN}/configs/{node}.json:ro", "-v", f"{logs}:{IN_RUN}/logs",
                  "-v", f"{state}:{IN_RUN}/state/{node}", "-e", "PYTHONUNBUFFERED=1", rt["image"],
                  f"{IN_RUN}/configs/{node}.json")
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
        d = docker_of(self.root) if run is None else (self.docker(run) or docker_of(self.root))
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
        cfg = os.path.join(rd, "configs", safe(node) + ".json")
        if not os.path.isfile(cfg):
            raise RuntimeError(f"no config {cfg}")
        os.makedirs(os.path.join(rd, "pids"), exist_ok=True)
        os.makedirs(os.path.join(rd, "logs"), exist_ok=True)
        os.makedirs(os.path.join(rd, "state", node), exist_ok=True)
        rt = self.runtime(run)
        if rt is not None:
            pid = self.run_container(run, node, rt)
            write_json(self.pid_file(run, node), pid)
            return pid
        code = self.code or os.path.dirname(os.path.abspath(__file__))
        path = code if has_msgpack() else code + os.pathsep + os.path.join(code, "vendor")
        env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        with open(os.path.join(rd, "logs", node + ".stderr"), "ab") as err:
            joins = ((self.limits(run) or {}).get("procs") or {}).get(node) or []  # its cgroups, joined first
            p = subprocess.Popen(cgroups.wrap([sys.executable, "-m", "testbed.nodes", cfg], joins), cwd=code, env=env,
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
        return procs.node_processes(prefix)

    def agents(self, run: str | None) -> list[int]:
        """Other ``tbhost.py ... agent RUN`` processes of this root (of one run, or all)."""
        out = []
        for e in os.listdir("/proc"):
            if not e.isdigit() or int(e) == os.getpid():
                continue
            args = procs.cmdline(int(e))
            if (len(args) >= 3 and args[1].endswith("tbhost.py") and "agent" in args
                    and "--root" in args and os.path.abspath(os.path.expanduser(
                        args[args.index("--root") + 1])) == self.root
                    and (run is None or args[-1] == run)):
                out.append(int(e))
        return out

    def stop(self, run: str | None) -> list:
        for p in self.agents(run):  # sessions a controller left open (they end with it anyway)
            procs.kill(p, signal.SIGTERM)
        containers = [c[:12] for c in self.remove_containers(run)]
        pids = list(self.run_processes(run))
        for p in pids:
            procs.kill(p, signal.SIGCONT)  # a stopped process does not act on SIGTERM
        left = procs.escalate(pids, ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)))
        if left:
            raise RuntimeError(f"processes survived SIGKILL: {left}")
        return pids + containers


def is_node(pid: int, host: Host, run: str, node: str) -> bool:
    """Is ``pid`` still the process of this node (a pid file can outlive its process)?"""
    return procs.is_node(pid, os.path.join(host.run_dir(run), "configs", node + ".json"))


def unpack_configs(host: Host, run: str, tar_path: str) -> None:
    rd = host.run_dir(run)
    for d in ("configs", "logs", "state", "pids"):
        os.makedirs(os.path.join(rd, d), mode=0o700, exist_ok=True)
    with tarfile.open(tar_path) as tf:
        for m in tf.getmembers():
            if not m.isfile() or "/" in m.name or not m.name.endswith(".json"):
                continue
            safe(m.name[:-5])
            f = tf.extractfile(m)
            # the configs hold the run secret: 0600, never through a symlink planted in their place
            dst = os.path.join(rd, "configs", m.name)
            fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                os.fchmod(out.fileno(), 0o600)
                out.write(f.read() if f else b"")
    os.unlink(tar_path)
