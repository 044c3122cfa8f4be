"""Tiny inline histories for check tests: rows of ingested events, by type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testbed.analysis.context import AnalysisContext, AnalysisOptions
from testbed.analysis.ingest import output_schema
from testbed.nodes.runtime.events import all_events

T0 = 1_700_000_000_000_000_000


def events_df(spark, ev: str, rows: list[dict[str, Any]]):
    """Rows given as {field: value, "s": t_rel_s} -> a DataFrame with the ingested schema of ``ev``."""
    schema = output_schema(all_events()[ev])
    out = []
    for i, r in enumerate(rows):
        r = dict(r)
        s = r.pop("s")
        if "attrs" in r and not isinstance(r["attrs"], str):
            r["attrs"] = json.dumps(r["attrs"])
        full = {"t": T0 + int(s * 1e9), "m": i, "node": r.pop("node", "n"), "ev": ev,
                "host": "h", "site": r.pop("site", "s1"), "t_rel_s": float(s)}
        full["t_corr"] = full["t"]
        full.update(r)
        out.append(tuple(full.get(f.name) for f in schema.fields))
    return spark.createDataFrame(out, schema)


def context(spark, events: dict[str, list[dict[str, Any]]], *, duration_s=30.0, timeline=None,
            params=None, options=None) -> AnalysisContext:
    plan = {"name": "t", "protocol": "pubsub", "provider": "local", "duration_s": duration_s,
            "params": params or {}, "actions": [], "nodes": {}}
    manifest = {"t0_wall_ns": T0, "timeline": timeline or []}
    dfs = {ev: events_df(spark, ev, rows) for ev, rows in events.items()}
    return AnalysisContext.build(spark, Path("/nonexistent"), plan, manifest, dfs, options or AnalysisOptions())


def sub(client, flt, s, sub_id=None):
    return {"client": client, "sub_id": sub_id or f"{client}/1", "filter": flt, "broker": "b1", "s": s}


def pub(publisher, seq, attrs, s):
    return {"client": publisher, "pub_id": f"{publisher}:{seq}", "seq": seq, "attrs": attrs, "size": 10,
            "broker": "b1", "s": s}


def dlv(client, publisher, seq, s, pub_s=None):
    return {"client": client, "pub_id": f"{publisher}:{seq}", "publisher": publisher, "seq": seq,
            "pub_t": T0 + int((pub_s if pub_s is not None else s - 0.01) * 1e9), "hops": 2, "s": s}
