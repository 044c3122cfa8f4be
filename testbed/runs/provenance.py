"""Where results come from: the machine and the checkout (no testbed state, no I/O beyond reading
``/proc``, the JDK's ``release`` file and running ``git``/``java`` with fixed argument lists).

Used by every run's manifest (``versions.git``, ``testbed.api``) and by the stamp of a paper's
results (``testbed.experiments.stamp``): one way to say which commit and which machine.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for key in ("model name", "Hardware", "Model", "cpu model"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.M)
        if m:
            return m.group(1).strip()
    return platform.processor() or platform.machine() or "unknown"


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30, 1)
    except (ValueError, OSError, AttributeError):
        return None


@lru_cache(maxsize=1)
def java_version() -> str | None:
    """The version of the ``java`` Spark would start ($JAVA_HOME/bin/java, else on the PATH)."""
    home = os.environ.get("JAVA_HOME")
    java = shutil.which("java", path=os.path.join(home, "bin")) if home else shutil.which("java")
    if not java:
        return None
    try:  # the JDK's release file says it without starting a JVM
        text = (Path(os.path.realpath(java)).parents[1] / "release").read_text()
        m = re.search(r'^JAVA_VERSION="([^"]+)"', text, re.M)
        if m:
            return m.group(1)
    except (OSError, IndexError):
        pass
    try:
        p = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "([^"]+)"', p.stderr + p.stdout)
    return m.group(1) if m else None


def _spark_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def machine() -> dict[str, Any]:
    """The machine a reproduction ran on (the controller's; the runs' hosts for ``--provider
    ansible`` are in each run's manifest)."""
    return {"cores": os.cpu_count(), "memory_gib": _memory_gib(), "cpu": _cpu_model(),
            "os": platform.platform(), "python": platform.python_version(), "java": java_version(),
            "spark": _spark_version()}


def git_state(package_root: Path | None = None) -> dict[str, Any] | None:
    """The commit of the checkout the ``testbed`` package is imported from and whether its tracked
    files differ from it; None when that directory is not the top of a git checkout (an installed
    wheel inside some other repository does not count)."""
    top = Path(package_root) if package_root else Path(__file__).resolve().parents[2]

    def git(*args: str) -> str | None:
        try:
            p = subprocess.run(["git", "-C", str(top), *args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return p.stdout.strip() if p.returncode == 0 else None

    root = git("rev-parse", "--show-toplevel")
    if root is None or Path(root).resolve() != top.resolve():
        return None
    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def load_now() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):  # a platform without load averages
        return None



__all__ = ["git_state", "java_version", "load_now", "machine"]
