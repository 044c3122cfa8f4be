"""Load a topology file: Jinja2 render -> YAML (positions kept) -> validated Topology.

Every problem of a file is collected and raised at once as one
:class:`~testbed.errors.TopologyError` whose lines read
``path:line:col: dotted.key: message``. Schema errors (pydantic) and
cross-reference errors (unknown names, duplicates, cycles, impossible fault
schedules) are reported together; a cross-reference check only looks at the
parts of the file that passed the schema, so one mistake is reported once.
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
import traceback
from pathlib import Path
from typing import Any, Iterable

import jinja2
from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.nodes import MappingNode, SequenceNode

from testbed.errors import Problem, TopologyError
from testbed.topology import schema as S
from testbed.topology.protocols import PROTOCOLS, client_params_model

Key = str | int

# --------------------------------------------------------------------------- Jinja2


class _LenientUndefined(jinja2.ChainableUndefined):
    """Renders as an empty string and survives arithmetic and iteration (first pass only)."""

    def __int__(self) -> int:  # n|int
        return 0

    def __index__(self) -> int:  # range(n)
        return 0

    def __float__(self) -> float:
        return 0.0

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = lambda self, *a: self  # type: ignore[assignment]
    __truediv__ = __floordiv__ = __mod__ = lambda self, *a: self  # type: ignore[assignment]


def _environment(path: Path, undefined: type[jinja2.Undefined]) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(path.parent)),
        undefined=undefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def _template_line(exc: BaseException, filename: str) -> int:
    """The template line the exception points at (Jinja rewrites tracebacks to template lines)."""
    line = 0
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    return line


def render_text(path: str | Path, set_vars: dict[str, Any] | None = None,
                point: dict[str, Any] | None = None, *, text: str | None = None,
                lenient: bool = False) -> str:
    """Render the topology template at ``path`` with the sweep ``point`` and ``--set`` vars.

    Undefined variables are errors (StrictUndefined) unless ``lenient``. Any
    Jinja2 error becomes a TopologyError located at the template line.
    """
    path = Path(path)
    display = str(path)
    if text is None:
        text = read_source(path)
    variables = dict(point or {})
    variables.update(set_vars or {})
    env = _environment(path, _LenientUndefined if lenient else jinja2.StrictUndefined)
    try:
        template = env.from_string(text)  # frames of this text are named "<template>"
        return template.render(**variables)
    except jinja2.TemplateSyntaxError as e:
        where = display if not e.filename or e.filename == "<template>" or Path(e.filename) == path else e.filename
        raise TopologyError.single(where, e.lineno or 0, 1, "", f"template syntax error: {e.message}") from None
    except jinja2.TemplateNotFound as e:
        raise TopologyError.single(display, _template_line(e, "<template>") or 0, 1, "",
                                   f"template include not found: {e.name}") from None
    except jinja2.UndefinedError as e:
        line = _template_line(e, "<template>")
        msg = str(e.message or e)
        col = 1
        m = re.search(r"'([^']+)' is undefined", msg)
        if m:
            src_lines = text.splitlines()
            if 0 < line <= len(src_lines):
                found = src_lines[line - 1].find(m.group(1))
                col = found + 1 if found >= 0 else 1
            msg = (f"template variable '{m.group(1)}' is undefined "
                   f"(define it with --set {m.group(1)}=... or in sweep)")
        raise TopologyError.single(display, line, col, "", msg) from None
    except jinja2.TemplateError as e:
        raise TopologyError.single(display, _template_line(e, "<template>"), 1, "",
                                   f"template error: {e}") from None
    except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
        raise TopologyError.single(display, _template_line(e, "<template>"), 1, "",
                                   f"template error: {e}") from None


def read_source(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError.single(str(path), 0, 0, "", "no such topology file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TopologyError.single(str(path), 0, 0, "", f"cannot read topology file: {e}") from None


# --------------------------------------------------------------------------- YAML


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


def _exists(data: Any, keys: Iterable[Key]) -> bool:
    node = data
    for k in keys:
        if isinstance(node, dict) and k in node:
            node = node[k]
        elif isinstance(node, list) and isinstance(k, int) and 0 <= k < len(node):
            node = node[k]
        else:
            return False
    return True


# --------------------------------------------------------------------------- pydantic -> Problem


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
            if _exists(data, keys + [k]):
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


# --------------------------------------------------------------------------- load


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
                               if isinstance(k, str) and S.NAME_RE.match(k) and v is not None}
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
    return S.Topology.model_construct(**fields)


# --------------------------------------------------------------------------- cross-references


def check_references(topo: S.Topology, proto_mod: Any) -> list[Problem]:
    """Names, roles, overlay shape and the fault schedule."""
    P: list[Problem] = []

    def problem(keys: tuple[Key, ...], message: str, key_pos: bool = False) -> None:
        line, col = locate(topo._data, keys, key_pos=key_pos)
        P.append(Problem(topo._path, line, col, dotted(keys), message))

    sites = topo.sites or {}
    hosts = topo.hosts or {}
    nodes = topo.nodes or {}
    clients = topo.clients or {}
    # Names declared in the file, valid entries or not: an entry with a schema error
    # is still a name that exists (its own error is reported by the schema).
    declared = _declared(topo._data)
    site_names = declared["sites"] | set(sites)
    host_names = declared["hosts"] | set(hosts)
    node_names = declared["nodes"] | set(nodes)
    client_names = declared["clients"] | set(clients)
    processes = node_names | client_names

    def suggest(name: str, pool: Iterable[str]) -> str:
        close = difflib.get_close_matches(name, sorted(pool), n=1, cutoff=0.6)
        return f" (did you mean '{close[0]}'?)" if close else ""

    # hosts
    for h, host in hosts.items():
        if host.site is not None and host.site not in site_names:
            problem(("hosts", h, "site"), f"unknown site '{host.site}'{suggest(host.site, site_names)}")

    # nodes
    node_roles = getattr(proto_mod, "NODE_ROLES", None)
    client_roles = getattr(proto_mod, "CLIENT_ROLES", None)
    for n, node in nodes.items():
        if node.site not in site_names:
            problem(("nodes", n, "site"), f"unknown site '{node.site}'{suggest(node.site, site_names)}")
        if node.host is not None and node.host not in host_names:
            problem(("nodes", n, "host"), f"unknown host '{node.host}'{suggest(node.host, host_names)}"
                    if host_names else f"unknown host '{node.host}' (the file has no hosts section)")
        if node_roles is not None and node.role not in node_roles:
            problem(("nodes", n, "role"), f"unknown role '{node.role}' for protocol {topo.protocol}; "
                                          f"one of: {', '.join(sorted(node_roles))}")
        for i, nb in enumerate(node.neighbors):
            if nb == n:
                problem(("nodes", n, "neighbors", i), "a node cannot be its own neighbor")
            elif nb in client_names and nb not in node_names:
                problem(("nodes", n, "neighbors", i), f"'{nb}' is a client group, not a node")
            elif nb not in node_names:
                problem(("nodes", n, "neighbors", i), f"unknown node '{nb}'{suggest(nb, node_names)}")
            elif nb in node.neighbors[:i]:
                problem(("nodes", n, "neighbors", i), f"'{nb}' is listed twice")

    # clients
    for c in sorted(client_names & node_names):
        problem(("clients", c), f"'{c}' is already the name of a node (nodes and client groups "
                                "share one namespace)", key_pos=True)
    for c, g in clients.items():
        if client_roles is not None and g.role not in client_roles:
            problem(("clients", c, "role"), f"unknown client role '{g.role}' for protocol {topo.protocol}; "
                                            f"one of: {', '.join(sorted(client_roles))}")
        attach = g.attach_list
        for i, a in enumerate(attach):
            keys = ("clients", c, "attach", i) if len(attach) > 1 or _is_seq(topo._data, ("clients", c, "attach")) \
                else ("clients", c, "attach")
            if a in client_names and a not in node_names:
                problem(keys, f"'{a}' is a client group; clients attach to nodes")
            elif a not in node_names:
                problem(keys, f"unknown node '{a}'{suggest(a, node_names)}")
            elif a in attach[:i]:
                problem(keys, f"'{a}' is listed twice")
        if g.site is not None and g.site not in site_names:
            problem(("clients", c, "site"), f"unknown site '{g.site}'{suggest(g.site, site_names)}")
        if g.host is not None and g.host not in host_names:
            problem(("clients", c, "host"), f"unknown host '{g.host}'")

    # links
    links = getattr(topo, "links", None)
    for i, rule in enumerate(links.rules if links else []):
        if rule is None:
            continue
        _check_selector(rule, ("links", "rules", i), site_names, processes, problem, suggest)

    # overlay shape
    acyclic = getattr(proto_mod, "ACYCLIC", None)
    if acyclic in ("forest", "cells"):
        _check_acyclic(nodes, acyclic, problem)

    # faults
    _check_faults(topo, site_names, processes, problem, suggest)
    return P


def _declared(data: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key in ("sites", "hosts", "nodes", "clients"):
        raw = data.get(key) if isinstance(data, dict) else None
        out[key] = {k for k in raw if isinstance(k, str)} if isinstance(raw, dict) else set()
    return out


def _is_seq(data: Any, keys: tuple[Key, ...]) -> bool:
    node = data
    for k in keys:
        try:
            node = node[k]
        except (KeyError, IndexError, TypeError):
            return False
    return isinstance(node, list)


def _check_selector(sel: S.LinkSelector, keys: tuple[Key, ...], sites, processes, problem, suggest) -> None:
    if sel.sites is not None:
        for j, s in enumerate(sel.sites):
            if s not in sites:
                problem(keys + ("sites", j), f"unknown site '{s}'{suggest(s, sites)}")
    if sel.nodes is not None:
        for j, n in enumerate(sel.nodes):
            if n not in processes:
                problem(keys + ("nodes", j), f"unknown node or client group '{n}'{suggest(n, processes)}")


def _check_acyclic(nodes: dict[str, S.Node], mode: str, problem) -> None:
    """Union-find over the neighbor edges in file order; the edge that closes a cycle is reported."""
    def vertex(n: str) -> str:
        cell = nodes[n].cell if mode == "cells" else None
        return f"cell {cell}" if cell else n

    parent: dict[str, str] = {}
    adj: dict[str, set[str]] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    seen_edges: set[frozenset[str]] = set()
    for n, node in nodes.items():
        for i, nb in enumerate(node.neighbors):
            if nb not in nodes or nb == n:
                continue
            a, b = vertex(n), vertex(nb)
            edge = frozenset((a, b))
            if a == b or edge in seen_edges:
                continue  # inside one cell, or the same (bundled) link listed again
            seen_edges.add(edge)
            ra, rb = find(a), find(b)
            if ra == rb:
                cycle = _path(adj, b, a) + [a]
                what = "cells" if mode == "cells" else "forest"
                need = ("the broker graph must be acyclic after collapsing each cell"
                        if what == "cells" else "the broker overlay must be a tree (no cycles)")
                problem(("nodes", n, "neighbors", i), f"'{nb}' closes a cycle {' - '.join(cycle)}: {need}")
                continue
            parent[ra] = rb
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)


def _path(adj: dict[str, set[str]], src: str, dst: str) -> list[str]:
    prev: dict[str, str | None] = {src: None}
    queue = [src]
    while queue:
        x = queue.pop(0)
        if x == dst:
            break
        for y in sorted(adj.get(x, ())):
            if y not in prev:
                prev[y] = x
                queue.append(y)
    out: list[str] = []
    x: str | None = dst
    while x is not None:
        out.append(x)
        x = prev.get(x)
    return out


def _check_faults(topo, sites, processes, problem, suggest) -> None:
    faults = getattr(topo, "faults", None) or []
    duration = getattr(topo, "duration", None)
    order = sorted((f.at, i) for i, f in enumerate(faults) if f is not None)
    crashed: dict[str, tuple[float, int]] = {}  # node -> (crash time, fault index)
    windows: dict[str, list[tuple[float, float, str, int]]] = {}  # node -> stall/pause windows
    end = duration if duration is not None else math.inf

    for at, i in order:
        f = faults[i]
        kind = f.kind
        base = ("faults", i)
        if duration is not None:
            if at >= duration:
                problem(base + ("at",), f"at {at:g}s is not before the end of the run (duration {duration:g}s)")
            elif f.for_ is not None and at + f.for_ > duration + 1e-9:
                problem(base + ("for",), f"the fault ends at {at + f.for_:g}s, after the end of the run "
                                         f"(duration {duration:g}s)")
        if kind in ("stall", "crash", "restart", "pause"):
            target = getattr(f, kind)
            if target not in processes:
                problem(base + (kind,), f"unknown node '{target}'{suggest(target, processes)}")
                continue
            if kind == "restart":
                if target not in crashed:
                    problem(base + (kind,), f"'{target}' is not crashed at {at:g}s (restart needs an earlier crash)")
                else:
                    del crashed[target]
                continue
            if target in crashed:
                problem(base + (kind,), f"'{target}' is crashed since {crashed[target][0]:g}s "
                                        f"(faults[{crashed[target][1]}]); restart it first")
                continue
            hit = next((j for j, (s, e, _, _) in enumerate(windows.get(target, [])) if s <= at < e), None)
            if hit is not None and kind != "crash":
                s, e, wkind, wi = windows[target][hit]
                problem(base + (kind,), f"'{target}' is {wkind}ed from {s:g}s to {e:g}s (faults[{wi}]); "
                                        f"a {kind} cannot start inside that window")
            else:
                if kind == "crash":
                    if hit is not None:  # the crash ends the stall/pause (what a stall held is lost)
                        s, e, wkind, wi = windows[target][hit]
                        windows[target][hit] = (s, at, wkind, wi)
                    crashed[target] = (at, i)
                else:
                    stop = at + f.for_ if f.for_ is not None else end
                    windows.setdefault(target, []).append((at, stop, "stall" if kind == "stall" else "paus", i))
        elif kind == "cut":
            for j, n in enumerate(f.cut):
                if n not in processes:
                    problem(base + ("cut", j), f"unknown node '{n}'{suggest(n, processes)}")
        elif kind == "partition":
            owner: dict[str, int] = {}
            for gi, group in enumerate(f.partition):
                for j, name in enumerate(group):
                    keys = base + ("partition", gi, j)
                    if name in sites and name in processes:
                        problem(keys, f"'{name}' is both a site and a node; partition by one of them "
                                      "only when names differ")
                        continue
                    if name in sites:
                        members = [p for p in processes if topo.site_of(p) == name] or [f"site:{name}"]
                    elif name in processes:
                        members = [name]
                    else:
                        problem(keys, f"unknown site or node '{name}'{suggest(name, set(sites) | processes)}")
                        continue
                    for m in members:
                        if m in owner and owner[m] != gi:
                            problem(keys, f"'{m}' is in two partition groups")
                            break
                        owner[m] = gi
        elif kind == "set_link":
            _check_selector(f.set_link, base + ("set_link",), sites, processes, problem, suggest)
            if not f.set_link.overrides():
                problem(base + ("set_link",), "set_link changes nothing: give at least one of "
                                              "delay, jitter, distribution, loss, rate, reorder")


# --------------------------------------------------------------------------- sweep


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


__all__ = ["render_text", "parse_yaml", "load", "load_rendered", "validate", "locate", "dotted",
           "read_sweep", "sweep_points", "check_references", "problems_from_validation"]
