"""Where a test run's wall time went, from the CSV tests/conftest.py writes with
TESTBED_TEST_TIMELINE=FILE (worker, nodeid, phase, start, stop per test phase).

    TESTBED_TEST_TIMELINE=/tmp/tl.csv ./scripts/test.sh
    .venv/bin/python scripts/suite_timeline.py /tmp/tl.csv [--top 15] [--write-durations tests/file_durations.json]

Prints the run's span, each worker's busy time and when it finished, the busy fraction of the
workers over the span, the files by total time (a file runs on one worker under --dist loadfile:
the longest bounds the pass), and the files that were still running in the last tenth of the
span (the tail: the candidates to start earlier or split).

``--write-durations FILE`` writes each file's total seconds (JSON, file -> s): tests/conftest.py
hands the files to the workers longest first from it (tests/file_durations.json), so that a long
file does not start last and hold the pass open alone.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict


def load(path: str) -> list[tuple[str, str, str, float, float]]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for r in csv.reader(f):
            if len(r) in (5, 6):
                rows.append((r[0], r[1], r[2], float(r[3]), float(r[4])))
    return rows


def summary(rows: list[tuple[str, str, str, float, float]], top: int = 15) -> str:
    if not rows:
        return "no timeline rows"
    t0, t1 = min(r[3] for r in rows), max(r[4] for r in rows)
    span = t1 - t0
    busy: dict[str, float] = defaultdict(float)
    last: dict[str, float] = defaultdict(float)
    files: dict[str, float] = defaultdict(float)
    file_end: dict[str, float] = defaultdict(float)
    for w, nodeid, _, a, b in rows:
        busy[w] += b - a
        last[w] = max(last[w], b)
        f = nodeid.split("::", 1)[0]
        files[f] += b - a
        file_end[f] = max(file_end[f], b)
    out = [f"span {span:.0f} s, {len(busy)} worker(s), busy {sum(busy.values()) / (span * len(busy)):.0%} "
           "of the workers' time"]
    for w in sorted(busy):
        out.append(f"  {w}: busy {busy[w]:.0f} s, done at +{last[w] - t0:.0f} s")
    out.append(f"files by total time (top {top}):")
    for f, s in sorted(files.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"  {s:7.0f} s  ends +{file_end[f] - t0:5.0f} s  {f}")
    tail = sorted((f for f, e in file_end.items() if e >= t1 - 0.1 * span), key=lambda f: -file_end[f])
    out.append(f"running in the last tenth of the span (after +{0.9 * span:.0f} s):")
    out += [f"  ends +{file_end[f] - t0:5.0f} s  total {files[f]:6.0f} s  {f}" for f in tail[:top]]
    return "\n".join(out)


def file_totals(rows: list[tuple[str, str, str, float, float]]) -> dict[str, int]:
    """file -> its tests' total seconds (every phase), rounded up to whole seconds."""
    files: dict[str, float] = defaultdict(float)
    for _, nodeid, _, a, b in rows:
        files[nodeid.split("::", 1)[0]] += b - a
    return {f: int(s) + 1 for f, s in sorted(files.items())}


def file_cpu(path: str) -> dict[str, float]:
    """file -> CPU seconds its tests used, from the 6th column (the worker's cumulative CPU after each
    phase: its own, its reaped children's, its live Spark JVM's; not the containers'): each phase's
    increase over the worker's previous phase. Empty when the CSV has no CPU column."""
    last: dict[str, float] = {}
    out: dict[str, float] = defaultdict(float)
    with open(path, encoding="utf-8") as f:
        lines = [r for r in csv.reader(f) if len(r) == 6 and r[5]]
    for w, nodeid, _, a, _, cpu in sorted(lines, key=lambda r: float(r[3])):
        c = float(cpu)
        if w in last:
            out[nodeid.split("::", 1)[0]] += max(0.0, c - last[w])
        last[w] = c
    return dict(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--write-durations", metavar="FILE", help="write each file's total seconds (JSON) to FILE")
    a = ap.parse_args()
    rows = load(a.csv)
    print(summary(rows, a.top))
    cpu = file_cpu(a.csv)
    if cpu:
        print(f"CPU seconds by file (workers' processes and Spark JVMs, not containers; all {sum(cpu.values()):.0f} s):")
        for f, s in sorted(cpu.items(), key=lambda kv: -kv[1])[:a.top]:
            print(f"  {s:7.0f} s  {f}")
    if a.write_durations:
        with open(a.write_durations, "w", encoding="utf-8") as f:
            json.dump(file_totals(rows), f, indent=0, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
