"""The ``--json`` outputs of the CLI: one JSON document on stdout, shapes documented in docs/cli.md.

Everything here is strict JSON (``json.loads`` in any language, ``jq``): infinite
floats (e.g. a parameter ``dct: inf``) become the strings ``"inf"`` / ``"-inf"``
and NaN becomes ``null``. Progress lines keep going to stderr, so
``testbed run x.yaml --json | jq .`` works.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1  # bumped when a documented field changes meaning or disappears


def strict(v: Any) -> Any:
    """A copy of ``v`` that ``json.dumps(allow_nan=False)`` accepts (see the module docstring)."""
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(v, dict):
        return {str(k): strict(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [strict(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return str(v)


def dumps(doc: Any) -> str:
    return json.dumps(strict(doc), indent=1, allow_nan=False)


def validate_doc(path: str, plans: list) -> dict[str, Any]:
    """``testbed validate --json``: every resolved plan of the file (one per sweep point x repeat)."""
    return {"schema": SCHEMA_VERSION, "command": "validate", "file": str(path), "runs": len(plans),
            "plans": [p.to_dict() for p in plans]}


def up_doc(run, status: dict[str, Any]) -> dict[str, Any]:
    """``testbed up --json``: the run id and directory, and its status right after bring-up."""
    return {"schema": SCHEMA_VERSION, "command": "up", "run_id": run.run_id, "run_dir": str(run.path),
            "status": status}


def run_entry(rd, checks: list[dict[str, Any]]) -> dict[str, Any]:
    a = rd.analysis_dir
    report_md, report_html = a / "report.md", a / "report.html"
    return {
        "run_id": rd.run_id,
        "run_dir": str(rd.path),
        "status": rd.manifest.get("status"),
        "point": rd.manifest.get("point") or {},
        "repeat_index": rd.manifest.get("repeat_index", 0),
        "report": str(report_md) if report_md.exists() else None,
        "report_html": str(report_html) if report_html.exists() else None,
        "figures": [str(f) for f in sorted((a / "figures").glob("*.png"))] if a.exists() else [],
        "checks": [{"name": c.get("name"), "passed": bool(c.get("passed")), "violations": c.get("violations", 0),
                    "attributed": c.get("attributed", 0)} for c in checks],
        "ok": all(c.get("passed") for c in checks) if checks else None,
    }


def run_doc(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """``testbed run --json``: one entry per run (a sweep has several); ``ok`` is false if any check failed."""
    return {"schema": SCHEMA_VERSION, "command": "run", "ok": all(e["ok"] is not False for e in entries),
            "runs": entries}


def reproduce_doc(report_md: Path, papers: list[str]) -> dict[str, Any]:
    """``testbed reproduce --json``: per paper reproduced, its claims with their verdicts, the history
    checks, run counts and timings (read back from ``<out>/<paper>/result.json``); ``ok`` is false
    when any claim failed."""
    import json

    from testbed.experiments.claims import add_summaries, summary

    out = Path(report_md).parent
    docs = []
    for name in papers:
        f = out / name / "result.json"
        if not f.exists():
            continue
        r = json.loads(f.read_text())
        verdicts: dict[str, int] = {}
        for c in r.get("claims", []):
            verdicts[c["verdict"]] = verdicts.get(c["verdict"], 0) + 1
        docs.append({"paper": r.get("paper", name), "title": r.get("title"), "scale": r.get("scale"),
                     "figures": r.get("figures"), "stamp": r.get("stamp"), "timings": r.get("timings"),
                     "stats": r.get("stats"),
                     "summary": summary(r.get("claims", [])),
                     "verdicts": verdicts, "claims": r.get("claims", []), "checks": r.get("checks"),
                     "result": str(f)})
    timing = out / "timing.json"  # the whole reproduction's wall time and each paper's
    return {"schema": SCHEMA_VERSION, "command": "reproduce", "report": str(report_md),
            "page": str(Path(report_md).parent / "index.html"),
            "timing": json.loads(timing.read_text()) if timing.exists() else None,
            "summary": add_summaries(d["summary"] for d in docs),
            "ok": not any(d["verdicts"].get("fail", 0) for d in docs), "papers": docs}


def compare_doc(comparison) -> dict[str, Any]:
    """``testbed compare --json`` (and ``reproduce --compare``'s ``compare``): every claim of either
    side with its verdict and interval in A and B, its status, and the counts."""
    from testbed.experiments.compare import document

    return {"schema": SCHEMA_VERSION, **document(comparison)}


__all__ = ["strict", "compare_doc", "dumps", "validate_doc", "up_doc", "run_entry", "run_doc", "reproduce_doc",
           "SCHEMA_VERSION"]
