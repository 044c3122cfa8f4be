"""Control connections to remote nodes through SSH: a direct-tcpip channel, not a TCP socket.

On remote hosts a node's control port is not reachable from the network: the ansible provider
binds it to ``127.0.0.1`` on the node's host, and the docker provider on an ``ssh://`` engine
publishes nothing (the control port is on the container's address, which only the engine host
and the run's own containers reach). The controller opens one SSH connection per host (the
same address, user, key and host-key policy the provider uses) and asks that host's sshd for a
``direct-tcpip`` channel to the control endpoint, one per control connection: sshd connects
from the host itself.

A deployment's endpoint carries the SSH target (:attr:`testbed.runs.deployment.Endpoint.tunnel`:
address, port, user, key *path*, and ``kind``); :class:`testbed.providers.control.Controls` gives
such endpoints a connector from :data:`TUNNELS`, the one pool of this controller process.

Host keys: ``kind: ansible`` verifies against known_hosts (``~/.ssh/known_hosts`` and
``$TESTBED_KNOWN_HOSTS``), an unknown key refused, as the provider's own sessions do;
``kind: docker`` follows the engine's policy (:func:`testbed.providers.engine.host_key_policy`:
refused unless ``TESTBED_DOCKER_ACCEPT_UNKNOWN_HOSTS=1``).
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

SSH_TIMEOUT_S = 15.0


def target_key(target: dict[str, Any]) -> tuple:
    return (target.get("kind"), target["address"], int(target.get("port") or 22), target.get("user"),
            target.get("key"))


def describe(target: dict[str, Any]) -> str:
    user = f"{target['user']}@" if target.get("user") else ""
    port = f":{target['port']}" if target.get("port") and int(target["port"]) != 22 else ""
    return f"ssh://{user}{target['address']}{port}"


class SSHTunnels:
    """One paramiko connection per SSH target, opened on first use, reopened when it dropped."""

    def __init__(self) -> None:
        self._clients: dict[tuple, Any] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._lock = threading.Lock()

    def _connect(self, target: dict[str, Any]) -> Any:
        import paramiko

        from testbed.providers.engine import accept_unknown_hosts, host_key_policy, known_hosts_files

        client = paramiko.SSHClient()
        try:
            client.load_system_host_keys()
        except OSError:
            pass
        for f in known_hosts_files() + [os.path.expanduser("~/.ssh/known_hosts")]:
            try:
                client.load_host_keys(f)
            except (FileNotFoundError, IOError):
                pass
        accept = target.get("kind") == "docker" and accept_unknown_hosts()
        client.set_missing_host_key_policy(host_key_policy(accept))
        key = target.get("key")
        client.connect(target["address"], port=int(target.get("port") or 22), username=target.get("user") or None,
                       key_filename=os.path.expanduser(key) if key else None, timeout=SSH_TIMEOUT_S,
                       banner_timeout=SSH_TIMEOUT_S, auth_timeout=SSH_TIMEOUT_S, allow_agent=not key,
                       look_for_keys=not key)
        transport = client.get_transport()
        transport.set_keepalive(15)
        return client

    def _transport(self, target: dict[str, Any]) -> Any:
        k = target_key(target)
        with self._lock:
            lock = self._locks.setdefault(k, threading.Lock())
        with lock:  # one connection per target, even when many control clients start at once
            c = self._clients.get(k)
            t = c.get_transport() if c is not None else None
            if t is None or not t.is_active():
                if c is not None:
                    c.close()
                c = self._clients[k] = self._connect(target)
                t = c.get_transport()
            return t

    def open(self, target: dict[str, Any], dest: tuple[str, int], timeout: float) -> Any:
        """A channel to ``dest`` as seen from the target host (a socket-like paramiko Channel).
        Raises ConnectionError (or TimeoutError) naming the target and the destination."""
        import paramiko

        where = f"{dest[0]}:{dest[1]} through {describe(target)}"
        try:
            t = self._transport(target)
            ch = t.open_channel("direct-tcpip", (dest[0], int(dest[1])), ("127.0.0.1", 0), timeout=timeout)
        except paramiko.ChannelException as e:  # sshd could not connect (refused, unreachable)
            raise ConnectionError(f"control {where}: {e.text or e}") from None
        except paramiko.SSHException as e:
            msg = str(e) or type(e).__name__
            if "timeout" in msg.lower():
                raise TimeoutError(f"control {where}: {msg}") from None
            raise ConnectionError(f"control {where}: {msg}") from None
        except OSError as e:
            raise ConnectionError(f"control {where}: {e.strerror or e}") from None
        return ch

    def connector(self, target: dict[str, Any], dest: tuple[str, int]):
        """``connect(timeout) -> channel`` for a ControlClient."""
        return lambda timeout: self.open(target, dest, timeout)

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            try:
                c.close()
            except Exception:
                pass


TUNNELS = SSHTunnels()
atexit.register(TUNNELS.close)
