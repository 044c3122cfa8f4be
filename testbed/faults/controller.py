"""The background controller: ``python -m testbed.faults.controller RUN_DIR (--schedule | --actions FILE)``.

``--schedule``: what ``testbed up`` leaves running. Starts the workload, fires
the plan's fault timeline at planned times, records actual times in the
manifest, exits when the workload ends (the nodes stay up until ``down``).
``--actions FILE``: fires the follow-up actions of an injected fault (e.g. the
heal of ``{cut: [a, b], for: 5s}``) at their times on the run's clock.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from testbed.errors import TestbedError
from testbed.faults.schedule import DRAIN_S, ScheduleRunner, settle_s, timeline_entry
from testbed.providers.registry import get_provider
from testbed.providers.control import Controls, run_secret
from testbed.runs.rundir import RunDir
from testbed.topology.plan import Action


def _log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="testbed.faults.controller")
    ap.add_argument("run_dir")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--schedule", action="store_true")
    g.add_argument("--actions")
    args = ap.parse_args(argv)
    run = RunDir(args.run_dir)
    try:
        deployment = run.deployment()
        controls = Controls(deployment, secret=run_secret(run),
                            origin="schedule" if args.schedule else "inject")
        provider = get_provider(run.manifest.get("provider", "local"))
        runner = ScheduleRunner(run, provider, deployment, controls,
                                on_event=lambda e: _log(json.dumps(e, default=str)))
        if args.schedule:
            plan = run.plan()
            time.sleep(settle_s(plan))
            runner.start_workload(plan.duration_s)
            run.update_manifest(status="running")
            _log(f"workload started, {len(plan.actions)} actions")
            runner.run_actions(list(plan.actions), until_s=plan.duration_s + DRAIN_S)
            run.update_manifest(status="workload-done")
            _log("workload done")
        else:
            actions = [Action.from_dict(a) for a in json.loads(open(args.actions).read())]
            m = run.manifest
            t0 = m.get("t0_wall_ns") or time.time_ns()
            runner.t0_wall_ns = t0
            runner.duration_s = m.get("duration_s", 0.0)
            runner.t0_mono = time.monotonic() - (time.time_ns() - t0) / 1e9
            for a in sorted(actions, key=lambda a: a.at_s):
                runner._sleep_until(a.at_s)
                e = timeline_entry(a)
                runner.execute(a, e)
                e["injected"] = True
                run.modify_manifest(lambda m, e=e: m.setdefault("injected", []).append(e))
                _log(json.dumps(e))
            time.sleep(0.5)  # let a restart's restore thread finish
        controls.close()
        return 0
    except TestbedError as e:
        _log(f"error: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
