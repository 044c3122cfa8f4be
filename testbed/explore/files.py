"""Topology text in and out for explore: the base topology of a file, a case as YAML, validation.

The YAML written uses the format's own field names (it is the topology dict the generator
works on), so ``testbed run case.yaml`` reads it like any file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from testbed.errors import TopologyError, UsageError


def load_base(path: str | Path, set_vars: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """The rendered topology of a one-run file as a dict, and its rendered text.

    A sweep (or ``repeat``) with several runs is refused: pin the point with ``--set``.
    """
    from testbed.topology.loader import plans
    from testbed.topology.template import render_text

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{path}: no such file")
    ps = plans(p, set_vars or {})  # raises TopologyError with every problem of the file
    if len(ps) != 1:
        raise UsageError(f"{path}: has a sweep/repeat of {len(ps)} runs; explore takes one topology "
                         f"(fix the point with --set)")
    text = render_text(p, set_vars or {}, ps[0].point)
    data = parse(text)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a topology mapping")
    return data, text


def parse(text: str) -> Any:
    """YAML text -> plain dicts/lists, read as the loader reads it (YAML 1.2: ``off`` is a string)."""
    from ruamel.yaml import YAML

    return _plain(YAML(typ="safe", pure=True).load(text))


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def to_yaml(topology: dict[str, Any], header: str = "") -> str:
    """The topology as YAML (block style at the top, small mappings and lists in flow style)."""
    body = yaml.safe_dump(topology, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True)
    lines = [f"# {ln}".rstrip() for ln in header.strip().splitlines()] if header.strip() else []
    return "\n".join(lines) + ("\n" if lines else "") + body


def validate_text(text: str, where: str):
    """-> the Plan of a case's YAML text, or TopologyError (every problem, located in ``where``)."""
    from testbed.topology.expand import expand
    from testbed.topology.loader import load_rendered

    return expand(load_rendered(text, where))


def first_problem(e: TopologyError) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__
