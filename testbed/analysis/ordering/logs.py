"""Read an ordering history straight from a run's JSON-lines logs (no Spark).

For quick looks and fast tests; the analysis pipeline goes through Spark
(``testbed.analysis.ordering.checks``). Times are wall seconds (single host:
no clock-offset correction).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_KEEP = {"o_notify", "o_timestamp", "o_subscribed", "o_unsubscribe", "o_stuck"}


def load_history(run_dir: str | Path) -> list[dict[str, Any]]:
    hist: list[dict[str, Any]] = []
    for path in sorted((Path(run_dir) / "logs").glob("*.jsonl")):
        with open(path) as f:
            for line in f:
                if '"ev":"o_' not in line:
                    continue
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                ev = e.get("ev")
                if ev not in _KEEP:
                    continue
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
