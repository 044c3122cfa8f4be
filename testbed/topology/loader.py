"""Load a topology file: Jinja2 render -> YAML (positions kept) -> validated Topology.

Every problem of a file is collected and raised at once as one
:class:`~testbed.errors.TopologyError` whose lines read
``path:line:col: dotted.key: message``. Schema errors (pydantic) and
cross-reference errors (unknown names, duplicates, cycles, impossible fault
schedules) are reported together; a cross-reference check only looks at the
parts of the file that passed the schema, so one mistake is reported once.

The stages live in their own modules; this one strings them together:
:mod:`~testbed.topology.template` (Jinja2), :mod:`~testbed.topology.positions` (YAML with
line/column), :mod:`~testbed.topology.messages` (pydantic errors in the user's words),
:mod:`~testbed.topology.references` (cross-reference checks) and
:mod:`~testbed.topology.sweep` (the ``sweep:`` grid).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml.comments import CommentedMap

from testbed.errors import Problem, TopologyError
from testbed.topology import schema as S
from testbed.topology.messages import problems_from_validation
from testbed.topology.positions import dotted, locate, parse_yaml
from testbed.topology.protocols import PROTOCOLS, ActionError, client_params_model, schedule_actions
from testbed.topology.references import check_references
from testbed.topology.sweep import read_sweep, sweep_points
from testbed.topology.template import read_source, render_text
from testbed.topology.expand import expand
from testbed.topology.plan import Plan


def load(path: str | Path, set_vars: dict[str, Any] | None = None,
         point: dict[str, Any] | None = None) -> S.Topology:
    """Render, parse and validate one topology file for one sweep point."""
    path = Path(path)
    source = read_source(path)
    rendered = render_text(path, set_vars, point, text=source)
    topo = load_rendered(rendered, str(path))
    topo._source_text = source
    topo._point = dict(point or {})
    return topo


def load_rendered(rendered: str, path: str) -> S.Topology:
    """Parse and validate an already rendered topology text."""
    data, problems = parse_yaml(rendered, path)
    topo, more = validate(data, path)
    problems += more
    if problems:
        raise TopologyError(_dedupe(problems))
    assert topo is not None
    topo._rendered_text = rendered
    return topo


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def validate(data: CommentedMap, path: str) -> tuple[S.Topology | None, list[Problem]]:
    """Schema + protocol + cross-reference validation. Returns (topology or None, problems)."""
    problems: list[Problem] = []
    try:
        topo = S.Topology.model_validate(data)
        full = True
    except ValidationError as e:
        problems += problems_from_validation(e, data, path)
        topo = _partial(data)
        full = False
    topo._path = path
    topo._data = data

    proto_mod = None
    proto = getattr(topo, "protocol", None)
    if isinstance(proto, str):
        if proto in PROTOCOLS:
            proto_mod = PROTOCOLS[proto]
        else:
            line, col = locate(data, ("protocol",))
            problems.append(Problem(path, line, col, "protocol",
                                    f"unknown protocol '{proto}'; one of: {', '.join(PROTOCOLS)}"))

    if proto_mod is not None:
        problems += _protocol_models(topo, proto_mod, data, path)
        problems += _protocol_actions(topo, proto_mod, data, path)

    problems += check_references(topo, proto_mod)
    if proto_mod is not None and hasattr(proto_mod, "check"):
        if not problems:
            problems += proto_mod.check(topo)
        else:
            try:  # on a partial topology a protocol check may trip over what is missing
                problems += proto_mod.check(topo)
            except Exception:  # noqa: BLE001 - the file already has errors to show
                pass
    return (topo if full and not problems else None), problems


def _protocol_models(topo: S.Topology, mod: Any, data: Any, path: str) -> list[Problem]:
    problems: list[Problem] = []
    for key, attr, target in (("params", "Params", "_params"), ("placement", "Placement", "_placement")):
        raw = data.get(key, None) if isinstance(data, dict) else None
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            continue  # the schema already reported it
        try:
            setattr(topo, target, getattr(mod, attr).model_validate(dict(raw)))
        except ValidationError as e:
            problems += problems_from_validation(e, data, path, (key,))
    for name, group in (getattr(topo, "clients", None) or {}).items():
        if group is None:
            continue
        model = client_params_model(mod, group.role)
        if model is None:
            if group.params:
                line, col = locate(data, ("clients", name, "params"))
                problems.append(Problem(path, line, col, f"clients.{name}.params",
                                        f"{group.role} groups take no params"))
            continue
        try:
            topo._client_params[name] = model.model_validate(dict(group.params))
        except ValidationError as e:
            problems += problems_from_validation(e, data, path, ("clients", name, "params"))
    return problems


def _protocol_actions(topo: S.Topology, mod: Any, data: Any, path: str) -> list[Problem]:
    """``faults`` entries whose kind is a protocol's own (``SCHEDULE``): known to the protocol,
    their value valid (replaced by the validated value), ``for`` where the action takes it."""
    import difflib

    problems: list[Problem] = []
    actions = schedule_actions(mod)
    for i, f in enumerate(getattr(topo, "faults", None) or []):
        if f is None or not f.protocol_action:
            continue
        kind = f.kind
        keys = ("faults", i, kind)
        spec = actions.get(kind)
        if spec is None:
            known = list(S.FAULT_KINDS) + list(actions)
            close = difflib.get_close_matches(kind, known, n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            line, col = locate(data, keys, key_pos=True)
            problems.append(Problem(path, line, col, dotted(keys),
                                    f"unknown fault kind '{kind}'{hint}; protocol {topo.protocol} has: "
                                    f"{', '.join(known)}"))
            continue
        try:
            f.model_extra[kind] = spec.validate(f.model_extra[kind], f.for_)
            roles = {n: v.role for sec in ("clients", "nodes")
                     for n, v in (getattr(topo, sec, None) or {}).items() if v is not None}
            f._call = spec.call(f.value, f.for_, roles)
        except ActionError as e:
            line, col = locate(data, keys + tuple(e.key))
            problems.append(Problem(path, line, col, dotted(keys + tuple(e.key)), str(e)))
        except ValidationError as e:
            problems += problems_from_validation(e, data, path, keys)
        except ValueError as e:
            line, col = locate(data, ("faults", i))
            problems.append(Problem(path, line, col, dotted(("faults", i)), f"{kind}: {e}"))
    return problems


def _try(model: Any, value: Any) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


def _partial(data: CommentedMap) -> S.Topology:
    """The parts of an invalid file that do validate (for cross-reference checks)."""
    from pydantic import TypeAdapter

    fields: dict[str, Any] = {}
    sections = {"sites": S.Site, "hosts": S.Host, "nodes": S.Node, "clients": S.ClientGroup}
    for key, finfo in S.Topology.model_fields.items():
        if key not in data:
            continue
        raw = data[key]
        if key in sections:
            if isinstance(raw, dict):
                fields[key] = {k: v for k, v in ((k, _try(sections[key], v)) for k, v in raw.items())
                               if isinstance(k, str) and S.NAME_RE.fullmatch(k) and v is not None}
        elif key == "faults":
            if isinstance(raw, list):
                fields[key] = [_try(S.Fault, f) for f in raw]
        elif key == "links":
            links = _try(S.Links, raw)
            if links is None and isinstance(raw, dict):
                links = S.Links.model_construct(
                    default=_try(S.LinkParams, raw.get("default", {})) or S.LinkParams(),
                    rules=[_try(S.LinkSelector, r) for r in raw.get("rules", [])]
                    if isinstance(raw.get("rules", []), list) else [],
                    clients=_try(S.LinkParams, raw["clients"]) if "clients" in raw else None,
                )
            if links is not None:
                fields[key] = links
        else:
            try:
                fields[key] = TypeAdapter(finfo.annotation).validate_python(raw)
            except ValidationError:
                pass
    for key, finfo in S.Topology.model_fields.items():  # a required key missing or invalid: empty, so
        if key not in fields and finfo.is_required():    # the cross-reference checks see nothing there
            fields[key] = {} if key in sections else None
    return S.Topology.model_construct(**fields)


__all__ = ["plans", "render_text", "read_source", "parse_yaml", "load", "load_rendered", "validate", "locate",
           "dotted", "read_sweep", "sweep_points", "check_references", "problems_from_validation"]


def plans(path: str | Path, set_vars: dict[str, Any] | None = None,
          provider: str | None = None) -> list[Plan]:
    """Every Plan of a topology file: the sweep grid (file order) x ``repeat``.

    ``set_vars`` are the ``--set`` template variables; setting a sweep key pins it
    to that one value. ``provider`` overrides the file's ``provider``.
    Raises TopologyError (all problems of the file) for an invalid file.
    """
    path = Path(path)
    text = read_source(path)
    sweep, repeat = read_sweep(path, set_vars, text=text)
    out: list[Plan] = []
    for point in sweep_points(sweep, set_vars) or [{}]:
        rendered = render_text(path, set_vars, point, text=text)
        topo = load_rendered(rendered, str(path))
        topo._source_text = text
        topo._point = dict(point)
        for r in range(repeat):
            out.append(expand(topo, provider_override=provider, point=point, repeat_index=r))
    return out
