"""The /proc table: a process's command line and state, signals, waiting for processes to go.

Stdlib only, and no imports of its siblings: the local provider imports it as
``testbed.providers.hostside.procs``, and on a host the ansible provider ships it beside
``tbhost.py``, which imports it as ``procs``.
"""

from __future__ import annotations

import os
import time
from typing import Iterator

NODE_MODULE = "testbed.nodes"  # nodes run as ``python -m testbed.nodes CONFIG.json``


def cmdline(pid: int) -> list[str]:
    """The process's argument list ([] when it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def state(pid: int) -> str | None:
    """The /proc state letter of a pid (R, S, T, Z, ...), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
        return data[data.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return None


def reap(pid: int) -> None:
    """Collect the exit status of a child of this process (so it is not left a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child, or reaped already
        pass


def alive(pid: int) -> bool:
    """Running, sleeping or stopped: neither gone nor a zombie (a dead child is reaped first)."""
    reap(pid)
    st = state(pid)
    if st == "Z":  # it died between the reap and the read: collect it now (a child of ours), so it is gone
        reap(pid)
        return False
    return st is not None


def kill(pid: int, sig: int) -> None:
    """Send ``sig``; a process that is gone already is not an error."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_gone(pids: list[int], timeout: float, interval: float = 0.01) -> list[int]:
    """Wait up to ``timeout`` seconds for the processes to end; returns those still alive."""
    deadline = time.monotonic() + timeout
    left = list(pids)
    while True:
        left = [p for p in left if alive(p)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(interval)


def escalate(pids: list[int], steps: tuple[tuple[int, float], ...]) -> list[int]:
    """For each (signal, seconds) step: send the signal to the processes still alive and wait up to
    that long for them to end. Returns those alive after the last step."""
    left = list(pids)
    for sig, wait_s in steps:
        if not left:
            break
        for p in left:
            kill(p, sig)
        left = wait_gone(left, wait_s)
    return left


def python_module_processes(module: str) -> Iterator[tuple[int, list[str]]]:
    """Live processes started as ``python -m MODULE ...``: (pid, argument list)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            pid = int(entry)
            args = cmdline(pid)
            if len(args) >= 3 and args[1:3] == ["-m", module] and alive(pid):
                yield pid, args


def node_processes(prefix: str | None = None) -> dict[int, str]:
    """Live node processes, {pid: config path}: ``python -m testbed.nodes .../configs/NODE.json``
    (of every run, or those whose config path starts with ``prefix``)."""
    return {pid: args[3] for pid, args in python_module_processes(NODE_MODULE)
            if len(args) >= 4 and args[3].endswith(".json") and "/configs/" in args[3]
            and (prefix is None or args[3].startswith(prefix))}


def is_node(pid: int, config: str) -> bool:
    """Is ``pid`` the node process started with this config (not a later process reusing the pid)?"""
    args = cmdline(pid)
    return len(args) >= 4 and args[1:3] == ["-m", NODE_MODULE] and args[3] == config
