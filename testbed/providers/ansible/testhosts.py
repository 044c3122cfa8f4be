"""SSH hosts for the ``ssh`` tests and the benchmark: containers running sshd (real SSH, real keys).

Each host is a container of ``testbed-sshhost`` (built by ``.ci/ssh-setup.sh``: sshd + python3,
no msgpack, no Docker engine) on the default bridge, with fresh host keys, the caller's own
ed25519 user key (generated here, in the caller's temporary directory) and its host key pinned
in a known_hosts file, so every connection runs with StrictHostKeyChecking=yes.
Containers carry the label ``testbed.sshtest=1``.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

IMAGE = os.environ.get("TESTBED_SSH_HOST_IMAGE", "testbed-sshhost:3")
USER = "tb"
HOSTS = ("h1", "h2", "h3")


def _docker(*args: str, input: bytes | None = None, check: bool = True) -> str:
    r = subprocess.run(["docker", *args], input=input, capture_output=True, timeout=300)
    if check and r.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {r.stderr.decode(errors='replace').strip()}")
    return r.stdout.decode(errors="replace").strip()


class SSHHosts:
    """Three sshd containers with the test's key and pinned host keys."""

    def __init__(self, tmp: Path, names: tuple[str, ...] = HOSTS):
        self.names = names
        self.tag = uuid.uuid4().hex[:8]
        self.tmp = tmp
        self.key = tmp / "id_ed25519"
        self.known_hosts = tmp / "known_hosts"
        self.containers: dict[str, str] = {}
        self.addresses: dict[str, str] = {}

    def start(self) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "testbed-test", "-f", str(self.key)],
                       check=True, capture_output=True)
        pub = (self.tmp / "id_ed25519.pub").read_bytes()
        for h in self.names:
            name = f"tb-sshhost-{self.tag}-{h}"
            _docker("run", "-d", "--label", "testbed.sshtest=1", "--name", name, "--hostname", h, IMAGE)
            self.containers[h] = name
        lines = []
        for h, name in self.containers.items():
            _docker("exec", "-i", name, "sh", "-c",
                    "cat > /home/tb/.ssh/authorized_keys && chown tb:tb /home/tb/.ssh/authorized_keys "
                    "&& chmod 600 /home/tb/.ssh/authorized_keys", input=pub)
            addr = _docker("inspect", "-f", "{{.NetworkSettings.IPAddress}}", name)
            self.addresses[h] = addr
            for _ in range(100):
                hk = _docker("exec", name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub", check=False)
                if hk.startswith("ssh-ed25519"):
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"{name}: no host key")
            lines.append(f"{addr} {' '.join(hk.split()[:2])}")
        self.known_hosts.write_text("\n".join(lines) + "\n")
        for h, addr in self.addresses.items():  # sshd answers
            for _ in range(100):
                r = subprocess.run(self.ssh_argv(h, "true"), capture_output=True, timeout=30)
                if r.returncode == 0:
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"ssh to {h}: {r.stderr.decode(errors='replace').strip()}")

    def ssh_argv(self, host: str, *cmd: str) -> list[str]:
        return ["ssh", "-i", str(self.key), "-o", "StrictHostKeyChecking=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "BatchMode=yes",
                f"{USER}@{self.addresses[host]}", *cmd]

    def exec(self, host: str, *argv: str) -> str:
        return _docker("exec", self.containers[host], *argv, check=False)

    def node_processes(self, host: str) -> list[str]:
        out = self.exec(host, "ps", "-eo", "args")
        return [ln for ln in out.splitlines() if "testbed.nodes" in ln]

    def stop(self) -> None:
        for name in self.containers.values():
            _docker("rm", "-f", name, check=False)
