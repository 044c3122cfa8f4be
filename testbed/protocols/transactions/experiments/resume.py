"""What a resumed reproduction puts back before it computes the wait grids' remaining entries.

``restore`` is the wait grids' ``Grid.restore``. It lives apart from ``wait.py`` on purpose: the
computed entries' index keys hash the module of their compute function (``wait.py``), so a change
there makes every wait search again; this one is not part of those keys.
"""

from __future__ import annotations

from typing import Any

from testbed.protocols.transactions.experiments.grids import config_name, point_of


def restore(plan, row: dict[str, Any], ctx) -> None:
    """An entry taken from the run index puts its configuration's search back in ``ctx.memo``
    (``wait.search``'s ``blwait_searches``), so a resumed reproduction starts the next
    configuration's search from the nearest wait found (``nearest_wait``) and reuses the search for
    the configuration's other samples, as one sitting does."""
    if "wait_ms" not in row or "probes" not in row:
        return
    pt = point_of(plan)
    key = (pt["scale"], config_name(pt["overlay"], pt["threads"], pt["instances"]), pt["transactions"], plan.provider)
    searches: dict[tuple, dict[str, Any]] = ctx.memo.setdefault("blwait_searches", {})
    searches.setdefault(key, {**{k: v for k, v in row.items() if k not in ("sample", "failed_attempts")},
                              "samples": {}})
