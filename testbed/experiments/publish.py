"""``testbed reproduce <paper> --publish DIR``: the small set of a reproduction, to ship as a reference.

``DIR/<paper>/`` gets the paper's ``REPORT.md`` (its page, stamp at the head, figures linked
relative to it; the runs are named but not shipped), ``claims.json`` (the stamped claims
document, as the reproduction wrote it) and ``figures/*.png`` (every figure the report shows).
Nothing else: no runs, no index, no data. ``docs/results/`` is such a directory
(docs/results/README.md); ``testbed compare docs/results/<paper> <a reproduction>`` reads it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from testbed.errors import UsageError


def publish(out_dir: str | Path, paper: str, dest: str | Path) -> Path:
    """Write ``dest/<paper>/`` from ``out_dir/<paper>/`` (a finished reproduction); returns it."""
    from testbed.experiments import report

    src = Path(out_dir) / paper
    try:
        result: dict[str, Any] = json.loads((src / "result.json").read_text())
        claims_doc = json.loads((src / "claims.json").read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{src}: no finished reproduction of {paper} to publish ({e})") from None
    if not isinstance(claims_doc, dict) or "stamp" not in claims_doc:
        raise UsageError(f"{src / 'claims.json'}: written before stamps: reproduce {paper} again to publish it")
    to = Path(dest) / paper
    figs = to / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    for old in figs.glob("*.png"):  # a reference is one reproduction: no figure of an older one stays
        old.unlink()
    images = [x for f in result.get("figure_info") or [] for x in [f.get("image"), *(f.get("more_images") or [])] if x]
    for rel in images:
        shutil.copy2(src / rel, to / rel)
    (to / "claims.json").write_text(json.dumps(claims_doc, indent=1))
    (to / "REPORT.md").write_text(report.paper_markdown(result, link_prefix="", runs=False))
    return to


__all__ = ["publish"]
