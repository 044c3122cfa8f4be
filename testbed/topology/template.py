"""The Jinja2 pass of a topology file: ``--set`` variables and a sweep point in, YAML text out.

Undefined variables are errors (``StrictUndefined``) except in the lenient first pass that
reads the ``sweep:`` grid; every Jinja2 error becomes a :class:`~testbed.errors.TopologyError`
located at its template line.

Templates run in Jinja2's ``ImmutableSandboxedEnvironment``. A template may still: use its
variables (``--set``, the sweep point), Jinja2's expressions, filters, tests, loops, macros
and the globals ``range``, ``dict``, ``lipsum``, ``cycler``, ``joiner``, ``namespace``;
call the public methods of plain values that do not change them (``"a".upper()``,
``d.items()``); include or import files from the topology file's own directory and below
(``{% include "parts/x.yaml" %}``; ``..`` is refused). It may not: reach any attribute
starting with ``_`` (``cycler.__init__.__globals__`` ...), so not ``os``, ``open`` or any
module; change a list or dict in place (``l.append``); read files outside its directory.
A refused access is a one-line error at the template line ("refused by the template
sandbox"). A template can still be slow (``range(10**9)`` is capped at 100,000 items by the
sandbox, but nested loops are not): render untrusted topologies with a time limit.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox

from testbed.errors import TopologyError


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
    return jinja2.sandbox.ImmutableSandboxedEnvironment(
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
    except jinja2.sandbox.SecurityError as e:
        raise TopologyError.single(display, _template_line(e, "<template>"), 1, "",
                                   f"refused by the template sandbox: {e}") from None
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
