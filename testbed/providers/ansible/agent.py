"""Persistent SSH sessions to each host's ``tbhost.py agent``: process faults without connection set-up.

One paramiko connection per host, opened (and pinged) before the schedule starts, carrying
``channels`` sessions (4 by default), each its own ``tbhost.py agent``: a fault is one JSON
line down an idle channel and one line back, so faults on different nodes of one host (the
schedule runs them concurrently) do not wait for each other's ``docker`` call. Host keys are verified against
known_hosts (RejectPolicy: an unknown key is refused). The remote command is built with
``shlex.join``, so nothing from the topology reaches the remote shell unquoted.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import shlex
import threading
from typing import Any

from testbed.errors import ProviderError


class HostAgent:
    """One open ``tbhost.py agent RUN`` session on one host."""

    def __init__(self, host: str, record: dict[str, Any], known_hosts: list[str], argv: list[str],
                 timeout: float = 15.0, channels: int = 4):
        import paramiko

        self.host = host
        self.timeout = timeout
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._idle: queue.Queue = queue.Queue()
        self._chans: list[Any] = []
        self.client = paramiko.SSHClient()
        for f in known_hosts:
            try:
                self.client.load_host_keys(f)
            except FileNotFoundError:
                pass
        self.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            self.client.connect(record["address"], port=int(record.get("port") or 22),
                                username=record.get("user") or None,
                                key_filename=os.path.expanduser(record["key"]) if record.get("key") else None,
                                timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
                                allow_agent=False, look_for_keys=not record.get("key"))
        except paramiko.SSHException as e:
            raise ProviderError(f"ssh: {e} (is the host key in known_hosts?)", host=host) from None
        except OSError as e:
            raise ProviderError(f"ssh: {e}", host=host) from None
        transport = self.client.get_transport()
        assert transport is not None
        transport.set_keepalive(15)
        try:
            for _ in range(max(1, channels)):
                chan = transport.open_session(timeout=timeout)
                chan.settimeout(timeout)
                chan.exec_command(shlex.join(argv))
                slot = (chan, chan.makefile_stdin("wb"), chan.makefile("rb"))
                self._chans.append(slot)
                self._call(slot, "ping")
                self._idle.put(slot)
        except BaseException:
            self.close()
            raise

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        """One request on an idle channel (waits for one when all are busy)."""
        slot = self._idle.get()
        try:
            return self._call(slot, op, **args)
        finally:
            self._idle.put(slot)

    def _call(self, slot: tuple[Any, Any, Any], op: str, **args: Any) -> dict[str, Any]:
        chan, stdin, stdout = slot
        with self._lock:
            rid = next(self._ids)
        try:
            stdin.write((json.dumps({"id": rid, "op": op, **args}) + "\n").encode())
            stdin.flush()
            line = stdout.readline()
        except (OSError, EOFError) as e:
            raise ProviderError(f"agent: {op}: {e or type(e).__name__}", host=self.host) from None
        if not line:
            err = b""
            try:
                if chan.recv_stderr_ready():
                    err = chan.recv_stderr(4096)
            except OSError:
                pass
            raise ProviderError(f"agent: {op}: the session ended {err.decode(errors='replace').strip()}",
                                host=self.host)
        return json.loads(line)

    def close(self) -> None:
        for chan, stdin, _ in self._chans:
            try:
                stdin.close()
                chan.shutdown_write()
            except (OSError, EOFError):
                pass
        try:
            self.client.close()
        except Exception:
            pass
