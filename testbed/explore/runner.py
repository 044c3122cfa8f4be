"""``testbed explore``: draw cases, run each with the protocol's checks, shrink what fails.

An exploration lives in ``<out>/<id>/`` (``out`` default ``explorations``)::

    exploration.json        the settings (topology, seed, kinds, ...) -- what --resume reads
    base.yaml               the topology explored (rendered; its own faults removed)
    cases/0007/case.yaml    every case as a topology file `testbed run` takes
    cases/0007/verdict.json its verdict: checks, failed properties, run directory, times
    shrink/<property>/NNN/  the shrinker's candidate runs (case.yaml + verdict.json)
    minimal/<property>.yaml the minimal failing case (header: how it was found; `testbed run` it)
    minimal/<property>.json the shrink: original case, steps taken, runs
    runs/<case>/<run-id>/   the run directories (logs, checks.json), one runs directory per case
    summary.json / .md      runs, violations per property, time per run, minimal cases

Resumable: a case (or shrink candidate) whose verdict is on disk is not run again; the
verdict cache is keyed by the sha256 of the case's whole topology, and cases are drawn
deterministically from the seed and the stored ``base.yaml``, so ``--resume ID`` continues
where a run stopped (a run that errored is run again).

Each case runs as ``testbed run CASE --no-analyze`` in a subprocess (``jobs`` at a time);
the checks run in this process in one Spark session kept for the whole exploration
(:mod:`testbed.explore.check`). The first case that violates a property is shrunk
(:mod:`testbed.explore.shrink`); later cases violating the same property are recorded.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from testbed.errors import TopologyError, UsageError
from testbed.explore.files import first_problem, load_base, parse, to_yaml, validate_text
from testbed.explore.generate import (ALL_FAULT_KINDS, FAULT_KINDS, VARY_KINDS, Case, Shape, apply_variant, base_topology,
                                      draw_case, nothing_to_vary, tail_s)
from testbed.explore.shrink import case_key, shrink

Progress = Callable[[str], None]
OnEvent = Callable[[dict[str, Any]], None]
RUN_TIMEOUT_EXTRA_S = 180.0
PROBES = 5


def _quiet(_: Any) -> None:
    pass


def parse_kinds(text: str | None, allowed: tuple[str, ...], option: str,
                default: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """``"crash,cut"`` -> ("crash", "cut"); unknown names are a UsageError naming the allowed ones.
    Without ``text``: ``default`` (else every allowed kind for --faults, none for --vary)."""
    if text is None:
        if default is not None:
            return default
        return allowed if option == "--faults" else ()
    out = []
    for k in (x.strip() for x in text.split(",")):
        if not k:
            continue
        if k not in allowed:
            raise UsageError(f"{option} {k!r}: one of {', '.join(allowed)}")
        if k not in out:
            out.append(k)
    if option == "--faults" and not out:
        raise UsageError(f"--faults: give at least one of {', '.join(allowed)}")
    return tuple(out)


def parse_budget(text: str | None) -> float | None:
    """``30m`` / ``90s`` / ``1h`` -> seconds."""
    if text is None:
        return None
    t = text.strip()
    mult = {"s": 1, "m": 60, "h": 3600}.get(t[-1:]) if t else None
    try:
        v = float(t[:-1]) * mult if mult else None
    except ValueError:
        v = None
    if v is None or v <= 0:
        raise UsageError(f"--budget {text!r}: a time with a unit, e.g. 90s, 30m, 2h")
    return v


@dataclass
class Settings:
    topology: str
    set_vars: dict[str, Any]
    seed: int
    faults: tuple[str, ...]
    vary: tuple[str, ...]
    provider: str | None
    jobs: int
    max_faults: int
    shrink_runs: int

    def to_dict(self) -> dict[str, Any]:
        return {"topology": self.topology, "set": self.set_vars, "seed": self.seed, "faults": list(self.faults),
                "vary": list(self.vary), "provider": self.provider, "jobs": self.jobs,
                "max_faults": self.max_faults, "shrink_runs": self.shrink_runs}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Settings":
        return cls(d["topology"], d.get("set") or {}, int(d["seed"]), tuple(d["faults"]), tuple(d["vary"]),
                   d.get("provider"), int(d.get("jobs", 1)), int(d.get("max_faults", 4)),
                   int(d.get("shrink_runs", 40)))


@dataclass
class Result:
    path: Path
    summary: dict[str, Any]
    minimal: dict[str, Path] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.summary["violations"]


def usable_variants(base: dict[str, Any], vary: tuple[str, ...], where: str) -> tuple[tuple[str, ...], list[str]]:
    """The ``--vary`` kinds this topology can take, and a message for each one skipped: nothing to
    vary, or the protocol rejects a varied topology (probed with a few draws, validated)."""
    keep, skipped = [], []
    for k in vary:
        why = nothing_to_vary(base, k)
        if why is None:
            for j in range(PROBES):
                t, _ = apply_variant(base, (k,), random.Random(f"probe:{k}:{j}"))
                try:
                    validate_text(to_yaml(t), where)
                except TopologyError as e:
                    why = f"the protocol rejects a varied topology ({first_problem(e)})"
                    break
        if why is None:
            keep.append(k)
        else:
            skipped.append(f"--vary {k}: skipped: {why}")
    return tuple(keep), skipped


class Exploration:
    def __init__(self, path: Path, settings: Settings, *, runs: int | None, budget_s: float | None,
                 spark_master: str | None, progress: Progress, on_event: OnEvent, first: bool = False) -> None:
        self.path = path
        self.first = first
        self.s = settings
        self.runs = runs
        self.budget_s = budget_s
        self.spark_master = spark_master
        self.progress = progress
        self.on_event = on_event
        self._spark = None
        self._own_spark = False
        self.t0 = time.monotonic()
        stored = path / "base.yaml"
        if stored.exists():  # resuming: the topology as explored, whatever the file says now
            self.base = parse(stored.read_text())
        else:
            self.base = base_topology(load_base(settings.topology, settings.set_vars)[0])
        self.name = str(self.base.get("name", "case"))
        self.vary, skipped = usable_variants(self.base, settings.vary, str(path / "base.yaml"))
        for m in skipped:
            progress(m)
        shape = Shape.of(self.base)
        self.kinds = tuple(k for k in settings.faults if shape.can(k))
        for k in settings.faults:
            if k not in self.kinds:
                progress(f"--faults {k}: skipped: the topology has nothing to {k}")
        self.skipped = skipped
        if not self.kinds:
            raise UsageError(f"{settings.topology}: none of the fault kinds {', '.join(settings.faults)} applies")
        if not stored.exists():
            stored.write_text(to_yaml(self.base, "the topology explored (rendered; its own faults are replaced "
                                                 "by each case's)"))

    # -- running one case --------------------------------------------------------------
    def _cache(self, key: str) -> Path:
        return self.path / "verdicts" / f"{key}.json"

    def _run(self, case: Case, case_dir: Path) -> dict[str, Any]:
        """Write the case, run it in a subprocess (no analysis); -> a verdict without checks yet."""
        case_dir.mkdir(parents=True, exist_ok=True)
        f = case_dir / "case.yaml"
        text = to_yaml(case.topology(), self._header(case))
        f.write_text(text)
        v: dict[str, Any] = {"case": case.index, "key": case_key(case), "seed": case.seed, "file": str(f),
                             "faults": [x.describe() for x in case.faults], "entries": case.n_entries,
                             "varied": case.varied, "run_dir": None, "status": "error", "failed": [],
                             "checks": [], "error": None, "run_s": None, "check_s": None}
        try:
            plan = validate_text(text, str(f))
        except TopologyError as e:  # a generator bug: recorded, never run
            v.update(status="rejected", error=str(e))
            return v
        runs_dir = self.path / "runs" / case_dir.relative_to(self.path).as_posix().replace("/", "-")
        cmd = [sys.executable, "-m", "testbed.cli", "--runs-dir", str(runs_dir), "run", str(f),
               "--no-analyze", "--json"]
        if self.s.provider:
            cmd += ["--provider", self.s.provider]
        t = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True,
                               timeout=plan.duration_s + RUN_TIMEOUT_EXTRA_S, env=self._env())
        except subprocess.TimeoutExpired:
            v.update(error=f"the run did not finish in {plan.duration_s + RUN_TIMEOUT_EXTRA_S:g}s",
                     run_s=round(time.monotonic() - t, 3))
            # stop what the killed run left up: its runs directory is this case's alone
            subprocess.run([sys.executable, "-m", "testbed.cli", "--runs-dir", str(runs_dir), "down", "--all"],
                           capture_output=True, timeout=120, env=self._env())
            return v
        v["run_s"] = round(time.monotonic() - t, 3)
        (case_dir / "run.log").write_text(p.stderr[-20000:])
        try:
            doc = json.loads(p.stdout)
            v["run_dir"] = doc["runs"][0]["run_dir"]
        except (ValueError, KeyError, IndexError, TypeError):
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            v["error"] = f"testbed run exited {p.returncode}: {lines[-1] if lines else 'no output'}"
        return v

    @staticmethod
    def _env() -> dict[str, str]:
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parents[2])  # the checkout / site dir holding this testbed
        env["PYTHONPATH"] = os.pathsep.join([here, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
        return env

    def _check(self, v: dict[str, Any]) -> dict[str, Any]:
        if v["run_dir"] is None:
            return v
        from testbed.explore.check import check_run

        t = time.monotonic()
        try:
            checks = check_run(v["run_dir"], self._spark_session())
        except Exception as e:  # noqa: BLE001 - Spark/Java failures too: the case has no verdict
            v.update(status="error", error=f"checks: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            return v
        v["check_s"] = round(time.monotonic() - t, 3)
        v["checks"] = [{k: c.get(k) for k in ("name", "passed", "violations", "attributed", "examples")}
                       for c in checks]
        v["failed"] = [c["name"] for c in checks if not c.get("passed")]
        v["status"] = "violation" if v["failed"] else "ok"
        return v

    def _spark_session(self):
        if self._spark is None:
            from pyspark.sql import SparkSession

            from testbed.analysis.session import SMALL_DATA_CONF, SMALL_DATA_JAVA_OPTS, spark_session

            self._own_spark = SparkSession.getActiveSession() is None
            self.progress("starting Spark for the checks")
            # cases are short runs: the small-data settings (speed only, never results; session.py)
            self._spark = spark_session(self.spark_master, app="testbed-explore", conf=SMALL_DATA_CONF,
                                        java_opts=SMALL_DATA_JAVA_OPTS)
        return self._spark

    def close(self) -> None:
        if self._spark is not None and self._own_spark:
            self._spark.stop()
        self._spark = None

    def evaluate(self, items: list[tuple[Case, Path]]) -> list[dict[str, Any]]:
        """Verdicts of the cases (cached ones read back); up to ``jobs`` runs at a time."""
        out: list[dict[str, Any] | None] = [None] * len(items)
        todo = []
        for i, (case, d) in enumerate(items):
            cached = self._cache(case_key(case))
            if cached.exists():
                out[i] = json.loads(cached.read_text())
                out[i]["cached"] = True  # type: ignore[index]
            else:
                todo.append(i)
        if todo:
            with ThreadPoolExecutor(max_workers=max(1, self.s.jobs)) as pool:
                futs = {i: pool.submit(self._run, items[i][0], items[i][1]) for i in todo}
                for i in todo:  # in order: checks are serial, in one Spark session
                    v = self._check(futs[i].result())
                    d = items[i][1]
                    (d / "verdict.json").write_text(json.dumps(v, indent=1, default=str))
                    if v["status"] != "error":  # a run that failed is tried again on resume
                        self._cache(v["key"]).parent.mkdir(exist_ok=True)
                        self._cache(v["key"]).write_text(json.dumps(v, indent=1, default=str))
                    out[i] = v
        return out  # type: ignore[return-value]

    def _header(self, case: Case) -> str:
        return (f"testbed explore {self.path.name}: case {case.index} of seed {self.s.seed} "
                f"(topology {self.s.topology})\nreproduce: testbed run <this file>")

    # -- the exploration ------------------------------------------------------------------
    def over_budget(self, per_case_s: float = 0.0) -> bool:
        return self.budget_s is not None and time.monotonic() - self.t0 + per_case_s > self.budget_s

    def explore(self) -> Result:
        verdicts: list[dict[str, Any]] = []
        minimal: dict[str, Path] = {}
        shrinks: dict[str, dict[str, Any]] = {}
        for f in sorted((self.path / "minimal").glob("*.json")):  # resume: shrinks done before
            d = json.loads(f.read_text())
            shrinks[d["property"]] = d
            minimal[d["property"]] = f.with_suffix(".yaml")
        i = 0
        jobs = max(1, self.s.jobs)
        while True:
            if self.runs is not None and i >= self.runs:
                break
            times = [v["run_s"] + (v["check_s"] or 0) for v in verdicts if v.get("run_s")]
            if self.over_budget(sum(times) / len(times) if times else 0.0):
                self.progress("budget spent: no new case")
                break
            n = jobs if self.runs is None else min(jobs, self.runs - i)
            batch = [draw_case(self.base, self.s.seed, k, kinds=self.kinds, vary=self.vary,
                               max_faults=self.s.max_faults) for k in range(i, i + n)]
            for c in batch:
                self.on_event({"kind": "case", "phase": "start", "index": c.index, "runs": self.runs,
                               "faults": [x.describe() for x in c.faults]})
            vs = self.evaluate([(c, self.path / "cases" / f"{c.index:04d}") for c in batch])
            for c, v in zip(batch, vs):
                verdicts.append(v)
                self.on_event({"kind": "case", "phase": "end", "index": c.index, "verdict": v})
                for prop in v["failed"]:
                    if prop not in shrinks and not self.over_budget():
                        shrinks[prop] = self._shrink(c, prop)
                        minimal[prop] = self.path / "minimal" / f"{prop}.yaml"
            i += n
            if self.first and any(v["failed"] for v in verdicts):
                self.progress("--first: stopping after the first violation")
                break
        summary = self._summary(verdicts, shrinks)
        return Result(self.path, summary, minimal)

    def _shrink(self, case: Case, prop: str) -> dict[str, Any]:
        d = self.path / "shrink" / prop
        counter = [0]
        self.progress(f"shrinking case {case.index} ({case.n_entries} fault entries) while {prop} fails")
        self.on_event({"kind": "shrink", "phase": "start", "property": prop, "index": case.index})

        def fails(cands: list[Case]) -> list[bool | None]:
            items = []
            for c in cands:
                counter[0] += 1
                items.append((c, d / f"{counter[0]:03d}"))
            vs = self.evaluate(items)
            out: list[bool | None] = []
            for c, v in zip(cands, vs):
                verdict = None if v["status"] in ("error", "rejected") else prop in v["failed"]
                self.on_event({"kind": "shrink", "phase": "try", "property": prop, "verdict": verdict,
                               "faults": [x.describe() for x in c.faults]})
                out.append(verdict)
            return out

        def step(why: str, c: Case) -> None:
            self.progress(f"  shrink {prop}: {why} -> still fails ({c.n_entries} fault entries)")

        res = shrink(case, fails, max_runs=self.s.shrink_runs, jobs=max(1, self.s.jobs), on_step=step,
                     stop=self.over_budget)
        m = res.case
        head = (f"testbed explore {self.path.name}: the minimal case found for property `{prop}`\n"
                f"(seed {self.s.seed}, case {case.index}; shrunk in {res.runs} run(s) from {case.n_entries} fault "
                f"entries to {m.n_entries}{'; the shrink budget ran out' if res.exhausted else ''})\n"
                f"topology explored: {self.s.topology}\n"
                f"reproduce: testbed run <this file>   (seed: {m.seed} is the seed of the failing run)")
        out = self.path / "minimal"
        out.mkdir(exist_ok=True)
        (out / f"{prop}.yaml").write_text(to_yaml(m.topology(), head))
        doc = {"property": prop, "case": case.index, "seed": m.seed, "runs": res.runs, "exhausted": res.exhausted,
               "steps": res.steps, "faults_before": [x.describe() for x in case.faults],
               "faults_after": [x.describe() for x in m.faults], "entries_before": case.n_entries,
               "entries_after": m.n_entries, "file": str(out / f"{prop}.yaml")}
        (out / f"{prop}.json").write_text(json.dumps(doc, indent=1))
        self.on_event({"kind": "shrink", "phase": "end", "property": prop, "result": doc})
        self.progress(f"minimal case for {prop}: {out / f'{prop}.yaml'} ({m.n_entries} fault entries: "
                      f"{'; '.join(doc['faults_after']) or 'none'})")
        return doc

    def _summary(self, verdicts: list[dict[str, Any]], shrinks: dict[str, dict[str, Any]]) -> dict[str, Any]:
        by_prop: dict[str, int] = {}
        for v in verdicts:
            for p in v["failed"]:
                by_prop[p] = by_prop.get(p, 0) + 1
        run_s = [v["run_s"] for v in verdicts if v.get("run_s") is not None]
        check_s = [v["check_s"] for v in verdicts if v.get("check_s") is not None]
        status: dict[str, int] = {}
        for v in verdicts:
            status[v["status"]] = status.get(v["status"], 0) + 1

        def stats(xs: list[float]) -> dict[str, float] | None:
            return {"mean": round(sum(xs) / len(xs), 3), "min": min(xs), "max": max(xs)} if xs else None

        doc = {
            "id": self.path.name, "settings": self.s.to_dict(), "fault_kinds": list(self.kinds),
            "vary": list(self.vary), "skipped": self.skipped, "quiet_tail_s": tail_s(Shape.of(self.base).duration),
            "cases": len(verdicts), "status": status, "violations": by_prop,
            "run_s": stats(run_s), "check_s": stats(check_s),
            "wall_s": round(time.monotonic() - self.t0, 3),
            "minimal": {p: {k: d[k] for k in ("file", "entries_after", "faults_after", "runs", "exhausted", "case")}
                        for p, d in sorted(shrinks.items())},
            "per_case": [{"case": v["case"], "status": v["status"], "failed": v["failed"], "faults": v["faults"],
                          "run_s": v["run_s"], "check_s": v["check_s"], "run_dir": v["run_dir"],
                          "error": v["error"]} for v in verdicts],
        }
        (self.path / "summary.json").write_text(json.dumps(doc, indent=1, default=str))
        (self.path / "summary.md").write_text(summary_markdown(doc))
        return doc


def _cell(text: str) -> str:
    """Text for a Markdown table cell (a partition's groups are written with ``|``)."""
    return text.replace("|", "\\|")


def summary_markdown(doc: dict[str, Any]) -> str:
    s = doc["settings"]
    lines = [f"# Exploration {doc['id']}", "",
             f"Topology `{s['topology']}`, seed {s['seed']}, faults {', '.join(doc['fault_kinds'])}, "
             f"vary {', '.join(doc['vary']) or 'nothing'}, quiet tail {doc['quiet_tail_s']:g}s, "
             f"provider {s['provider'] or 'the file’s'}, jobs {s['jobs']}.", ""]
    lines += [f"- {m}" for m in doc["skipped"]] + ([""] if doc["skipped"] else [])
    rs, cs = doc["run_s"], doc["check_s"]
    head = f"**{doc['cases']} cases** ({', '.join(f'{n} {k}' for k, n in sorted(doc['status'].items()))})"
    if rs:
        head += f"; time per run {rs['mean']:.1f}s (min {rs['min']:.1f}, max {rs['max']:.1f})"
    if cs:
        head += f"; checks {cs['mean']:.1f}s per case"
    lines += [head + f"; {doc['wall_s']:.0f}s in this session (a resume reads verdicts on disk back).", ""]
    lines += ["## Violations per property", ""]
    if doc["violations"]:
        lines += ["| property | cases | minimal case | fault entries |", "|---|---|---|---|"]
        for p, n in sorted(doc["violations"].items()):
            m = doc["minimal"].get(p)
            lines.append(f"| {p} | {n} | {m['file'] if m else '-'} | "
                         f"{_cell(str(m['entries_after']) + ': ' + '; '.join(m['faults_after'])) if m else '-'} |")
    else:
        lines.append("none")
    lines += ["", "## Cases", "", "| case | verdict | failed | faults | run s |", "|---|---|---|---|---|"]
    for c in doc["per_case"]:
        lines.append(f"| {c['case']} | {c['status']} | {', '.join(c['failed'])} | {_cell('; '.join(c['faults']))} | "
                     f"{c['run_s'] if c['run_s'] is not None else '-'} |")
    return "\n".join(lines) + "\n"


def explore(topology: str | None = None, *, runs: int | None = None, budget: str | None = None,
            seed: int | None = None, faults: str | None = None, vary: str | None = None,
            provider: str | None = None, jobs: int = 1, out: str = "explorations", resume: str | None = None,
            max_faults: int = 4, shrink_runs: int = 40, first: bool = False, set_vars: dict[str, Any] | None = None,
            spark_master: str | None = None, progress: Progress = _quiet, on_event: OnEvent = _quiet) -> Result:
    """Explore a topology (or resume exploration ``resume``); see the module docstring."""
    if runs is not None and budget is not None:
        raise UsageError("give --runs N or --budget TIME, not both")
    budget_s = parse_budget(budget)
    if runs is not None and runs < 1:
        raise UsageError("--runs: at least 1")
    if jobs < 1:
        raise UsageError("--jobs: at least 1")
    if shrink_runs < 0:
        raise UsageError("--shrink-runs: 0 or more (0: record violations without shrinking)")
    if resume is not None:
        path = Path(resume) if Path(resume).is_dir() else Path(out) / resume
        if not (path / "exploration.json").is_file():
            raise UsageError(f"--resume {resume}: no exploration there ({path / 'exploration.json'} is missing)")
        settings = Settings.from_dict(json.loads((path / "exploration.json").read_text()))
        if jobs != 1:
            settings.jobs = jobs
        progress(f"resuming exploration {path.name}")
    else:
        if topology is None:
            raise UsageError("a topology file (or --resume ID)")
        settings = Settings(str(Path(topology).resolve()), set_vars or {},
                            seed if seed is not None else random.randrange(1, 10**6),
                            parse_kinds(faults, ALL_FAULT_KINDS, "--faults", FAULT_KINDS), parse_kinds(vary, VARY_KINDS, "--vary"),
                            provider, jobs, max_faults, shrink_runs)
        if max_faults < 1:
            raise UsageError("--max-faults: at least 1")
        base = base_topology(load_base(settings.topology, settings.set_vars)[0])
        draw_case(base, settings.seed, 0, kinds=settings.faults, max_faults=max_faults)  # a run too short: say so now
        name = base.get("name", "case")
        path = Path(out) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-s{settings.seed}"
        k = 1
        while path.exists():
            k += 1
            path = Path(out) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-s{settings.seed}-{k}"
        path.mkdir(parents=True)
        (path / "exploration.json").write_text(json.dumps(settings.to_dict(), indent=1))
    if runs is None and budget_s is None:
        runs = 10
    if jobs > (os.cpu_count() or 1):
        progress(f"--jobs {jobs}: more than the {os.cpu_count()} cores here; runs will slow each other down")
    ex = Exploration(path, settings, runs=runs, budget_s=budget_s, spark_master=spark_master, progress=progress,
                     on_event=on_event, first=first)
    progress(f"exploration {path}: seed {settings.seed}, faults {', '.join(ex.kinds)}, "
             f"vary {', '.join(ex.vary) or 'nothing'}, " + (f"{runs} cases" if runs else f"budget {budget}"))
    try:
        return ex.explore()
    finally:
        ex.close()
