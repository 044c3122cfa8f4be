"""The ``sweep:`` grid and ``repeat:`` count of a topology file, and the grid's points."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap

from testbed.errors import Problem, TopologyError
from testbed.topology.positions import locate, parse_yaml
from testbed.topology.template import read_source, render_text


def read_sweep(path: str | Path, set_vars: dict[str, Any] | None = None,
               text: str | None = None) -> tuple[dict[str, list[Any]], int]:
    """The ``sweep`` grid and ``repeat`` count of a file, before any sweep point is known.

    First renders the whole file with a lenient Undefined (sweep variables may be
    undefined at this point); if that fails, renders only the top-level ``sweep:``
    and ``repeat:`` blocks of the source. Values are checked here (a mapping of
    name -> non-empty list; repeat >= 1).
    """
    path = Path(path)
    if text is None:
        text = read_source(path)
    data = None
    try:
        rendered = render_text(path, set_vars, None, text=text, lenient=True)
        data, _ = parse_yaml(rendered, str(path))
    except TopologyError:
        data = None
    if data is None:
        fragment = _top_level_blocks(text, ("sweep", "repeat"))
        if not fragment.strip():
            return {}, 1
        rendered = render_text(path, set_vars, None, text=fragment)
        data, _ = parse_yaml(rendered, str(path)) if rendered.strip() else (CommentedMap(), [])
    sweep = data.get("sweep") or {}
    repeat = data.get("repeat", 1)
    problems: list[Problem] = []
    if not isinstance(sweep, dict):
        line, col = locate(data, ("sweep",))
        problems.append(Problem(str(path), line, col, "sweep", "expected a mapping of variable: [values]"))
        sweep = {}
    for k, v in sweep.items():
        if not isinstance(v, list) or not v:
            line, col = locate(data, ("sweep", k))
            problems.append(Problem(str(path), line, col, f"sweep.{k}", "expected a non-empty list of values"))
        elif not isinstance(k, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            line, col = locate(data, ("sweep", k), key_pos=True)
            problems.append(Problem(str(path), line, col, f"sweep.{k}",
                                    "a sweep key is a template variable name (letters, digits, _)"))
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        line, col = locate(data, ("repeat",))
        problems.append(Problem(str(path), line, col, "repeat", f"must be a whole number >= 1; got {repeat!r}"))
        repeat = 1
    if problems:
        raise TopologyError(problems)
    return {str(k): list(v) for k, v in sweep.items()}, repeat


def _top_level_blocks(text: str, keys: tuple[str, ...]) -> str:
    """The lines of the given top-level keys (and their indented bodies); other lines blank."""
    out: list[str] = []
    keep = False
    for raw in text.splitlines():
        if raw and not raw[0].isspace() and not raw.startswith("#"):
            keep = any(re.match(rf"{k}\s*:", raw) for k in keys)
        out.append(raw if keep else "")
    return "\n".join(out) + "\n"


def sweep_points(sweep: dict[str, list[Any]], set_vars: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The grid over the sweep keys in file order (a ``--set`` of a sweep key pins it)."""
    set_vars = set_vars or {}
    keys = list(sweep)
    values = [[set_vars[k]] if k in set_vars else sweep[k] for k in keys]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]
