"""The library behind the CLI: validate / up / down / status / logs / inject / run / analyze / wipe.

Tests and notebooks call these functions; ``testbed.cli`` only parses
arguments, calls one of them and maps errors to exit codes. ``progress`` is a
callable taking one human-readable line (the CLI passes its live display).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from testbed import __version__
from testbed.errors import ProviderError, RunError, TestbedError, UsageError
from testbed.runs.rundir import RunDir, find_run, mark_active, new_run_id, runs_root

Progress = Callable[[str], None]
OnEvent = Callable[[dict[str, Any]], None]
def _quiet(_: str) -> None:
    pass


# -- topology -----------------------------------------------------------------------
def parse_set(pairs: list[str] | None) -> dict[str, Any]:
    """``--set key=value`` pairs; values parsed as YAML scalars (numbers, booleans, strings)."""
    import yaml

    out: dict[str, Any] = {}
    for p in pairs or []:
        key, sep, value = p.partition("=")
        if not sep or not key or not key.replace("_", "a").isalnum():
            raise UsageError(f"--set {p!r}: expected key=value with a name made of letters, digits and _")
        try:
            out[key] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            out[key] = value
    return out


def plans(path: str, set_vars: dict[str, Any] | None = None, provider: str | None = None):
    """Every Plan of a topology file (one per sweep point x repeat). Raises TopologyError."""
    from testbed.topology.loader import plans as _plans

    if not Path(path).is_file():
        raise UsageError(f"{path}: no such file")
    return _plans(path, set_vars or {}, provider)


def validate(path: str, set_vars: dict[str, Any] | None = None, provider: str | None = None) -> str:
    """The resolved plan(s) as text, or a TopologyError with every problem of the file."""
    from testbed.topology.describe import describe

    ps = plans(path, set_vars, provider)
    parts = []
    for p in ps:
        head = ""
        if len(ps) > 1:
            head = f"=== point {json.dumps(p.point, sort_keys=True)} repeat {p.repeat_index}\n"
        parts.append(head + describe(p))
    if len(ps) > 1:
        parts.append(f"{len(ps)} runs")
    return "\n".join(parts)


def hosts(path: str, set_vars: dict[str, Any] | None = None, progress: Progress = _quiet) -> list[dict[str, Any]]:
    """Ansible: reach and prepare the topology's hosts; per host, what it has and what a run
    would use there (containers or processes, the node image, link emulation). Starts nothing."""
    from testbed.providers.ansible.provider import AnsibleProvider

    plan = _single_plan(path, set_vars or {}, "ansible")
    return AnsibleProvider().check_hosts(plan, progress)


def graph(path: str, out: str | None = None, *, at: str | None = None, set_vars: dict[str, Any] | None = None,
          provider: str | None = None) -> tuple[str, Path | None]:
    """The topology drawn by Graphviz ``dot``: -> (DOT source, file written or None).

    ``out`` ending in .png / .svg / .pdf is laid out by ``dot``; .dot (or None) is the source only.
    ``at`` (e.g. "12s"): the state at that instant of the fault schedule. A sweep draws its first point.
    """
    from testbed.render.graph import plan_to_dot
    from testbed.topology.units import parse_time

    at_s = None
    if at is not None:
        try:
            at_s = parse_time(at)
        except ValueError as e:
            raise UsageError(f"--at {at!r}: {e}") from None
    dot = plan_to_dot(plans(path, set_vars, provider)[0], at_s)
    if out is None:
        return dot, None
    dest = Path(out)
    fmt = dest.suffix.lstrip(".").lower()
    if fmt == "dot":
        dest.write_text(dot)
        return dot, dest
    if fmt not in ("png", "svg", "pdf"):
        raise UsageError(f"-o {out}: the file must end in .png, .svg, .pdf or .dot")
    try:
        import graphviz
    except ImportError:
        raise UsageError("testbed graph needs the Python package graphviz (pip install graphviz)") from None
    try:
        data = graphviz.Source(dot, engine="dot").pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise UsageError("testbed graph needs Graphviz's `dot` (apt-get install graphviz); "
                         "-o FILE.dot writes the source without it") from None
    except graphviz.CalledProcessError as e:
        raise TestbedError(f"dot failed: {(e.stderr or b'').decode(errors='replace').strip()[:300]}") from None
    dest.write_bytes(data)
    return dot, dest


# -- bring-up -----------------------------------------------------------------------
def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {"testbed": __version__, "python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in ("msgpack", "pyspark", "pydantic", "docker", "ansible-core", "ansible-runner"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    from testbed.runs.provenance import git_state

    git = git_state()  # the checkout testbed runs from (not some repository an installed wheel sits in)
    if git is not None:
        out["git"] = git["commit"]
        out["git_dirty"] = git["dirty"]
    return out


def _write_run_files(run: RunDir, plan, topo_path: str, set_vars: dict[str, Any]) -> None:
    from testbed.topology.loader import render_text

    text = Path(topo_path).read_text()
    (run.path / "topology.yaml").write_text(text)
    try:
        rendered = render_text(topo_path, set_vars, plan.point)
        (run.path / "topology.rendered.yaml").write_text(rendered)
    except TestbedError:
        pass
    run.write("plan.json", plan.to_dict(), indent=None)  # one line: n^2 links (docs/benchmarks.md, bring-up)
    run.write("manifest.json", {
        "run_id": run.run_id,
        "name": plan.name,
        "protocol": plan.protocol,
        "provider": plan.provider,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": _versions(),
        "topology_path": str(Path(topo_path).resolve()),
        "topology_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "set": set_vars,
        "point": plan.point,
        "repeat_index": plan.repeat_index,
        "seed": plan.seed,
        "node_seeds": {n: plan.node_seed(n) for n in plan.nodes},
        "node_hosts": {n: node.host for n, node in plan.nodes.items()},
        "duration_s": plan.duration_s,
        "status": "starting",
        "timeline": [],
        "injected": [],
    })


@dataclass
class Session:
    """A run that is up, with what the controller needs to drive it."""

    run: RunDir
    plan: Any
    provider: Any
    deployment: Any
    controls: Any
    timings: dict[str, float] = field(default_factory=dict)

    def close(self) -> None:
        self.controls.close()


def bring_up(plan, topo_path: str, set_vars: dict[str, Any], root: Path, progress: Progress) -> Session:
    """Create the run directory, start every node, measure clock offsets. Cleans up on failure."""
    from testbed.providers.registry import get_provider
    from testbed.providers.control import Controls, run_secret
    from testbed.runs.clock import estimate_offsets

    provider = get_provider(plan.provider)
    run = RunDir.create(root, new_run_id(plan.name))
    _write_run_files(run, plan, topo_path, set_vars)
    secret = run_secret(run, create=True)  # runs/<id>/secret, 0600; the nodes get it in their configs
    mark_active(root, run.run_id, True)
    progress(f"run {run.run_id}: bringing up {len(plan.nodes)} nodes with provider {plan.provider}")
    t = time.monotonic()
    try:
        deployment = provider.up(plan, run, progress)
        controls = Controls(deployment, secret=secret, origin="schedule")
        offsets = estimate_offsets(deployment, controls)
    except BaseException:
        progress("bring-up failed; removing what was started")
        try:
            provider.down(run, _quiet)
        finally:
            mark_active(root, run.run_id, False)
            run.update_manifest(status="failed")
        raise
    up_s = time.monotonic() - t
    run.update_manifest(status="up", emulation=deployment.emulation, clock_offsets=offsets, up_s=up_s)
    progress(f"all {len(plan.nodes)} nodes up in {up_s:.1f}s (link emulation: {deployment.emulation})")
    return Session(run, plan, provider, deployment, controls, {"up_s": up_s})


def _single_plan(path, set_vars, provider):
    ps = plans(path, set_vars, provider)
    if len(ps) != 1:
        raise UsageError(f"{path}: has a sweep/repeat of {len(ps)} runs; `testbed up` takes one "
                         f"(use `testbed run`, or fix the point with --set)")
    return ps[0]


def up(path: str, *, set_vars: dict[str, Any] | None = None, provider: str | None = None,
       runs_dir: str | None = None, schedule: bool = True, progress: Progress = _quiet) -> RunDir:
    """Start a topology and return; a background controller drives workload and faults."""
    set_vars = set_vars or {}
    plan = _single_plan(path, set_vars, provider)
    session = bring_up(plan, path, set_vars, runs_root(runs_dir), progress)
    session.close()
    if schedule:
        pid = spawn_controller(session.run, ["--schedule"])
        progress(f"background controller pid {pid}: workload of {plan.duration_s:g}s "
                 f"and {len(plan.actions)} scheduled actions")
    else:
        session.run.update_manifest(status="up (idle)")
    return session.run


def spawn_controller(run: RunDir, args: list[str]) -> int:
    """Start ``python -m testbed.faults.controller RUN ...`` detached; its pid goes to state.json."""
    log = open(run.path / "controller.log", "ab")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "testbed.faults.controller", str(run.path), *args],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    finally:
        log.close()
    st = run.state
    st.setdefault("controllers", []).append(proc.pid)
    run.save_state(st)
    return proc.pid


def load_average() -> list[float] | None:
    """The machine's 1, 5 and 15 minute load averages now (``os.getloadavg``), or None where the
    platform has none. Recorded in every run's manifest (``load_avg``: ``start`` when the workload
    starts, ``end`` when it ends, ``cpus``): the 1-minute value at the end covers the workload's last
    minute, this run's own processes included, so a claim's explanation can cite how loaded the
    machine was while the run measured (docs/experiments.md, "Explanations")."""
    from testbed.runs.provenance import load_now

    return load_now()


# The fault-schedule runners of the runs this process is making (each in its run's thread), so that an
# interrupt that stops those runs also ends their waits (stop_schedules).
_SCHEDULES: weakref.WeakSet[Any] = weakref.WeakSet()


def stop_schedules() -> int:
    """End the workload wait of every run this process is making (once ``down`` has stopped their
    nodes): without it a run's thread sleeps to the run's planned end, up to its whole duration,
    before its teardown goes on. Returns how many were stopped."""
    live = list(_SCHEDULES)
    for r in live:
        r.stop()
    return len(live)


def schedule(session: Session, on_event: OnEvent, progress: Progress) -> list[dict[str, Any]]:
    """Run the workload and the fault schedule to the end (foreground; :func:`stop_schedules` ends
    it early). Returns the timeline."""
    from testbed.faults.schedule import DRAIN_S, ScheduleRunner, drain_s, settle_s

    plan = session.plan
    runner = ScheduleRunner(session.run, session.provider, session.deployment, session.controls, on_event)
    _SCHEDULES.add(runner)
    settle = settle_s(plan)
    if settle > 0:
        progress(f"settling {settle:g}s (subscriptions propagate)")
        time.sleep(settle)
    runner.start_workload(plan.duration_s)
    session.run.update_manifest(status="running", load_avg={"cpus": os.cpu_count(), "start": load_average()})
    on_event({"kind": "workload", "phase": "start", "duration_s": plan.duration_s,
              "t0_mono": runner.t0_mono})
    try:
        # a run without scheduled faults ends when its nodes report their work done (+ the drain),
        # waiting for them at most ``params.drain`` past its duration (drain_s); one with faults
        # ends DRAIN_S after its duration
        finishing = not plan.actions
        timeline = runner.run_actions(list(plan.actions),
                                      until_s=plan.duration_s + (drain_s(plan) if finishing else DRAIN_S),
                                      end_when_finished=finishing)
        exited = runner.exited()
    finally:
        runner.stop()
    if exited:  # recorded now (a background controller's run shows it in status); run_one raises
        from testbed.runs.oom import last_log_t_s

        seen = round(runner.now_s(), 3)
        session.run.update_manifest(exited_outside_schedule={
            n: {"reason": why, "at_s": seen,  # when it was seen gone; its last log line, when it still ran
                "last_log_s": last_log_t_s(Path(session.provider.logs_path(session.run, n)), runner.t0_wall_ns)}
            for n, why in sorted(exited.items())})
        progress("node(s) exited outside the failure schedule: " + ", ".join(sorted(exited)))
    if runner.finished_s is not None:
        session.run.update_manifest(workload_end_s=round(runner.finished_s, 3), ended="finished")
    session.run.modify_manifest(lambda m: m.update(status="workload-done", load_avg={
        **(m.get("load_avg") or {"cpus": os.cpu_count()}), "end": load_average()}))
    on_event({"kind": "workload", "phase": "end"})
    return timeline


def teardown(run: RunDir, progress: Progress = _quiet) -> None:
    from testbed.providers.registry import get_provider
    from testbed.providers.local.provider import stop_controllers

    st = run.state
    stop_controllers(str(run.path), st.get("controllers", []))
    provider = get_provider(run.manifest.get("provider") or st.get("provider") or "local")
    provider.down(run, progress)
    mark_active(run.path.parent, run.run_id, False)
    if run.manifest.get("status") not in ("collected", "analyzed"):
        run.update_manifest(status="down")


def down(run: str | None = None, *, runs_dir: str | None = None, all_runs: bool = False,
         progress: Progress = _quiet) -> list[str]:
    """Stop a run (default: the latest active one; ``all_runs``: every active one). Idempotent."""
    from testbed.runs.rundir import active_runs

    root = runs_root(runs_dir)
    if all_runs:
        targets = [RunDir(root / r) for r in active_runs(root)]
    else:
        try:
            targets = [find_run(run, runs_dir)]
        except UsageError:
            if run is None:
                progress("nothing is up")
                return []
            raise
    for rd in targets:
        progress(f"stopping {rd.run_id}")
        teardown(rd, progress)
    return [rd.run_id for rd in targets]


def status(run: str | None = None, *, runs_dir: str | None = None) -> dict[str, Any]:
    """Nodes, faults fired, the next one due."""
    from testbed.providers.registry import get_provider
    from testbed.providers.control import Controls, run_secret

    rd = find_run(run, runs_dir)
    m = rd.manifest
    plan = rd.plan()
    provider = get_provider(m.get("provider", "local"))
    nodes = provider.status(rd)
    try:
        controls = Controls(rd.deployment(), timeout=1.0, secret=run_secret(rd))
        replies = controls.call_many((s.node, "status", {}) for s in nodes if s.state == "running")
        controls.close()
        for s in nodes:
            r = replies.get(s.node)
            if isinstance(r, dict):
                s.info = r
    except RunError:
        pass
    t0 = m.get("t0_wall_ns")
    elapsed = (time.time_ns() - t0) / 1e9 if t0 else None
    timeline = m.get("timeline", []) + m.get("injected", [])
    fired = [e for e in timeline if e.get("status") != "pending"]
    pending = sorted((e for e in m.get("timeline", []) if e.get("status") == "pending"),
                     key=lambda e: e["planned_s"])
    return {
        "run_id": rd.run_id, "path": str(rd.path), "status": m.get("status"), "provider": m.get("provider"),
        "emulation": m.get("emulation"), "elapsed_s": elapsed, "duration_s": plan.duration_s,
        "nodes": [{"node": s.node, "state": s.state, "detail": s.detail, "role": plan.nodes[s.node].role,
                   "site": plan.nodes[s.node].site, "host": plan.nodes[s.node].host, "info": s.info}
                  for s in nodes],
        "fired": fired,
        "next": pending[0] if pending else None,
        "pending": len(pending),
    }


def log_lines(run: str | None, node: str, *, runs_dir: str | None = None, follow: bool = False,
              poll_s: float = 0.2) -> Iterator[str]:
    """The node's event log lines; with ``follow`` keep reading as it grows (until interrupted)."""
    from testbed.providers.registry import get_provider

    rd = find_run(run, runs_dir)
    plan = rd.plan()
    if node not in plan.nodes:
        raise UsageError(f"no node {node!r} in run {rd.run_id} (nodes: {', '.join(plan.nodes)})")
    path = Path(get_provider(rd.manifest.get("provider", "local")).logs_path(rd, node))
    pos = 0
    while True:
        if path.exists():
            with open(path, "rb") as f:
                f.seek(pos)
                data = f.read()
            end = data.rfind(b"\n") + 1
            for line in data[:end].decode(errors="replace").splitlines():
                yield line
            pos += end
        if not follow:
            return
        time.sleep(poll_s)


def inject(fault_text: str, run: str | None = None, *, runs_dir: str | None = None,
           progress: Progress = _quiet) -> list[dict[str, Any]]:
    """Inject one fault of the topology format now, e.g. ``{crash: b2}`` or ``{cut: [a, b], for: 5s}``."""
    from testbed.faults.inject import actions_for

    rd = find_run(run, runs_dir)
    plan = rd.plan()
    m = rd.manifest
    t0 = m.get("t0_wall_ns")
    now_s = (time.time_ns() - t0) / 1e9 if t0 else 0.0
    actions = actions_for(fault_text, plan, now_s, index=1000 + len(m.get("injected", [])))
    immediate = [a for a in actions if a.at_s <= now_s]
    later = [a for a in actions if a.at_s > now_s]
    entries = _execute_now(rd, immediate, progress)
    if later:
        f = rd.path / f"inject-{int(time.time() * 1000)}.json"
        f.write_text(json.dumps([a.to_dict() for a in later]))
        pid = spawn_controller(rd, ["--actions", str(f)])
        progress(f"{len(later)} follow-up action(s) at +{later[0].at_s - now_s:.1f}s (controller pid {pid})")
    return entries


def _execute_now(rd: RunDir, actions, progress: Progress) -> list[dict[str, Any]]:
    from testbed.faults.schedule import ScheduleRunner, timeline_entry
    from testbed.providers.registry import get_provider
    from testbed.providers.control import Controls, run_secret

    deployment = rd.deployment()
    controls = Controls(deployment, secret=run_secret(rd), origin="inject")
    m = rd.manifest
    runner = ScheduleRunner(rd, get_provider(m.get("provider", "local")), deployment, controls)
    t0 = m.get("t0_wall_ns")
    # the runner's clock: t0 from the manifest's wall time, mapped onto this process's monotonic clock
    runner.t0_mono = time.monotonic() - ((time.time_ns() - t0) / 1e9 if t0 else 0.0)
    runner.t0_wall_ns = t0
    runner.duration_s = m.get("duration_s", 0.0)
    entries = []
    try:
        for a in actions:
            e = timeline_entry(a)
            runner.execute(a, e)
            e["injected"] = True
            entries.append(e)
            progress(f"{a.op} {' '.join(a.target) or ''}: {e['status']}" + (f" ({e['error']})" if e["error"] else ""))
        restarted = [a.target[0] for a, e in zip(actions, entries) if a.op == "restart" and e["status"] == "done"]
        if restarted:  # confirmed by execute; a failed restart is in its entry, not waited for again
            controls.wait_ready(restarted, 30.0)
            time.sleep(0.2)
    finally:
        controls.close()
    rd.modify_manifest(lambda m: m.setdefault("injected", []).extend(entries))
    return entries


# -- whole experiments ------------------------------------------------------------------
def run(path: str, *, set_vars: dict[str, Any] | None = None, provider: str | None = None,
        runs_dir: str | None = None, progress: Progress = _quiet, on_event: OnEvent | None = None,
        analyze: bool = True, spark_master: str | None = None) -> list[RunDir]:
    """The whole experiment: up, workload + faults, collect, down, analyse; one run per sweep point."""
    set_vars = set_vars or {}
    ps = plans(path, set_vars, provider)
    root = runs_root(runs_dir)
    if len(ps) > 1:
        root = root / f"{ps[0].name}-sweep-{time.strftime('%Y%m%d-%H%M%S')}"
        root.mkdir(parents=True)
        progress(f"sweep of {len(ps)} runs in {root}")
    on_event = on_event or (lambda e: None)
    done: list[RunDir] = []
    for i, plan in enumerate(ps):
        if len(ps) > 1:
            progress(f"[{i + 1}/{len(ps)}] point {json.dumps(plan.point, sort_keys=True)} repeat {plan.repeat_index}")
        done.append(run_one(plan, path, set_vars, root, progress, on_event))
    if analyze:
        on_event({"kind": "phase", "phase": "analyze"})
        _analyze_all(done, spark_master, progress)
    if len(ps) > 1:
        _write_sweep_index(root, done)
    return done


def run_one(plan, path: str, set_vars: dict[str, Any], root: Path, progress: Progress,
            on_event: OnEvent) -> RunDir:
    on_event({"kind": "phase", "phase": "up"})
    session = bring_up(plan, path, set_vars, root, progress)
    try:
        on_event({"kind": "phase", "phase": "workload"})
        t = time.monotonic()
        schedule(session, on_event, progress)
        on_event({"kind": "phase", "phase": "collect"})
        progress("collecting logs")
        t1 = time.monotonic()
        session.provider.collect(session.run, progress)
        session.run.update_manifest(status="collected", end_wall_ns=time.time_ns(), schedule_s=t1 - t,
                                    collect_s=time.monotonic() - t1)  # where a run's wall time goes
    finally:
        session.close()
        t = time.monotonic()
        teardown(session.run, progress)
        session.run.update_manifest(down_s=time.monotonic() - t)
    exited = session.run.manifest.get("exited_outside_schedule")
    if exited:  # its logs are collected (nothing lost), but its history is not the plan's: not a run
        session.run.update_manifest(status="failed")
        raise RunError(f"{session.run.path}: " + "; ".join(_exit_line(n, e) for n, e in exited.items())
                       + " (the run is marked failed)")
    return session.run


def _exit_line(node: str, e: dict[str, Any]) -> str:
    when = f"seen gone at {e['at_s']:g} s"
    if e.get("last_log_s") is not None:
        when = f"last logged at {e['last_log_s']:.3f} s, {when}"
    return f"node {node} exited during the workload ({when}), outside the failure schedule: {e['reason']}"


def run_checks(rd: RunDir) -> list[dict[str, Any]]:
    """The property checks of an analysed run (``analysis/checks.json``), or [] before analysis."""
    if not (rd.analysis_dir / "checks.json").exists():
        return []
    return list(rd.read("analysis/checks.json").get("checks", []))


def _write_sweep_index(root: Path, runs: list[RunDir]) -> None:
    rows = []
    for rd in runs:
        m = rd.manifest
        checks = run_checks(rd)
        rows.append({"run": rd.run_id, "point": m.get("point"), "repeat": m.get("repeat_index"),
                     "checks_passed": all(c.get("passed") for c in checks) if checks else None})
    (root / "sweep.json").write_text(json.dumps(rows, indent=1))


def analyze_run(run_dir: str, *, spark_master: str | None = None, progress: Progress = _quiet, spark=None,
                reuse: bool = True):
    """Spark: ingest the logs, run the checks, write figures and the report."""
    from testbed.analysis.job import analyze as _analyze

    rd = RunDir(run_dir)
    if not rd.exists():
        raise UsageError(f"{run_dir}: not a run directory (no plan.json)")
    result = _analyze(str(rd.path), spark_master=spark_master, progress=progress, spark=spark, reuse=reuse)
    rd.update_manifest(status="analyzed")
    return result


def analyze_runs(run_dirs: list[str], *, spark_master: str | None = None, progress: Progress = _quiet,
                 reuse: bool = True) -> list:
    """Analyse several run directories in one Spark session (started once; stopped only if we started it)."""
    from pyspark.sql import SparkSession

    from testbed.analysis.session import resolve_master, spark_session

    for d in run_dirs:  # every directory checked before Spark starts
        if not RunDir(d).exists():
            raise UsageError(f"{d}: not a run directory (no plan.json)")
    had = SparkSession.getActiveSession() is not None
    progress(f"analysis: starting Spark ({resolve_master(spark_master)})" if not had else "analysis: reusing Spark")
    spark = spark_session(spark_master)
    try:
        if len(run_dirs) == 1:
            return [analyze_run(str(run_dirs[0]), spark_master=spark_master, progress=progress, spark=spark,
                                reuse=reuse)]
        from testbed.analysis.job import analyze_batch

        # the checks every run shares and the metrics: one set of Spark jobs for the whole batch
        out = analyze_batch([RunDir(d).path for d in run_dirs], spark=spark, progress=progress, reuse=reuse)
        for d in run_dirs:
            RunDir(d).update_manifest(status="analyzed")
        return out
    finally:
        if not had:
            spark.stop()


def _analyze_all(runs: list[RunDir], spark_master: str | None, progress: Progress) -> None:
    """Analyse several runs in one Spark session (started once; stopped only if we started it)."""
    analyze_runs([str(rd.path) for rd in runs], spark_master=spark_master, progress=progress)


def wipe(progress: Progress = _quiet, runs_dir: str | None = None) -> list[str]:
    """Remove everything any testbed run ever made: processes here, labeled containers/networks/volumes
    on the Docker engine, the run files and processes on every host the ansible provider used, and the
    temporary directories that killed testbed processes left here (``testbed.runs.scratch``)."""
    from testbed.providers.local.provider import LocalProvider

    removed = LocalProvider.wipe(progress)
    for name, module, cls in (("docker", "testbed.providers.docker.provider", "DockerProvider"),
                              ("ansible", "testbed.providers.ansible.provider", "AnsibleProvider")):
        try:
            import importlib

            removed += getattr(importlib.import_module(module), cls).wipe(progress)
        except ImportError as e:  # the provider's extra is not installed: it made nothing
            progress(f"{name}: not installed ({e.name})")
        except ProviderError as e:
            progress(f"{name}: {e}")
    from testbed.runs import scratch

    removed += scratch.remove_leftovers(progress)  # temporary directories of killed analyses / ansible runs
    root = runs_root(runs_dir)
    f = root / ".active"
    if f.exists():
        f.unlink()
    return removed


def image_build(*, base: str | None = None, offline_base: bool = False, progress: Progress = _quiet) -> str:
    from testbed.providers.image import build_image

    return build_image(base=base, offline_base=offline_base, progress=progress)


__all__ = [
    "parse_set", "plans", "validate", "graph", "up", "down", "status", "log_lines", "inject", "run", "run_one",
    "analyze_run", "analyze_runs", "run_checks", "wipe", "image_build", "bring_up", "schedule", "teardown",
    "Session",
]
