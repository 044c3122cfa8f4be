"""Scratch directories under the system's temporary directory, and the ones a killed process left.

Every temporary directory the testbed makes outside a run directory (the Parquet of an analysis
that stores nothing in the run, a Spark session's scratch space, Ansible's inventories and
collected archives) is made by :func:`make`, whose name carries the owner's pid:
``<prefix>-<pid>-<random>``. The owner removes it when it ends (``try/finally`` or ``atexit``),
which a SIGKILL skips; :func:`leftovers` finds the ones whose owner is gone and ``testbed wipe``
removes them (:func:`remove_leftovers`).

A directory of a live process is never touched (its pid is alive); a directory named the way
versions before the pid was in the name did (``<prefix>-<8 random characters>``) is removed only
when it has not changed for :data:`LEGACY_AGE_S`, since its owner cannot be told.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# longest first: "tb-ansible-up-..." is not "tb-ansible-" with a pid "up"
PREFIXES = ("tb-ansible-collect", "tb-ansible-up", "tb-ansible", "testbed-ingest", "testbed-spark")
LEGACY_AGE_S = 24 * 3600
_ALT = "|".join(re.escape(p) for p in PREFIXES)
_OWNED = re.compile(rf"^(?:{_ALT})-(\d+)-[A-Za-z0-9_]+$")
_LEGACY = re.compile(rf"^(?:{_ALT})-[a-z0-9_]{{8}}$")


def make(prefix: str) -> Path:
    """A new private directory ``<tmp>/<prefix>-<pid>-<random>``; ``prefix`` is one of :data:`PREFIXES`."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown scratch prefix {prefix!r} (one of {', '.join(PREFIXES)})")
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-"))


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (another user's counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # none, or beyond any pid
        return False
    except PermissionError:  # another user's
        return True
    return True


def owner(name: str) -> int | None:
    """The owner's pid in a scratch directory's name, ``None`` if the name has none (or is not ours)."""
    m = _OWNED.match(name)
    return int(m.group(1)) if m else None


def leftovers(root: str | os.PathLike | None = None, *, alive: Callable[[int], bool] = pid_alive,
              now: float | None = None) -> list[Path]:
    """The scratch directories under ``root`` (default: the temporary directory) whose owner is gone:
    named with a pid that is not alive, or named without one and unchanged for :data:`LEGACY_AGE_S`."""
    base = Path(root) if root is not None else Path(tempfile.gettempdir())
    t = time.time() if now is None else now
    out = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    for p in entries:
        try:
            if p.is_symlink() or not p.is_dir():
                continue
            pid = owner(p.name)
            if pid is not None:
                if not alive(pid):
                    out.append(p)
            elif _LEGACY.match(p.name) and t - p.stat().st_mtime > LEGACY_AGE_S:
                out.append(p)
        except OSError:
            continue
    return sorted(out)


def remove_leftovers(progress: Callable[[str], None] = lambda m: None,
                     root: str | os.PathLike | None = None) -> list[str]:
    """Remove :func:`leftovers`; returns what was removed (``scratch <path>``)."""
    removed = []
    for p in leftovers(root):
        shutil.rmtree(p, ignore_errors=True)
        if not p.exists():
            removed.append(f"scratch {p}")
    if removed:
        progress(f"removed {len(removed)} scratch directories left by ended processes")
    return removed
