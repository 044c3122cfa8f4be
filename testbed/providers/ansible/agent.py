"""Persistent SSH sessions to each host's ``tbhost.py agent``: process faults without connection set-up.

One paramiko connection per host, opened (and pinged) before the schedule starts; a fault
is one JSON line down an open channel and one line back. Host keys are verified against
known_hosts (RejectPolicy: an unknown key is refused). The remote command is built with
``shlex.join``, so nothing from the topology reaches the remote shell unquoted.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import threading
from typing import Any

from testbed.errors import ProviderError


class HostAgent:
    """One open ``tbhost.py agent RUN`` session on one host."""

    def __init__(self, host: str, record: dict[str, Any], known_hosts: list[str], argv: list[str],
                 timeout: float = 15.0):
        import paramiko

        self.host = host
        self.timeout = timeout
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
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
        self.chan = transport.open_session(timeout=timeout)
        self.chan.settimeout(timeout)
        self.chan.exec_command(shlex.join(argv))
        self._out = self.chan.makefile("rb")
        self._in = self.chan.makefile_stdin("wb")
        self.call("ping")

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        with self._lock:
            rid = next(self._ids)
            try:
                self._in.write((json.dumps({"id": rid, "op": op, **args}) + "\n").encode())
                self._in.flush()
                line = self._out.readline()
            except (OSError, EOFError) as e:
                raise ProviderError(f"agent: {op}: {e or type(e).__name__}", host=self.host) from None
            if not line:
                err = b""
                try:
                    if self.chan.recv_stderr_ready():
                        err = self.chan.recv_stderr(4096)
                except OSError:
                    pass
                raise ProviderError(f"agent: {op}: the session ended {err.decode(errors='replace').strip()}",
                                    host=self.host)
            reply = json.loads(line)
            return reply

    def close(self) -> None:
        try:
            self._in.close()
            self.chan.shutdown_write()
        except (OSError, EOFError):
            pass
        try:
            self.client.close()
        except Exception:
            pass
