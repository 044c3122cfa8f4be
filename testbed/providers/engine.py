"""Connecting to a Docker engine: the local socket, or ``ssh://user@host`` through paramiko.

Shared by the docker provider and the ansible provider's image shipping.

Host-key policy for remote engines (``docker: ssh://user@address`` on a plan host):
the engine's SSH host key must be in ``~/.ssh/known_hosts`` (or in the file named by
``TESTBED_KNOWN_HOSTS``); an unknown key is refused. Opt in to accepting unknown keys
(kept in memory only, never written to known_hosts) with
``TESTBED_DOCKER_ACCEPT_UNKNOWN_HOSTS=1`` or ``accept_unknown_hosts=True``.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from typing import Any, Mapping

from testbed.errors import ProviderError

ACCEPT_ENV = "TESTBED_DOCKER_ACCEPT_UNKNOWN_HOSTS"
KNOWN_HOSTS_ENV = "TESTBED_KNOWN_HOSTS"
SSH_SESSIONS = 8  # concurrent SSH sessions to one engine (sshd's MaxSessions defaults to 10)
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class SSHTarget:
    """A parsed ``ssh://[user@]host[:port]`` engine URL."""

    url: str
    hostname: str
    username: str | None
    port: int | None


def parse_ssh_url(url: str) -> SSHTarget:
    u = urllib.parse.urlparse(url)
    if u.scheme != "ssh" or not u.hostname:
        raise ProviderError(f"docker engine URL {url!r}: expected ssh://user@address[:port]")
    try:
        port = u.port
    except ValueError:
        raise ProviderError(f"docker engine URL {url!r}: bad port") from None
    return SSHTarget(url=url, hostname=u.hostname, username=u.username, port=port)


def accept_unknown_hosts(flag: bool | None = None, env: Mapping[str, str] | None = None) -> bool:
    """The opt-in: an explicit flag wins, else the environment variable."""
    if flag is not None:
        return bool(flag)
    env = os.environ if env is None else env
    return env.get(ACCEPT_ENV, "").strip().lower() in _TRUE


def host_key_policy(accept_unknown: bool) -> Any:
    """paramiko's policy for a host key missing from known_hosts: reject unless opted in.

    An accepted key is kept in memory only. paramiko's own AutoAddPolicy would write it
    into the last known_hosts file loaded (``$TESTBED_KNOWN_HOSTS`` included).
    """
    import paramiko

    if not accept_unknown:
        return paramiko.RejectPolicy()

    class AcceptInMemory(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
            client.get_host_keys().add(hostname, key.get_name(), key)

    return AcceptInMemory()


def known_hosts_files(env: Mapping[str, str] | None = None) -> list[str]:
    """Extra known_hosts files to load besides the system/user ones."""
    env = os.environ if env is None else env
    extra = env.get(KNOWN_HOSTS_ENV, "")
    return [p for p in extra.split(os.pathsep) if p]


def _adapter_class():
    from docker.transport import SSHHTTPAdapter

    class PolicySSHAdapter(SSHHTTPAdapter):
        """docker-py's paramiko adapter with our host-key policy, key file and port."""

        def __init__(self, base_url: str, *, accept_unknown: bool, key_filename: str | None = None,
                     known_hosts: list[str] | None = None, connect: bool = True, **kw: Any):
            self._tb_accept = accept_unknown
            self._tb_key = key_filename
            self._tb_known = known_hosts or []
            self._tb_connect = connect
            super().__init__(base_url, **kw)

        def _create_paramiko_client(self, base_url: str) -> None:
            super()._create_paramiko_client(base_url)  # loads ~/.ssh/config + known_hosts
            for f in self._tb_known:
                self.ssh_client.load_host_keys(f)
            if self._tb_key:
                self.ssh_params["key_filename"] = self._tb_key
            self.ssh_client.set_missing_host_key_policy(host_key_policy(self._tb_accept))

        def _connect(self) -> None:
            if self._tb_connect:
                super()._connect()

        def get_connection(self, url: Any, proxies: Any = None) -> Any:
            # every pooled HTTP connection is one SSH session: block at the pool's size rather
            # than open more sessions than sshd allows (MaxSessions, 10 by default)
            # docker-py keys its pools by the whole request URL: one pool per API path, each
            # with its own sessions. One pool for the engine keeps the cap real.
            pool = super().get_connection("http+docker://ssh", proxies)
            pool.block = True
            return pool

    return PolicySSHAdapter


def ssh_adapter(url: str, *, accept_unknown: bool, key_filename: str | None = None,
                connect: bool = True, timeout: int = 60):
    """The transport adapter for one ssh:// engine (``connect=False``: build it without connecting)."""
    parse_ssh_url(url)
    cls = _adapter_class()
    return cls(url, accept_unknown=accept_unknown, key_filename=key_filename,
               known_hosts=known_hosts_files(), connect=connect, timeout=timeout,
               max_pool_size=SSH_SESSIONS)


def connect(url: str | None = None, *, key_filename: str | None = None,
            accept_unknown: bool | None = None, timeout: int = 120, host: str | None = None):
    """A ``docker.DockerClient`` for the local engine (url None) or ``ssh://user@host``.

    Raises one ProviderError naming the host when the engine cannot be reached.
    """
    try:
        import docker
        import docker.errors
    except ImportError:
        raise ProviderError("the docker provider needs the Docker SDK: pip install 'testbed[docker]'",
                            host=host) from None
    if not url or not url.startswith("ssh://"):
        try:
            client = docker.DockerClient(base_url=url or None, timeout=timeout) if url else docker.from_env(timeout=timeout)
            client.ping()
            return client
        except docker.errors.DockerException as e:
            where = url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
            raise ProviderError(
                f"cannot reach the Docker engine at {where} ({_short(e)}); start it (e.g. `dockerd &` "
                "or `systemctl start docker`) or use --provider local", host=host) from None
    # ssh://: the same paramiko transport docker-py uses (use_ssh_client=False), with our policy.
    import paramiko

    accept = accept_unknown_hosts(accept_unknown)
    try:
        adapter = ssh_adapter(url, accept_unknown=accept, key_filename=key_filename, timeout=timeout)
    except paramiko.SSHException as e:
        hint = "" if accept else (f" (host key unknown? add it to ~/.ssh/known_hosts, e.g. ssh-keyscan, "
                                  f"or pass --accept-unknown-host-keys / set {ACCEPT_ENV}=1 to accept "
                                  f"unknown keys)")
        raise ProviderError(f"ssh to docker engine {url}: {_short(e)}{hint}", host=host) from None
    except OSError as e:
        raise ProviderError(f"ssh to docker engine {url}: {_short(e)}", host=host) from None
    # An APIClient that does not connect at construction (explicit version, shell-out mode),
    # then mounted on our paramiko adapter (exactly what docker-py does for ssh:// itself).
    api = docker.APIClient(base_url=url, version="1.41", use_ssh_client=True, timeout=timeout)
    api._custom_adapter = adapter
    api.mount("http+docker://ssh", adapter)
    api.base_url = "http+docker://ssh"
    try:
        api._version = api._retrieve_server_version()
    except docker.errors.DockerException as e:
        raise ProviderError(f"docker engine {url}: {_short(e)}", host=host) from None
    client = docker.DockerClient.__new__(docker.DockerClient)
    client.api = api
    return client


def _short(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__
