"""SSH hosts for the ``ssh`` tests and the benchmark: containers running sshd (real SSH, real keys).

Each host is a container of ``testbed-sshhost`` (built by ``.ci/ssh-setup.sh``: sshd + python3,
no msgpack, no Docker engine) on the default bridge, with fresh host keys, the caller's own
ed25519 user key (generated here, in the caller's temporary directory) and its host key pinned
in a known_hosts file, so every connection runs with StrictHostKeyChecking=yes.
Containers carry the label ``testbed.sshtest=1``.

Hosts named in ``sudo=`` are containers of ``testbed-sshhost-sudo``: no python3, no iproute2 (no ``tc``),
passwordless sudo for the SSH user and CAP_NET_ADMIN, for the apt path of ``prepare``
(``become: true``). Hosts named in ``docker=`` are containers of ``testbed-sshhost-docker`` instead: a Docker engine
of their own (docker-in-docker; the SSH user is in the ``docker`` group), run with every
capability the outer engine may grant but CAP_SYS_RESOURCE (which this machine's bounding set
lacks, so ``--privileged`` fails), seccomp/AppArmor unconfined, a private cgroup namespace
(the entry point remounts the cgroup hierarchies writable) and an anonymous volume for
``/var/lib/docker`` (removed with the container). Everything the inner engine runs dies with
the host container.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

IMAGE = os.environ.get("TESTBED_SSH_HOST_IMAGE", "testbed-sshhost:3")
DOCKER_IMAGE = os.environ.get("TESTBED_SSH_DOCKER_HOST_IMAGE", "testbed-sshhost-docker:1")
SUDO_IMAGE = os.environ.get("TESTBED_SSH_SUDO_HOST_IMAGE", "testbed-sshhost-sudo:2")
DIND_ARGS = ("--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--cgroupns", "private",
             "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
             "--security-opt", "systempaths=unconfined", "-v", "/var/lib/docker")
USER = "tb"
HOSTS = ("h1", "h2", "h3")


def _docker(*args: str, input: bytes | None = None, check: bool = True) -> str:
    r = subprocess.run(["docker", *args], input=input, capture_output=True, timeout=300)
    if check and r.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {r.stderr.decode(errors='replace').strip()}")
    return r.stdout.decode(errors="replace").strip()


def _thaw(container: str) -> None:
    """Thaw whatever a docker host's own engine left paused (a test that failed between a pause
    and its resume): a frozen process ignores SIGKILL, so the host container could not be removed
    ("did not receive an exit event"). Through the inner engine, then the freezer cgroups."""
    _docker("exec", container, "sh", "-c", "docker ps -q --filter status=paused | xargs -r docker unpause",
            check=False)
    cid = _docker("inspect", "-f", "{{.Id}}", container, check=False)
    if not cid:
        return
    for top, dirs, files in os.walk("/sys/fs/cgroup/freezer"):
        if os.path.basename(top) == cid:
            for sub, _, names in os.walk(top):
                if "freezer.state" in names:
                    try:
                        with open(os.path.join(sub, "freezer.state"), "r+") as f:
                            if "FROZEN" in f.read():
                                f.seek(0)
                                f.write("THAWED")
                    except OSError:
                        pass
            dirs[:] = []


class SSHHosts:
    """Three sshd containers with the test's key and pinned host keys."""

    def __init__(self, tmp: Path, names: tuple[str, ...] = HOSTS, docker: tuple[str, ...] = (),
                 sudo: tuple[str, ...] = ()):
        self.names = names
        self.docker = tuple(docker)
        self.sudo = tuple(sudo)  # hosts of SUDO_IMAGE: no tc, passwordless sudo, CAP_NET_ADMIN
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
            if h in self.sudo:
                _docker("run", "-d", "--label", "testbed.sshtest=1", "--name", name, "--hostname", h,
                        "--cap-add", "NET_ADMIN", SUDO_IMAGE)
            elif h in self.docker:
                _docker("run", "-d", "--label", "testbed.sshtest=1", "--name", name, "--hostname", h,
                        *DIND_ARGS, DOCKER_IMAGE)
            else:
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
        for h in self.docker:  # the inner engine answers the SSH user
            for _ in range(300):
                r = subprocess.run(self.ssh_argv(h, "docker", "version", "--format", "{{.Server.Version}}"),
                                   capture_output=True, timeout=30)
                if r.returncode == 0:
                    break
                time.sleep(0.1)
            else:
                log = self.exec(h, "tail", "-n", "5", "/var/log/dockerd.log")
                raise RuntimeError(f"{h}: the inner Docker engine did not start: {log}")

    def load_image(self, host: str, image: str) -> None:
        """Copy an image of this machine's engine into a docker host's engine (test set-up only)."""
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        r = subprocess.run(["docker", "exec", "-i", self.containers[host], "docker", "load"], stdin=save.stdout,
                           capture_output=True, timeout=300)
        save.wait()
        if r.returncode != 0 or save.returncode != 0:
            raise RuntimeError(f"loading {image} into {host}: {r.stderr.decode(errors='replace').strip()}")

    def containers_on(self, host: str) -> list[str]:
        """Every container (any state) of a docker host's own engine, as 'name status'."""
        out = self.exec(host, "docker", "ps", "-a", "--format", "{{.Names}} {{.Status}}")
        return [ln for ln in out.splitlines() if ln.strip()]

    def __enter__(self) -> "SSHHosts":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def use(self, setenv, tmp: Path) -> None:
        """Point testbed at these hosts: their pinned keys, and a host registry and cache of the
        caller's own under ``tmp`` (``setenv``: e.g. pytest's ``monkeypatch.setenv``)."""
        setenv("TESTBED_KNOWN_HOSTS", str(self.known_hosts))
        setenv("TESTBED_ANSIBLE_REGISTRY", str(tmp / "registry.json"))
        setenv("TESTBED_CACHE", str(tmp / "cache"))

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
        for h, name in self.containers.items():
            if h in self.docker:
                _thaw(name)
            _docker("rm", "-f", "-v", name, check=False)


def spread_smoke(dest: Path, runtimes: dict[str, str] | None = None, name: str = "smoke-ansible.yaml") -> Path:
    """The smoke topology (``topologies/smoke.yaml``, from a source checkout) with its three sites
    on the three hosts h1-h3 (ny, rome, tokyo), plus a pause of b2 on h1, so every host gets a
    process fault. ``runtimes``: a ``runtime:`` per host (auto when absent)."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "topologies" / "smoke.yaml").read_text()
    rt = runtimes or {}
    hosts = "hosts:\n" + "".join(
        f"  {h}: {{address: \"{{{{ {h}_addr }}}}\", user: {USER}, key: \"{{{{ key }}}}\", site: {s}"
        + (f", runtime: {rt[h]}" if h in rt else "") + "}\n"
        for h, s in zip(HOSTS, ("ny", "rome", "tokyo")))
    text = text.replace("\nnodes:", "\n" + hosts + "\nnodes:", 1)
    text = text.replace("  - {at: 16s, pause: b5, for: 1.5s}",
                        "  - {at: 16s, pause: b5, for: 1.5s}\n  - {at: 6.5s, pause: b2, for: 1s}", 1)
    if "pause: b2" not in text or "hosts:" not in text:
        raise RuntimeError("topologies/smoke.yaml changed: update testhosts.spread_smoke")
    p = dest / name
    p.write_text(text)
    return p


def set_vars(hosts: SSHHosts) -> dict[str, str]:
    """The ``--set`` variables of :func:`spread_smoke`: each host's address and the test key."""
    return {**{f"{h}_addr": a for h, a in hosts.addresses.items()}, "key": str(hosts.key)}


def missing_prerequisite(images: tuple[str, ...]) -> str | None:
    """Why SSH test hosts of ``images`` cannot be made here, or None. Missing host images are
    built first (``.ci/ssh-setup.sh``, from a source checkout)."""
    import shutil

    if shutil.which("docker") is None or shutil.which("ssh-keygen") is None or shutil.which("ssh") is None:
        return "docker, ssh and ssh-keygen are needed"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "no Docker engine to run the SSH hosts (.ci/docker-setup.sh)"
    for image in images:
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
            setup = Path(__file__).resolve().parents[2] / ".ci" / "ssh-setup.sh"
            r = subprocess.run(["bash", str(setup)], capture_output=True, text=True)
            if r.returncode != 0:
                return f"cannot build {image}: {r.stderr.strip()[-300:]}"
    return None


def require(images: tuple[str, ...]) -> None:
    """In a test: skip when SSH test hosts of ``images`` cannot be made here -- fail under CI=true,
    where a skipped ``ssh`` test would hide untested code."""
    why = missing_prerequisite(images)
    if why is None:
        return
    import pytest

    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI needs real SSH hosts: {why}")
    pytest.skip(why)
