"""A plain single-process Python pass of four pub/sub checks over a run's JSON-lines logs.

The yardstick of ``benchmarks/bench_analysis.py --plain`` (issue #33): the Spark analysis should
beat what one Python process does over the same logs. It is a *minimal* pass of the same four
checks, not the analysis: the same inputs and verdict shapes, coarser where the analysis is
careful (noted per check), and never used to judge a run.

* ``no_duplicates``: a client delivered the same publication more than once (each extra delivery
  is a violation);
* ``filter_match``: a delivery whose publication's attributes match none of the filters the
  client subscribed with;
* ``fifo``: per (client, publisher), the deliveries' sequence numbers in the client's log order
  are not increasing (the analysis orders by time; the logs are written in that order);
* ``completeness``: a client subscribed (subscribe before the publication, no unsubscribe yet)
  with a matching filter got no delivery of it; a miss whose publication (on the controller's
  clock: the publisher host's offset from the manifest removed) falls inside a fault's window
  plus ``margin_s`` is attributed, not a violation (the analysis attributes only faults on the
  miss's route: this pass excuses more).

Stdlib only; reads every line with :func:`json.loads`. Lines that are not JSON (a torn last line)
are skipped and counted.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.analysis.filters import holds, parse

CHECKS = ("no_duplicates", "filter_match", "fifo", "completeness")


@dataclass
class PlainResult:
    events: int = 0
    bad_lines: int = 0
    violations: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHECKS, 0))
    attributed: int = 0  # completeness misses inside a fault window

    def passed(self, check: str) -> bool:
        return self.violations[check] == 0


def run_checks(run_dir: str | Path, margin_s: float = 1.0) -> PlainResult:
    run = Path(run_dir)
    plan = json.loads((run / "plan.json").read_text())
    manifest = json.loads((run / "manifest.json").read_text())
    t0 = int(manifest["t0_wall_ns"])
    offsets = {h: int(v.get("offset_ns", 0)) for h, v in (manifest.get("clock_offsets") or {}).items()}
    host_of = {n: d.get("host") for n, d in plan["nodes"].items()}
    windows = sorted({tuple(e["window"]) for e in manifest.get("timeline", []) if e.get("window")})

    res = PlainResult()
    pubs: dict[str, tuple[float, dict[str, Any]]] = {}  # pub_id -> (seconds after t0, attrs)
    subs: dict[str, list[list[Any]]] = {}  # client -> [[t_sub, preds, t_unsub], ...]
    sub_by_id: dict[tuple[str, str], list[Any]] = {}
    delivered: dict[str, set[str]] = {}  # client -> pub ids
    last_seq: dict[tuple[str, str], int] = {}
    deliveries: list[tuple[str, str]] = []  # (client, pub_id), checked once every publication is read
    loads = json.loads
    for path in sorted((run / "logs").glob("*.jsonl")):
        node = path.stem
        off = offsets.get(host_of.get(node), 0)
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    e = loads(line)
                except ValueError:
                    res.bad_lines += 1
                    continue
                res.events += 1
                ev = e.get("ev")
                if ev == "deliver":
                    c, pid = e["client"], e["pub_id"]
                    got = delivered.setdefault(c, set())
                    if pid in got:
                        res.violations["no_duplicates"] += 1
                    got.add(pid)
                    key = (c, e["publisher"])
                    seq = e["seq"]
                    if seq <= last_seq.get(key, -math.inf):
                        res.violations["fifo"] += 1
                    last_seq[key] = seq
                    deliveries.append((c, pid))
                elif ev == "publish":
                    pubs[e["pub_id"]] = ((e["t"] - off - t0) / 1e9, e.get("attrs") or {})
                elif ev == "subscribe":
                    s = [(e["t"] - off - t0) / 1e9, parse(e.get("filter")), math.inf]
                    subs.setdefault(e["client"], []).append(s)
                    sub_by_id[(e["client"], e["sub_id"])] = s
                elif ev == "unsubscribe":
                    s = sub_by_id.get((e["client"], e["sub_id"]))
                    if s is not None:
                        s[2] = (e["t"] - off - t0) / 1e9

    def match(preds: tuple, attrs: dict[str, Any]) -> bool:
        return all(holds(p, attrs) for p in preds)

    for c, pid in deliveries:
        p = pubs.get(pid)
        if p is None or not any(match(s[1], p[1]) for s in subs.get(c, ())):
            res.violations["filter_match"] += 1
    for pid, (t, attrs) in pubs.items():
        for c, ss in subs.items():
            if not any(s[0] <= t < s[2] and match(s[1], attrs) for s in ss):
                continue
            if pid in delivered.get(c, ()):
                continue
            if any(a <= t <= b + margin_s for a, b in windows):
                res.attributed += 1
            else:
                res.violations["completeness"] += 1
    return res
