"""Schema errors in the user's words: every pydantic error back to its YAML node and one line.

``problems_from_validation`` walks each error's location back to the key of the file it came
from (skipping union/validator tags), and words it (``unknown key 'dealy' (did you mean
'delay'?)``, ``must be at least 0; got -1``, ...).
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from testbed.errors import Problem
from testbed.topology import schema as S
from testbed.topology.positions import Key, dotted, exists, locate
from testbed.topology.protocols import PROTOCOLS


def _all_field_names() -> set[str]:
    names: set[str] = set()
    seen: set[type] = set()

    def walk(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.add(model)
        for fname, f in model.model_fields.items():
            names.add(f.alias or fname)
            for t in _model_types(f.annotation):
                walk(t)

    for m in (S.Topology,):
        walk(m)
    for proto in PROTOCOLS:
        mod = PROTOCOLS[proto]
        for attr in ("Params", "Placement", "ClientParams"):
            obj = getattr(mod, attr, None)
            for t in (obj.values() if isinstance(obj, dict) else [obj]):
                if isinstance(t, type) and issubclass(t, BaseModel):
                    walk(t)
    return names


def _model_types(annotation: Any) -> list[type[BaseModel]]:
    import typing

    out = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        out.append(annotation)
    for arg in typing.get_args(annotation):
        out += _model_types(arg)
    return out


_KNOWN_KEYS: set[str] | None = None

_TYPE_MESSAGES = {
    "string_type": "expected text",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "dict_type": "expected a mapping (key: value, ...)",
    "model_type": "expected a mapping (key: value, ...)",
    "model_attributes_type": "expected a mapping (key: value, ...)",
    "list_type": "expected a list",
}


def _message(err: dict[str, Any], keys: tuple[Key, ...]) -> str:
    t = err["type"]
    ctx = err.get("ctx") or {}
    if t == "missing":
        return "required key is missing"
    if t == "extra_forbidden":
        global _KNOWN_KEYS
        if _KNOWN_KEYS is None:
            _KNOWN_KEYS = _all_field_names()
        name = str(keys[-1]) if keys else ""
        if name in _KNOWN_KEYS:
            return f"unknown key '{name}' here (it belongs to another section or protocol)"
        close = difflib.get_close_matches(name, sorted(_KNOWN_KEYS), n=1, cutoff=0.75)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"unknown key '{name}'{hint}"
    if t == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", "")
        expected = expected.replace(" or ", ", ")
        return f"must be one of: {expected}; got {err.get('input')!r}"
    if t == "value_error":
        return str(ctx.get("error", err["msg"])).removeprefix("Value error, ")
    if t in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        words = {"greater_than_equal": "at least", "greater_than": "more than",
                 "less_than_equal": "at most", "less_than": "less than"}[t]
        bound = next(iter(ctx.values()))
        return f"must be {words} {bound}; got {err.get('input')!r}"
    if t == "too_short":
        n = ctx.get("min_length")
        return f"needs at least {n} {'entry' if n == 1 else 'entries'}"
    if t == "too_long":
        n = ctx.get("max_length")
        return f"takes at most {n} {'entry' if n == 1 else 'entries'}"
    if t in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[t]}; got {_show(err.get('input'))}"
    return err["msg"]


def _show(v: Any) -> str:
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    if v is None:
        return "nothing (null)"
    return repr(v)


def problems_from_validation(exc: ValidationError, data: Any, path: str,
                             prefix: tuple[Key, ...] = ()) -> list[Problem]:
    """Walk every pydantic error back to its YAML node."""
    out: list[Problem] = []
    seen: set[tuple[Key, ...]] = set()
    for err in exc.errors():
        raw = prefix + tuple(err["loc"])
        keys: list[Key] = []
        is_key = False
        for k in raw:
            if k == "[key]":
                is_key = True
                continue
            if exists(data, keys + [k]):
                keys.append(k)
            elif err["type"] in ("missing", "extra_forbidden") and k == raw[-1]:
                keys.append(k)
            # else: a union/validator tag such as 'function-after[...]': not a key of the file
        kt = tuple(keys)
        if kt in seen:
            continue  # one message per location (unions report each branch)
        seen.add(kt)
        if err["type"] == "missing":
            line, col = locate(data, kt[:-1])
        else:
            line, col = locate(data, kt, key_pos=is_key or err["type"] == "extra_forbidden")
        out.append(Problem(path, line, col, dotted(kt), _message(err, kt)))
    return out
