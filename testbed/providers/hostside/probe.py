"""What a host has and lacks (python, msgpack, tc, sch_netem, a Docker engine, free ports, routes),
and ``prepare``: the root's directories and virtualenv. Stdlib only."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import cgroups
from engine import Docker, docker_cmd_probe
from host import Host, has_msgpack, safe, write_json


def probe(ports: int, routes: list[str] | None = None, image: str | None = None) -> dict:
    out = {"home": os.path.expanduser("~"), "python": sys.version.split()[0], "executable": sys.executable,
           "hostname": socket.gethostname(), "kernel": os.uname().release}
    out["msgpack"] = has_msgpack()
    out["tc"] = tc()
    out["docker_cli"] = shutil.which("docker")
    out["docker_engine"] = os.path.exists("/var/run/docker.sock")
    cmd, version = docker_cmd_probe() if out["docker_cli"] else (None, "no docker command")
    out["docker"] = {"cmd": cmd, "version": version if cmd else None, "error": None if cmd else version,
                     "image": bool(cmd and image and Docker(cmd).has_image(image))}
    out["sch_netem"] = has_netem()
    out["uid"] = os.getuid()
    out["cgroups"] = cgroups.probe()
    out["routes"] = {a: route_dev(a) for a in (routes or [])}
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


def has_netem() -> bool:
    """Loaded, or a module of the running kernel that loads on demand."""
    if os.path.isdir("/sys/module/sch_netem"):
        return True
    d = os.path.join("/lib/modules", os.uname().release, "kernel", "net", "sched")
    try:
        return any(f.startswith("sch_netem.ko") for f in os.listdir(d))
    except OSError:
        return False


def tc() -> str | None:
    return shutil.which("tc") or shutil.which("tc", path="/usr/sbin:/sbin")


def route_dev(addr: str) -> str | None:
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
    need_tc = emulation == "kernel" or (emulation == "auto" and has_netem())
    if need_tc and tc() is None:
        missing.append("iproute2")
    if runtime == "docker" and shutil.which("docker") is None:
        missing.append("docker.io")
    return {"missing": missing, "apt": shutil.which("apt-get") is not None, "uid": os.getuid()}


def prepare(host: Host, ports: int, digest: str | None, routes: list[str] | None = None,
            image: str | None = None) -> dict:
    if sys.version_info < (3, 11):
        raise SystemExit(f"tbhost: python3 >= 3.11 is needed, this host has {sys.version.split()[0]}")
    for d in ("", "bin", "code", "runs") + ((f"code/{safe(digest)}",) if digest else ()):
        os.makedirs(os.path.join(host.root, d), mode=0o700, exist_ok=True)
    os.chmod(host.root, 0o700)
    venv = os.path.join(host.root, "venv")
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", venv],
                       check=True, stdout=subprocess.DEVNULL)
    out = probe(ports, routes, image)
    docker_json = os.path.join(host.root, "docker.json")
    if out["docker"]["cmd"]:
        write_json(docker_json, {"cmd": out["docker"]["cmd"]})
    out["root"] = host.root
    out["venv"] = os.path.join(venv, "bin", "python")
    return out
