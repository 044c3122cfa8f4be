"""Where a paper's topology templates are found (no reaching out of the package by ``parents[3]``).

Search path, first hit wins, for ``<paper>/<file>``:

1. ``<dir>/<paper>/<file>`` for every directory in ``$TESTBED_TOPOLOGIES``
   (``os.pathsep``-separated): your own copies;
2. the protocol's own ``topologies/`` folder (``testbed/protocols/<paper>/topologies/`` for a
   built-in, ``<package>/topologies/`` for an external protocol): package data, so an installed
   wheel has every paper's files;
3. the source checkout's ``topologies/<paper>/`` (beside the ``testbed`` package).

In a checkout, ``topologies/<paper>`` is a link to the protocol's folder, so users run, copy and
edit the files there (``testbed run topologies/<paper>/smoke.yaml``); the reproduction reads
the same files.
"""

from __future__ import annotations

import os
from pathlib import Path

from testbed.errors import UsageError

ENV = "TESTBED_TOPOLOGIES"


def search_path(paper_dir: str) -> list[Path]:
    """The directories that may hold ``paper_dir``'s files, first hit wins."""
    out = [Path(p) / paper_dir for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    own = _protocol_topologies(paper_dir)
    if own is not None:
        out.append(own)
    out.append(Path(__file__).resolve().parents[2] / "topologies" / paper_dir)
    return out


def _protocol_topologies(paper_dir: str) -> Path | None:
    """The ``topologies/`` folder of the protocol named ``paper_dir`` (None: no such protocol)."""
    from testbed import registry

    try:
        p = registry.registry().find(paper_dir)
    except registry.ProtocolError:
        return None
    return p.topologies_dir() if p is not None else None


def find(paper_dir: str, name: str) -> Path:
    """The template ``name`` of the paper directory ``paper_dir`` (an absolute directory is used as is)."""
    if os.path.isabs(paper_dir):
        p = Path(paper_dir) / name
        if p.is_file():
            return p
        raise UsageError(f"topology {name!r} not found in {paper_dir}")
    tried = []
    for d in search_path(paper_dir):
        p = d / name
        tried.append(str(p))
        if p.is_file():
            return p
    raise UsageError(f"topology {paper_dir}/{name} not found; looked in {', '.join(tried)} "
                     f"(set {ENV} to a directory holding {paper_dir}/)")
