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

The machine and the checkout are read by :mod:`testbed.runs.provenance` (also what every run's
manifest records); nothing from a topology reaches a shell.
"""

from __future__ import annotations

import time
from typing import Any

from testbed.runs.provenance import git_state, java_version, load_now, machine

CLAIMS_SCHEMA = 1  # claims.json: bumped when a field changes meaning or disappears


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
