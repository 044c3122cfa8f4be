"""Where a paper's topology templates are found (no reaching out of the package by ``parents[3]``).

Search path, first hit wins, for ``<dir>/<paper>/<file>``:

1. every directory in ``$TESTBED_TOPOLOGIES`` (``os.pathsep``-separated): your own copies;
2. ``<sys.prefix>/share/testbed/topologies``: where an installed wheel puts the repository's
   ``topologies/`` (``[tool.setuptools.data-files]`` in pyproject.toml);
3. the source checkout's ``topologies/`` (beside the ``testbed`` package: a development install).

The templates stay in the repository's ``topologies/<paper>/`` so that users run, copy and edit
them there (``testbed run topologies/ordering/smoke.yaml``); the reproduction reads the same files.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from testbed.errors import UsageError

ENV = "TESTBED_TOPOLOGIES"


def search_path() -> list[Path]:
    out = [Path(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    out.append(Path(sys.prefix) / "share" / "testbed" / "topologies")
    out.append(Path(__file__).resolve().parents[2] / "topologies")
    return out


def find(paper_dir: str, name: str) -> Path:
    """The template ``name`` of the paper directory ``paper_dir`` (an absolute directory is used as is)."""
    if os.path.isabs(paper_dir):
        p = Path(paper_dir) / name
        if p.is_file():
            return p
        raise UsageError(f"topology {name!r} not found in {paper_dir}")
    tried = []
    for d in search_path():
        p = d / paper_dir / name
        tried.append(str(p))
        if p.is_file():
            return p
    raise UsageError(f"topology {paper_dir}/{name} not found; looked in {', '.join(tried)} "
                     f"(set {ENV} to a directory holding {paper_dir}/)")
