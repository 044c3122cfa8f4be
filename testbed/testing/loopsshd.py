"""A private sshd on a loopback port, for tests and benchmarks of the SSH paths (a Docker engine
reached as ``ssh://``, the control forward through ``direct-tcpip``): its own host and client keys
in a directory of the caller's, root logins by key only, a known_hosts line for its host key."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def start(d: Path, keys: tuple[str, ...] = ("host", "client")) -> tuple[subprocess.Popen, int]:
    """Make ``keys`` (ed25519, in ``d``: "host" is the server's, "client" may log in), start sshd on a
    free loopback port and wait until it accepts; writes ``d/known_hosts``. -> (the sshd, its port)."""
    for k in keys:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / k)], check=True)
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host'}\nPidFile {d / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPasswordAuthentication no\n"
        "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n")
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {public_key(d / 'host.pub')}\n")
    return proc, port


def public_key(pub: Path) -> str:
    """``type base64`` of a .pub file (its comment left out), as known_hosts wants it."""
    return " ".join(pub.read_text().split()[:2])
