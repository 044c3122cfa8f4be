"""Read an ordering history from a run without Spark (quick looks, fast tests).

The run's events come from its stored Parquet (``analysis/parquet/<ev>/``, made from the logs by
``testbed.analysis.convert.ensure_parquet`` when missing or stale: pyarrow, no Spark, no second
JSON parse on the next call). The analysis pipeline goes through Spark
(``testbed.protocols.ordering.analysis.checks``). Times are wall seconds as logged (single host: no
clock-offset correction).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_KEEP = ("o_notify", "o_timestamp", "o_subscribed", "o_unsubscribe", "o_stuck")


def _rows(root: Path, ev: str) -> list[dict[str, Any]]:
    """The events of type ``ev`` from ``root/<ev>/``: the common fields plus the event's own (a ``json``
    field decoded, as in the log)."""
    import json

    import pyarrow.parquet as pq

    from testbed.nodes.runtime.events import all_events

    jsonf = [k for k, v in all_events()[ev].fields.items() if v == "json"]
    d = root / ev
    if not d.is_dir():
        return []
    tbl = pq.read_table(str(d), columns=["t", "node", f"e_{ev}"])
    out = []
    for r in tbl.to_pylist():
        own = r.pop(f"e_{ev}") or {}
        for k in jsonf:
            if isinstance(own.get(k), str):
                try:
                    own[k] = json.loads(own[k])
                except ValueError:
                    pass  # a JSON string value is stored as its content
        out.append({**r, **own})
    return out


def load_history(run_dir: str | Path) -> list[dict[str, Any]]:
    from testbed.analysis.convert import ensure_parquet

    ensure_parquet(run_dir)
    root = Path(run_dir) / "analysis" / "parquet"
    hist: list[dict[str, Any]] = []
    for ev in _KEEP:
        for e in _rows(root, ev):
            t = e["t"] / 1e9
            if ev == "o_notify":
                hist.append({"ev": ev, "client": e["client"], "eid": e["eid"], "topic": e["topic"],
                             "ts": e["ts"], "ooo": e["ooo"], "order": e["n"], "t": t,
                             "wait_ms": e.get("wait_ms")})
            elif ev == "o_timestamp":
                hist.append({"ev": "o_ens_publish", "client": e["client"], "eid": e["eid"],
                             "topic": e["topic"], "t": t, "t0": e["t0"] / 1e9, "sn": e.get("sn")})
            elif ev == "o_stuck":
                hist.append({"ev": ev, "t": t, **{k: e.get(k) for k in (
                    "client", "eid", "topic", "ts", "dummy", "age_ms", "final", "waits", "sub")}})
            else:
                hist.append({"ev": ev, "client": e["client"], "topic": e["topic"], "t": t,
                             "ts": e.get("ts")})
    return hist
