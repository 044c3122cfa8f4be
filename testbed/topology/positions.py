"""YAML with positions: parse a rendered topology keeping every node's line and column.

``locate`` maps a key path (``("nodes", "b1", "neighbors", 0)``) back to its 1-based
line and column; ``dotted`` spells a key path the way error messages show it
(``nodes.b1.neighbors[0]``). Duplicate keys are reported, all of them, with positions.
"""

from __future__ import annotations

from typing import Any, Iterable

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.nodes import MappingNode, SequenceNode

from testbed.errors import Problem, TopologyError

Key = str | int


def parse_yaml(text: str, path: str) -> tuple[CommentedMap, list[Problem]]:
    """Parse with positions kept. Syntax errors raise; duplicate keys are returned as problems."""
    try:
        yaml = YAML(typ="rt")
        yaml.allow_duplicate_keys = True  # reported below, all of them, with their positions
        root_node = yaml.compose(text)
        data = yaml.constructor.construct_document(root_node) if root_node is not None else None
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        what = e.problem or e.context or "invalid YAML"
        if e.context and e.problem:
            what = f"{e.context}: {e.problem}"
        raise TopologyError.single(path, line, col, "", f"YAML syntax error: {what}") from None
    if data is None:
        raise TopologyError.single(path, 1, 1, "", "the file is empty")
    if not isinstance(data, CommentedMap):
        raise TopologyError.single(path, 1, 1, "", "the file must be a mapping of keys (version, name, ...)")
    return data, _duplicate_keys(root_node, path)


def _duplicate_keys(node: Any, path: str, keys: tuple[Key, ...] = ()) -> list[Problem]:
    problems: list[Problem] = []
    if isinstance(node, MappingNode):
        seen: set[Any] = set()
        for k, v in node.value:
            kv = getattr(k, "value", None)
            if kv in seen:
                problems.append(Problem(path, k.start_mark.line + 1, k.start_mark.column + 1,
                                        dotted(keys + (kv,)), f"duplicate key '{kv}'"))
            seen.add(kv)
            problems += _duplicate_keys(v, path, keys + (kv,))
    elif isinstance(node, SequenceNode):
        for i, v in enumerate(node.value):
            problems += _duplicate_keys(v, path, keys + (i,))
    return problems


def dotted(keys: Iterable[Key]) -> str:
    out = ""
    for k in keys:
        if isinstance(k, int):
            out += f"[{k}]"
        else:
            out += ("." if out else "") + str(k)
    return out


def locate(data: Any, keys: Iterable[Key], *, key_pos: bool = False) -> tuple[int, int]:
    """1-based (line, col) of the value at ``keys``; of the key itself if ``key_pos``.

    Stops at the deepest node that exists (a missing key is reported at its parent).
    """
    line, col = 1, 1
    node = data
    keys = list(keys)
    for i, k in enumerate(keys):
        last = i == len(keys) - 1
        if isinstance(node, CommentedMap) and k in node:
            kl, kc, vl, vc = node.lc.data[k]
            line, col = (kl + 1, kc + 1) if (last and key_pos) else (vl + 1, vc + 1)
            node = node[k]
        elif isinstance(node, CommentedSeq) and isinstance(k, int) and 0 <= k < len(node):
            vl, vc = node.lc.data[k]
            line, col = vl + 1, vc + 1
            node = node[k]
        else:
            break
    return line, col


def exists(data: Any, keys: Iterable[Key]) -> bool:
    node = data
    for k in keys:
        if isinstance(node, dict) and k in node:
            node = node[k]
        elif isinstance(node, list) and isinstance(k, int) and 0 <= k < len(node):
            node = node[k]
        else:
            return False
    return True


def is_seq(data: Any, keys: tuple[Key, ...]) -> bool:
    node = data
    for k in keys:
        try:
            node = node[k]
        except (KeyError, IndexError, TypeError):
            return False
    return isinstance(node, list)
