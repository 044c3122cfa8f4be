"""Compare two checkouts' ingest of the same runs (e.g. the pyarrow ingest against the Spark JSON parse
it replaced, commit fed28b3): every event type's columns, schema and rows, and the ingest report.

    PYTHONPATH=/path/to/checkout-A python benchmarks/compare_ingest.py dump /tmp/cmp/A RUN_DIR...
    PYTHONPATH=/path/to/checkout-B python benchmarks/compare_ingest.py dump /tmp/cmp/B RUN_DIR...
    python benchmarks/compare_ingest.py compare /tmp/cmp/A /tmp/cmp/B      # exit 1 on any difference

Each run is copied (without its analysis/) under the dump directory and ingested there; ``json``
fields are compared as decoded JSON (their text's spacing is not part of their value). Rows are
collected to the driver: for runs of up to a few hundred thousand events.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

REPORT_KEYS = ("files", "lines", "events", "malformed", "malformed_by_file", "unknown", "unknown_nodes",
               "t0_wall_ns")


def dump(out_dir: Path, srcs: list[Path]) -> None:
    from testbed.analysis.ingest import ingest
    from testbed.analysis.session import spark_session
    from testbed.registry import all_events

    spark = spark_session()
    reg = all_events()
    for i, src in enumerate(srcs):
        work = out_dir / f"work{i}" / src.name
        shutil.rmtree(work.parent, ignore_errors=True)
        work.parent.mkdir(parents=True)
        shutil.copytree(src, work, copy_function=shutil.copy2, ignore=shutil.ignore_patterns("analysis"))
        ev = ingest(spark, work, reuse=False)
        res = {"run": str(src), "report": {k: ev.report.to_dict()[k] for k in REPORT_KEYS}, "types": {}}
        for name, df in sorted(ev.items()):
            jf = [k for k, v in reg[name].fields.items() if v == "json"]
            rows = []
            for r in df.collect():
                d = r.asDict()
                for k in jf:
                    if d.get(k) is not None:
                        try:
                            d[k] = json.loads(d[k])
                        except ValueError:
                            pass
                rows.append(json.dumps(d, sort_keys=True))
            res["types"][name] = {"columns": df.columns, "schema": df.schema.simpleString(), "rows": sorted(rows)}
        (out_dir / f"{i}.json").write_text(json.dumps(res))
        print(src.name, ev.report.events, "malformed", ev.report.malformed, "unknown", ev.report.unknown, flush=True)


def compare(a: Path, b: Path) -> int:
    bad = 0
    for f in sorted(a.glob("*.json")):
        x, y = json.loads(f.read_text()), json.loads((b / f.name).read_text())
        if x["report"] != y["report"]:
            bad += 1
            print(f.name, "report differs", x["report"], y["report"])
        for t in sorted(set(x["types"]) | set(y["types"])):
            p, q = x["types"].get(t), y["types"].get(t)
            if p is None or q is None:
                bad += 1
                print(f.name, t, "present on one side only")
                continue
            for k in ("columns", "schema"):
                if p[k] != q[k]:
                    bad += 1
                    print(f.name, t, k, "differs:", p[k], q[k])
            if p["rows"] != q["rows"]:
                bad += 1
                only_a, only_b = set(p["rows"]) - set(q["rows"]), set(q["rows"]) - set(p["rows"])
                print(f.name, t, "rows differ", len(p["rows"]), len(q["rows"]), sorted(only_a)[:2], sorted(only_b)[:2])
        print(f"{x.get('run', f.name)}: {len(x['types'])} event types, {sum(len(v['rows']) for v in x['types'].values())} rows")
    print(f"differences: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["dump"]:
        dump(Path(sys.argv[2]), [Path(x) for x in sys.argv[3:]])
    elif sys.argv[1:2] == ["compare"]:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
