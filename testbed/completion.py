"""Shell completion for ``testbed``, driven by the CLI's own argparse parser.

``testbed completion bash|zsh`` prints a small script that defines
``_testbed_complete``; on TAB it calls ``testbed __complete CWORD WORD...``
(this module), which walks the parser to find what is being completed:

- commands and sub-commands, options, ``choices`` (providers, protocols, ...)
- topology files (``*.yaml``, ``*.yml``, ``*.j2``, and directories to descend into)
- run ids (``down``, ``status``, ``--run``; from ``--runs-dir`` / ``$TESTBED_RUNS`` / ./runs)
- node names of the run (``logs b<TAB>``: the ``--run`` given, else the latest active run)
- run directories for ``analyze``, output files for ``graph -o``

zsh uses the same function through ``bashcompinit``. Nothing here starts
anything or reads more than directory listings and one ``plan.json``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

TOPOLOGY_SUFFIXES = (".yaml", ".yml", ".j2")
GRAPH_SUFFIXES = (".png", ".svg", ".pdf", ".dot")

BASH = r'''# testbed completion for bash. Load it with:  source <(testbed completion bash)
# or save it:  testbed completion bash > ~/.local/share/bash-completion/completions/testbed
_testbed_complete() {
    local IFS=$'\n' cands
    cands=$("${COMP_WORDS[0]}" __complete "$COMP_CWORD" "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return 0
    COMPREPLY=($cands)
    if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == */ ]]; then
        compopt -o nospace 2>/dev/null
    fi
}
complete -F _testbed_complete testbed
'''

ZSH = r'''# testbed completion for zsh. Load it with:  source <(testbed completion zsh)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
''' + BASH.split("\n", 2)[2]


def script(shell: str) -> str:
    if shell == "bash":
        return BASH
    if shell == "zsh":
        return ZSH
    raise ValueError(shell)


# -- what to offer -------------------------------------------------------------------
def _paths(prefix: str, suffixes: tuple[str, ...] | None, dirs_only: bool = False) -> list[str]:
    """Entries of the directory ``prefix`` points into, whose names start with its last part."""
    expanded = os.path.expanduser(prefix)
    d, part = os.path.split(expanded)
    shown_dir = os.path.split(prefix)[0]
    try:
        entries = sorted(os.scandir(d or "."), key=lambda e: e.name)
    except OSError:
        return []
    out = []
    for e in entries:
        if not e.name.startswith(part) or (e.name.startswith(".") and not part.startswith(".")):
            continue
        shown = os.path.join(shown_dir, e.name) if shown_dir else e.name
        try:
            is_dir = e.is_dir()
        except OSError:
            continue
        if is_dir:
            out.append(shown + "/")
        elif not dirs_only and (suffixes is None or e.name.endswith(suffixes)):
            out.append(shown)
    return out


def _runs_root(opts: dict[str, str]) -> Path:
    from testbed.runs.rundir import runs_root

    return runs_root(opts.get("--runs-dir"))


def run_ids(opts: dict[str, str]) -> list[str]:
    """Every run under the runs root (a sweep's runs as ``sweep-dir/run-id``)."""
    root = _runs_root(opts)
    out: list[str] = []
    try:
        for d in sorted(root.iterdir()):
            if (d / "plan.json").exists():
                out.append(d.name)
            elif d.is_dir():
                out += [f"{d.name}/{r.name}" for r in sorted(d.iterdir()) if (r / "plan.json").exists()]
    except OSError:
        pass
    return out


def node_names(opts: dict[str, str]) -> list[str]:
    """The processes of ``--run`` (else the latest active run), from its plan.json."""
    from testbed.errors import TestbedError
    from testbed.runs.rundir import find_run

    try:
        rd = find_run(opts.get("--run"), opts.get("--runs-dir"))
        return list(json.loads((rd.path / "plan.json").read_text()).get("nodes", {}))
    except (TestbedError, OSError, ValueError):
        return []


def _positional_values(action: argparse.Action, prefix: str, opts: dict[str, str]) -> list[str]:
    if action.choices:
        return [str(c) for c in action.choices]
    dest = action.dest
    if dest == "file":
        return _paths(prefix, TOPOLOGY_SUFFIXES)
    if dest == "run":
        return run_ids(opts)
    if dest == "node":
        return node_names(opts)
    if dest == "run_dir":
        root = _runs_root(opts)
        rel = os.path.relpath(root)
        shown = [] if prefix else [f"{rel}/"]
        return shown + _paths(prefix, None, dirs_only=True)
    return []


def _option_values(action: argparse.Action, prefix: str, opts: dict[str, str]) -> list[str]:
    if action.choices:
        return [str(c) for c in action.choices]
    dest = action.dest
    if dest == "run":
        return run_ids(opts)
    if dest == "runs_dir":
        return _paths(prefix, None, dirs_only=True)
    if dest == "output":
        return _paths(prefix, GRAPH_SUFFIXES)
    if dest in ("out",):
        return _paths(prefix, None, dirs_only=True)
    return []


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return {k: v for k, v in a.choices.items() if not k.startswith("__")}
    return {}


def _options(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in p._actions for s in a.option_strings}


def complete(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """Candidates for the last word of ``words`` (the words after ``testbed``, the last being
    completed, possibly empty), filtered by its prefix."""
    if not words:
        words = [""]
    *done, cur = words
    p = parser
    opts: dict[str, str] = {}  # option values given so far, e.g. --run, --runs-dir
    positionals: list[str] = []
    pending: argparse.Action | None = None  # the option whose value comes next
    for w in done:
        if pending is not None:
            for s in pending.option_strings:
                opts[s] = w
            pending = None
            continue
        if w.startswith("-") and w != "-":
            name, eq, val = w.partition("=")
            a = _options(p).get(name)
            if a is not None and a.nargs != 0 and not eq:
                pending = a
            elif a is not None and eq:
                opts[name] = val
            continue
        subs = _subparsers(p)
        if subs and not positionals and w in subs:
            p = subs[w]
            continue
        positionals.append(w)

    if pending is not None:  # completing an option's value
        cands = _option_values(pending, cur, opts)
    elif cur.startswith("-"):
        cands = [s for s in _options(p) if s.startswith("--") or not cur.startswith("--")]
    else:
        subs = _subparsers(p)
        if subs and not positionals:
            cands = list(subs)
        else:
            pos = [a for a in p._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
            i = len(positionals)
            cands = _positional_values(pos[i], cur, opts) if i < len(pos) else []
    return sorted(dict.fromkeys(c for c in cands if c.startswith(cur)))


def main_complete(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    """``testbed __complete CWORD WORD...``: one candidate per line on stdout."""
    try:
        cword = int(argv[0])
    except (IndexError, ValueError):
        return 2
    words = list(argv[1:])[:max(cword, 1)]
    while len(words) < cword:
        words.append("")
    for c in complete(parser, words):
        print(c)
    return 0


__all__ = ["script", "complete", "main_complete", "run_ids", "node_names"]
