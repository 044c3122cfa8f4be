"""Run real node processes on loopback by hand (runtime tests and benchmarks).

Not used by the providers: it writes a minimal node config (the keys of
:mod:`testbed.nodes.runtime.api`) and starts ``python -m testbed.nodes CONFIG.json`` with an argument
list (no shell).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from testbed.nodes.runtime.control_client import ControlClient
from testbed.providers.local.provider import free_ports

__all__ = ["NodeProc", "free_ports", "make_configs", "read_log", "wait_for", "write_config"]


def make_configs(workdir: str, names: list[str], *, run_id: str = "rt-test", protocol: str = "echo",
                 links: dict[str, dict[str, dict[str, Any]]] | None = None,
                 params: dict[str, dict[str, Any]] | None = None,
                 neighbors: dict[str, list[str]] | None = None,
                 emulation: str = "userspace", host: str = "127.0.0.1",
                 service: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """One config per name (written to ``workdir/<name>.json``); every node knows every other."""
    os.makedirs(workdir, exist_ok=True)
    ports = free_ports(2 * len(names), host)
    data = {n: [host, ports[2 * i]] for i, n in enumerate(names)}
    ctl = {n: [host, ports[2 * i + 1]] for i, n in enumerate(names)}
    cfgs = {}
    for i, n in enumerate(names):
        cfg = {
            "run_id": run_id, "node": n, "kind": "node", "role": "echo", "protocol": protocol,
            "site": "s", "cell": None, "neighbors": (neighbors or {}).get(n, []),
            "listen": data[n], "control": ctl[n],
            "peers": {m: data[m] for m in names if m != n},
            "links": (links or {}).get(n, {}), "emulation": emulation, "clients": None,
            "directory": {m: {"kind": "node", "role": "echo", "site": "s", "cell": None, "neighbors": []}
                          for m in names},
            "params": (params or {}).get(n, {}), "placement": {}, "seed": 1000 + i, "duration_s": 1.0,
            "log_path": os.path.join(workdir, "logs", f"{n}.jsonl"),
            "state_dir": os.path.join(workdir, "state", n), "log_flush_ms": 100,
            "service": (service or {}).get(n),
        }
        cfgs[n] = write_config(workdir, n, cfg)
    return cfgs


TEST_SECRET = "7e57" * 16  # the run secret of hand-made configs (one "run" per test)


def write_config(workdir: str, name: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """Write ``workdir/<name>.json`` (mode 0600; a ``secret`` is added if the config has none);
    the returned config remembers its path as ``_path``."""
    path = os.path.join(workdir, f"{name}.json")
    cfg.setdefault("secret", TEST_SECRET)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1)
    cfg["_path"] = path
    return cfg


class NodeProc:
    """One running node process and a control client to it."""

    def __init__(self, cfg: dict[str, Any], env: dict[str, str] | None = None) -> None:
        self.cfg = cfg
        self.name = cfg["node"]
        self.stderr_path = cfg["_path"] + ".stderr"
        self._env = env
        self.proc: subprocess.Popen | None = None
        self.ctl = ControlClient(cfg["control"][0], cfg["control"][1], timeout=5.0,
                                 secret=bytes.fromhex(cfg["secret"]), node=cfg["node"])

    def start(self) -> "NodeProc":
        env = dict(os.environ)
        env.update(self._env or {})
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "testbed.nodes", self.cfg["_path"]],
                                         stdout=subprocess.DEVNULL, stderr=err, env=env)
        return self

    def wait_ready(self, timeout: float = 10.0) -> None:
        try:
            self.ctl.wait_ready(timeout)
        except TimeoutError:
            raise TimeoutError(f"{self.name} not ready; stderr: {self.stderr()[-2000:]}") from None

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        return self.ctl.call(op, **args)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 10.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.ctl.close()

    def stop(self, timeout: float = 10.0) -> int:
        """Graceful shutdown over the control channel (SIGKILL if it does not exit)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            try:
                self.call("shutdown")
            except (ConnectionError, TimeoutError, RuntimeError):
                pass
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.ctl.close()
        return self.proc.returncode

    def stderr(self) -> str:
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log(self) -> list[dict[str, Any]]:
        return read_log(self.cfg["log_path"])


def read_log(path: str) -> list[dict[str, Any]]:
    """Every complete line of a JSON-lines log."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.endswith("\n"):
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


def wait_for(pred: Any, timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``pred()`` until truthy; its value, or TimeoutError."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise TimeoutError("condition not met in time")
        time.sleep(interval)
