"""Estimate the wall time of `testbed reproduce` under the scheduler from an earlier reproduction.

    .venv/bin/python benchmarks/estimate_schedule.py OUT [--scale quick] [--cpu-budget C] [--jobs J] [--json F]

OUT is an earlier reproduction's ``--out`` directory (each paper's ``index-<scale>.json`` and
``result.json``). Every run or computed entry it made becomes a work item of today's definitions
(``Paper.alone``/``Grid.alone``, the runs at a time, a search's slots) taking the wall time it took
then (``elapsed_s``), keeping the cores its node processes used then (``run_cpu``, plus the
controller's share) busy; each paper's analysis takes its ``timings.analysis_s``. The same policy
as `reproduce` (``schedule.pick``) then lays them out on a virtual clock. What it assumes: a run
takes as long beside other runs as it took then (the earlier reproduction made mobility's and
transactions' runs two at a time, so their times include that much sharing, no more), and nothing
costs between items. It measures nothing: the real wall time is `reproduce` timed on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def items_of(out: Path, scale: str, jobs: int | None):
    import testbed.experiments as E
    from testbed.experiments import runner as R
    from testbed.experiments.schedule import Item

    items, dur, caps, recorded = [], {}, {}, {}
    for name, paper in E.papers().items():
        idx_path = out / name / f"index-{scale}.json"
        if not idx_path.exists():
            continue
        result = json.loads((out / name / "result.json").read_text())
        recorded[name] = result["timings"]
        cap = max(1, jobs if jobs is not None else paper.parallel_at(scale))
        caps[name] = cap
        grids = {g.name: g for g in paper.grids}
        entries = sorted(json.loads(idx_path.read_text()).values(), key=lambda e: e.get("finished", ""))
        for k, e in enumerate(entries):
            g = grids.get(e.get("grid"))
            if g is None:
                continue
            alone = paper.alone_for(g)
            if e.get("run"):
                cores = R.run_cpu((out / name / e["run"]).resolve())
                cpu = cores + R.CONTROLLER_CPU if cores is not None else paper.cpu_for(g, scale)
                slots, kind = 1, "run"
            elif g.makes_runs:
                slots = max(1, min(cap, int(g.makes_runs)))
                cpu, kind = paper.cpu_for(g, scale) * slots, "compute"
            else:
                cpu, slots, kind = 0.1, 1, "compute"
            it = Item(f"{name}:{k}", name, cpu=cpu, alone=alone, slots=slots, kind=kind,
                      exclusive=f"compute:{name}" if kind == "compute" else "",
                      rank=R.RANK_ALONE if alone else R.RANK_SHARED, order=k / len(entries))
            items.append(it)
            dur[it.name] = float(e.get("elapsed_s") or 0.0)
        a = Item(f"{name}:analysis", name, cpu=R.ANALYSIS_CPU, slots=0, kind="analysis", exclusive="analysis", last=True,
                 rank=R.RANK_ANALYSIS)
        items.append(a)
        dur[a.name] = float(result["timings"].get("analysis_s") or 0.0)
    return items, dur, caps, recorded


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--scale", default="quick")
    ap.add_argument("--cpu-budget", type=float, default=2.0)
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from testbed.experiments.schedule import simulate

    items, dur, caps, recorded = items_of(args.out, args.scale, args.jobs)
    spans = simulate(items, dur, budget=args.cpu_budget, jobs=args.jobs, caps=caps)
    wall = max(e for _, e, _ in spans.values())
    per = {}
    for name in caps:
        mine = [(s, e) for s, e, i in spans.values() if i.group == name]
        per[name] = {"start_s": round(min(s for s, _ in mine), 1), "end_s": round(max(e for _, e in mine), 1),
                     "recorded_total_s": recorded[name].get("total_s")}
    before = sum(float(r.get("total_s") or 0) for r in recorded.values())
    print(f"earlier reproduction ({args.out}): papers one after the other, {before:.0f} s = {before / 60:.1f} min "
          "(the sum of the papers' wall times)")
    print(f"estimated under the scheduler (budget {args.cpu_budget:g} cores"
          + (f", --jobs {args.jobs}" if args.jobs else ", each paper's parallel") + f"): {wall:.0f} s = {wall / 60:.1f} min")
    for name, p in per.items():
        print(f"  {name}: {p['start_s']:.0f}-{p['end_s']:.0f} s (recorded alone: {p['recorded_total_s']} s)")
    alone = sum(dur[i.name] for i in items if i.alone)
    print(f"  of which the runs that must run alone: {alone:.0f} s = {alone / 60:.1f} min, one after the other")
    if args.json:
        args.json.write_text(json.dumps({"out": str(args.out), "cpu_budget": args.cpu_budget, "jobs": args.jobs,
                                         "before_s": round(before, 1), "estimate_s": round(wall, 1),
                                         "alone_s": round(alone, 1), "papers": per}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
