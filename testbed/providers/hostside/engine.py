"""The host's Docker engine: the ``docker`` CLI (argument lists only) and, where this user reaches
the engine's socket itself, the Engine API for the calls on a fault's critical path. Stdlib only."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading

DOCKER_TIMEOUT_S = 120.0


def docker_cmd_probe() -> tuple[list[str] | None, str]:
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


def docker_of(root: str) -> Docker | None:
    """The docker command ``prepare`` found for this user (``ROOT/docker.json``), or None."""
    try:
        with open(os.path.join(root, "docker.json")) as f:
            cmd = json.load(f)["cmd"]
    except (OSError, ValueError, KeyError):
        return None
    return Docker(cmd) if isinstance(cmd, list) and cmd else None
