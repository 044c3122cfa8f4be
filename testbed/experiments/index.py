"""The resumable run index: one JSON file per paper and scale, keyed by a content hash.

The key of one run is the sha256 of everything that decides what the run does:

* the rendered topology of its point (after Jinja2, so a changed template or include changes it),
* the ``--set`` values (sorted JSON), the plan's seed and the repeat index (the nodes' seeds),
* the provider, and
* the code version: a sha256 of the package's source that runs experiments (every ``*.py`` of
  ``testbed/`` except ``analysis/``, ``experiments/``, ``cli.py`` and ``ui.py``, which only read
  or present results). A computed entry (no run, e.g. Fig 7's sizes) also covers ``analysis/`` and
  the module of its compute function.

So a changed topology, value, seed or code re-runs, and an unchanged one is reused. Writes are
atomic (temporary file + rename) after every finished entry, so an interrupted reproduction
keeps everything finished before the interruption.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from testbed import __version__

_PRESENTATION = ("analysis", "experiments")
_PRESENTATION_FILES = ("cli.py", "ui.py")


@lru_cache(maxsize=4)
def code_version(include_analysis: bool = False, root: str | None = None) -> str:
    base = Path(root) if root else Path(__file__).resolve().parents[1]
    h = hashlib.sha256(__version__.encode())
    for p in sorted(base.rglob("*.py")):
        rel = p.relative_to(base)
        top = rel.parts[0]
        if top == "protocols" and len(rel.parts) > 2:  # a protocol's parts: as the generic ones
            part = rel.parts[2]
            if part in ("experiments", "experiments.py") or (part == "analysis" and not include_analysis):
                continue
        if top == "experiments" or (top == "analysis" and not include_analysis):
            continue
        if len(rel.parts) == 1 and top in _PRESENTATION_FILES:
            continue
        h.update(str(rel).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def run_key(rendered: str, set_vars: dict[str, Any], seed: int, repeat: int, provider: str,
            code: str, kind: str = "run") -> str:
    doc = json.dumps({"rendered": rendered, "set": set_vars, "seed": seed, "repeat": repeat,
                      "provider": provider, "code": code, "kind": kind}, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode()).hexdigest()


def run_finished(run_dir: str | None, analyzed: bool = False) -> bool:
    """A collected run with logs (and, if ``analyzed``, its per-run analysis)."""
    if not run_dir:
        return False
    p = Path(run_dir)
    try:
        m = json.loads((p / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    if m.get("status") not in ("collected", "analyzed") or not any((p / "logs").glob("*.jsonl")):
        return False
    if analyzed:
        return (p / "analysis" / "checks.json").exists() and (p / "analysis" / "parquet").exists()
    return True


def _map_runs(obj: Any, fn) -> Any:
    """``obj`` with ``fn`` applied to every string under a key named ``run`` (at any depth: an
    entry's run directory, and the run directories a computed row names)."""
    if isinstance(obj, dict):
        return {k: (fn(v) if k == "run" and isinstance(v, str) else _map_runs(v, fn)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_runs(v, fn) for v in obj]
    return obj


class RunIndex:
    """key -> entry ({"grid", "point", "repeat", "run" | "row", "elapsed_s", ...}).

    Run directories are stored relative to the index's own directory (so a reproduction moved,
    archived or shipped with its runs beside it still reads), and given back absolute; an index
    written before holds absolute paths, which are read as they are.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()  # the runner's threads and a search's probes write it at once
        try:
            self.data: dict[str, dict[str, Any]] = json.loads(self.path.read_text())
        except FileNotFoundError:
            self.data = {}
        except ValueError as e:
            from testbed.errors import UsageError

            raise UsageError(f"{self.path}: not a run index ({e}); move it away to start afresh") from None

    def _abs(self, p: str) -> str:
        return p if os.path.isabs(p) else os.path.normpath(os.path.join(self.path.parent.resolve(), p))

    def _rel(self, p: str) -> str:
        return os.path.relpath(p, self.path.parent.resolve()) if os.path.isabs(p) else p

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            e = self.data.get(key)
        return _map_runs(e, self._abs) if e is not None else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        with self._lock:
            self._put(key, entry)

    def _put(self, key: str, entry: dict[str, Any]) -> None:
        self.data[key] = _map_runs(entry, self._rel)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self.data, f, indent=1, sort_keys=True, default=str)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
