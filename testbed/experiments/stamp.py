"""The stamp of a reproduction, and the one shape of a paper's claims document (``claims.json``).

A stamp says what produced a paper's results, so that two reproductions can be compared knowing
what differs between them (``testbed compare``, docs/experiments.md "Stamps"):

* ``testbed``: the package version; ``code_version``: the run index's hash of the code that runs
  experiments (:func:`testbed.experiments.index.code_version`, what decides whether a run is
  reused) and ``code_version_analysis`` (the same with ``analysis/``, what computed entries use);
* ``git``: the checkout's commit and whether its tracked files had changes (``dirty``), or null
  when the package is not a git checkout (an installed wheel);
* ``machine``: cores, memory (GiB), CPU model, OS, Python, Java and Spark versions;
* ``load``: the machine's 1-minute load average while the runs measured (every run's manifest
  records ``load_avg``; max and mean over the runs used, and the runs that had it) and at the start
  and end of this reproduction (a paper of computed entries only has no run manifests);
* ``wall_s``: this reproduction's wall time; ``runs_elapsed_s``: the runs used, summed as the run
  index recorded them (a reproduction resumed over several sittings: the machine time of all of
  them; with ``--jobs`` > 1 more than the wall time);
* ``scale``, ``provider``, ``jobs``, ``figures``, ``points_filter``, ``date`` (UTC).

Everything here reads the machine; nothing from a topology reaches a shell (``git`` and ``java``
are run with fixed argument lists).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

CLAIMS_SCHEMA = 1  # claims.json: bumped when a field changes meaning or disappears


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
    except OSError:
        return None


def stamp(*, scale: str, figures: list[int], wall_s: float, load_runs: dict[str, Any],
          load_start: list[float] | None, runs_elapsed_s: float | None = None, provider: str | None = None,
          jobs: int | None = None, points_filter: dict[str, Any] | None = None,
          date: str | None = None) -> dict[str, Any]:
    """One paper's stamp (the module docstring lists the fields). ``load_runs``: what
    :func:`testbed.experiments.runner.load_evidence` found in the runs' manifests."""
    from testbed import __version__
    from testbed.experiments.index import code_version

    load = {"runs": int(load_runs.get("load_runs") or 0),
            "load_1m_max": load_runs.get("load_1m_max"), "load_1m_mean": load_runs.get("load_1m_mean"),
            "at_start": load_start, "at_end": load_now()}
    return {"testbed": __version__, "code_version": code_version(False),
            "code_version_analysis": code_version(True), "git": git_state(), "machine": machine(),
            "load": load, "wall_s": round(wall_s, 1),
            "runs_elapsed_s": None if runs_elapsed_s is None else round(runs_elapsed_s, 1),
            "scale": scale, "provider": provider or "the topologies' own", "jobs": jobs,
            "figures": list(figures), "points_filter": points_filter or {},
            "date": date or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def claims_document(result: dict[str, Any]) -> dict[str, Any]:
    """``claims.json``: one paper's claims with its stamp, the one shape every reproduction writes
    (and ``--publish`` copies): ``{"schema", "paper", "title", "scale", "figures", "stamp",
    "summary", "claims"}``."""
    from testbed.experiments.claims import summary

    claims = result.get("claims") or []
    return {"schema": CLAIMS_SCHEMA, "paper": result.get("paper"), "title": result.get("title"),
            "scale": result.get("scale"), "figures": result.get("figures") or [],
            "stamp": result.get("stamp"), "summary": summary(claims), "claims": claims}


def stamp_line(s: dict[str, Any] | None) -> str:
    """The stamp in one line of text (REPORT.md's head, `testbed compare`'s)."""
    if not s:
        return "no stamp (written before stamps were recorded)"
    m = s.get("machine") or {}
    g = s.get("git") or {}
    load = s.get("load") or {}
    commit = (g.get("commit") or "")[:12]
    if commit and g.get("dirty"):
        commit += " (uncommitted changes)"
    lr = (f"1-min load during {load['runs']} runs max {load['load_1m_max']:.2f}, mean {load['load_1m_mean']:.2f}"
          if load.get("runs") and load.get("load_1m_max") is not None else "no run recorded its load")
    ends = load.get("at_start"), load.get("at_end")
    if all(ends):
        lr += f"; at start/end {ends[0][0]:.2f}/{ends[1][0]:.2f}"
    mem = f"{m['memory_gib']:g} GiB" if m.get("memory_gib") is not None else "? GiB"
    wall = f"{s['wall_s']:.0f} s" if isinstance(s.get("wall_s"), (int, float)) else "-"
    if isinstance(s.get("runs_elapsed_s"), (int, float)):
        wall += f" (runs used: {s['runs_elapsed_s']:.0f} s summed)"
    return (f"scale {s.get('scale')}, {s.get('date')}, code {s.get('code_version')}, "
            f"commit {commit or 'none (not a git checkout)'}, wall {wall}; {lr}; "
            f"machine: {m.get('cores')} cores, {mem}, {m.get('cpu')}, {m.get('os')}, Python {m.get('python')}, "
            f"Java {m.get('java') or '-'}, Spark {m.get('spark') or '-'}; provider {s.get('provider')}")


__all__ = ["CLAIMS_SCHEMA", "claims_document", "git_state", "java_version", "load_now", "machine", "stamp",
           "stamp_line"]
