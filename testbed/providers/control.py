"""Controller side of the node control channel, shared by every provider.

Link faults (cut, heal, partition, stall, set_link), workload start/stop,
status and graceful shutdown all travel over each node's control channel.
One persistent connection per node, opened before the schedule starts, so no
connection set-up sits on a fault's critical path.

Every request is authenticated with the run's secret (``runs/<id>/secret``, mode
0600, made at ``up`` by :func:`run_secret`; see ``testbed/nodes/runtime/auth.py``)
and names its ``origin`` (``schedule``, ``inject`` or ``housekeeping``), which
the node logs with every applied op (``ctl_applied``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

from testbed.errors import ProviderError, RunError
from testbed.nodes.runtime.auth import SECRET_KEY, new_secret, parse_secret
from testbed.nodes.runtime.control_client import ControlClient
from testbed.runs.deployment import Deployment

SECRET_FILE = "secret"


def run_secret(run: Any, create: bool = False) -> bytes:
    """The run's secret from ``<run dir>/secret`` (0600); ``create``: make it if there is none.

    Made once per run at ``up`` (``os.urandom``, 32 bytes, stored as hex). Never written to
    the manifest, plan, logs or report, never passed on a command line.
    """
    path = Path(run.path) / SECRET_FILE
    if create:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(new_secret().hex() + "\n")
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        raise RunError(f"{path}: the run has no secret (made at `up`); its nodes cannot be "
                       f"controlled without it") from None
    except OSError as e:
        raise RunError(f"{path}: cannot read the run secret: {e.strerror}") from None
    try:
        return parse_secret(text)
    except ValueError as e:
        raise RunError(f"{path}: {e}") from None


def write_private_json(path: Path | str, data: Any) -> None:
    """Write a JSON file readable by its owner only (0600), atomically: node configs hold the secret.

    One line of JSON (the C encoder; ``indent`` would take the pure-Python one, most of writing
    a 100-node run's configs), and no fsync: a reader sees the old file or the whole new one
    (the rename), and a config is rewritten by every ``up`` (nothing to keep across a power cut)."""
    path = Path(path)
    text = json.dumps(data, default=str)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
    os.replace(tmp, path)


def redact(cfg: dict[str, Any]) -> dict[str, Any]:
    """A node config without its secret (for anything printed or logged)."""
    return {k: ("<redacted>" if k == SECRET_KEY else v) for k, v in cfg.items()}


class Controls:
    """Pooled control clients for one deployment. Thread-safe per node.

    ``secret``: the run's (:func:`run_secret`); ``origin``: who drives the nodes through this
    pool -- ``schedule`` (the fault schedule), ``inject`` (``testbed inject``) or
    ``housekeeping`` (start-up, status, clock, shutdown).
    """

    def __init__(self, deployment: Deployment, timeout: float = 5.0, *, secret: bytes,
                 origin: str = "housekeeping"):
        self.deployment = deployment
        self.timeout = timeout
        self.secret = secret
        self.origin = origin
        self._clients: dict[str, ControlClient] = {}
        self._locks: dict[str, threading.Lock] = {n: threading.Lock() for n in deployment.endpoints}
        self._pool = ThreadPoolExecutor(max_workers=min(32, max(4, len(deployment.endpoints))))

    def _new_client(self, node: str, timeout: float) -> ControlClient:
        ep = self.deployment.endpoints[node]
        connector = None
        if ep.tunnel:  # a remote control port: a direct-tcpip channel of the host's SSH connection
            from testbed.providers.tunnel import TUNNELS

            connector = TUNNELS.connector(ep.tunnel, (ep.control[0], int(ep.control[1])))
        return ControlClient(ep.control[0], ep.control[1], timeout=timeout, secret=self.secret,
                             origin=self.origin, run_id=self.deployment.run_id, node=node, connector=connector)

    def _client(self, node: str) -> ControlClient:
        c = self._clients.get(node)
        if c is None:
            c = self._clients[node] = self._new_client(node, self.timeout)
        return c

    def call(self, node: str, op: str, **args: Any) -> dict[str, Any]:
        """One request; a broken connection is reopened once. Raises ProviderError(node=...)."""
        if node not in self._locks:
            raise ProviderError(f"no such node in this run (known: {', '.join(sorted(self._locks))})", node=node)
        with self._locks[node]:
            for attempt in (0, 1):
                try:
                    reply = self._client(node).call(op, **args)
                    break
                except (ConnectionError, OSError, TimeoutError) as e:
                    self._drop(node)
                    if attempt == 1:
                        raise ProviderError(f"control channel: {op}: {e or type(e).__name__}", node=node) from None
                except RuntimeError as e:
                    raise ProviderError(f"control channel: {op}: {e}", node=node) from None
        return reply

    def call_many(self, calls: Iterable[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
        """Run (node, op, args) calls concurrently; returns {node: reply or ProviderError}."""
        futs = {node: self._pool.submit(self.call, node, op, **args) for node, op, args in calls}
        out: dict[str, Any] = {}
        for node, f in futs.items():
            try:
                out[node] = f.result()
            except ProviderError as e:
                out[node] = e
        return out

    def wait_ready(self, nodes: Iterable[str], timeout: float, alive=None) -> None:
        """Wait until every node answers ping. ``alive(node) -> str|None`` reports a dead process."""
        pending = set(nodes)
        deadline = time.monotonic() + timeout
        while pending:
            for node in sorted(pending):
                if alive is not None:
                    why = alive(node)
                    if why:
                        raise ProviderError(f"exited during start-up: {why}", node=node)
                try:
                    c = self._new_client(node, 1.0)
                    c.call("ping")
                    self._clients[node] = c
                    pending.discard(node)
                except (ConnectionError, OSError, TimeoutError, RuntimeError):
                    pass
            if pending and time.monotonic() > deadline:
                names = ", ".join(sorted(pending)[:10])
                raise ProviderError(f"{len(pending)} node(s) did not answer within {timeout:.0f}s: {names}")
            if pending:
                time.sleep(0.05)

    def refresh(self, deployment: Deployment) -> None:
        """Take endpoints that moved (e.g. a restarted container at a new address, or a new tunnel)."""
        for node, ep in deployment.endpoints.items():
            old = self.deployment.endpoints.get(node)
            if old is not None and (tuple(old.control) != tuple(ep.control) or tuple(old.data) != tuple(ep.data)
                                    or old.tunnel != ep.tunnel):
                with self._locks[node]:
                    self.deployment.endpoints[node] = ep
                    self._drop(node)

    def _drop(self, node: str) -> None:
        c = self._clients.pop(node, None)
        if c is not None:
            try:
                c.close()
            except Exception:
                pass

    def close(self) -> None:
        for n in list(self._clients):
            self._drop(n)
        self._pool.shutdown(wait=False, cancel_futures=True)


def shutdown_nodes(run, nodes=None, timeout: float = 2.0) -> None:
    """Ask nodes (default: all of the run) for a graceful shutdown over their control channels.

    Best effort: a run without a deployment, or a node that does not answer, is left to the
    provider's harder means (signals, ``docker kill``). Every provider's ``down`` starts here.
    """
    try:
        deployment = run.deployment()
    except RunError:
        return
    targets = [n for n in (nodes if nodes is not None else deployment.endpoints) if n in deployment.endpoints]
    try:
        secret = run_secret(run)
    except RunError:
        return
    controls = Controls(deployment, timeout=timeout, secret=secret)
    try:
        controls.call_many((n, "shutdown", {}) for n in targets)
    finally:
        controls.close()
