"""Terminal presentation: progress lines, the live run display, status tables. Controller side only."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

console = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def progress_line(msg: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {msg}", soft_wrap=True)  # one line per message in logs


def fault_line(e: dict[str, Any]) -> str:
    who = " ".join(e.get("target") or []) or " | ".join(",".join(g) for g in e.get("groups") or [])
    delta = ""
    if e.get("actual_s") is not None:
        delta = f"planned {e['planned_s']:.3f}s actual {e['actual_s']:.3f}s (+{(e['actual_s'] - e['planned_s']) * 1000:.1f} ms)"
    colour = {"done": "green", "failed": "red", "skipped": "yellow"}.get(e.get("status", ""), "white")
    err = f" [red]{e['error']}[/red]" if e.get("error") else ""
    return f"[bold]{e['op']}[/bold] {who}  {delta}  [{colour}]{e.get('status')}[/{colour}]{err}"


# -- progress with an ETA -------------------------------------------------------------
def eta_history_path() -> Path:
    """Where observed phase durations are kept ($TESTBED_ETA_HISTORY, default ~/.cache/testbed/eta.json)."""
    env = os.environ.get("TESTBED_ETA_HISTORY")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "testbed" / "eta.json"


def format_duration(s: float | None) -> str:
    """``75.2`` -> ``1m15s``; ``None`` -> ``?``."""
    if s is None:
        return "?"
    s = max(0, int(round(s)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class ETA:
    """Time left in a job made of phases in a known order, each with an expected duration.

    An expectation is exact where the job knows it (the workload's duration, the
    settle time) and learned elsewhere: ``history_key`` names the job, and every
    finished phase's duration is kept (an average leaning on recent runs) in
    ``eta_history_path()``; a phase never seen before uses ``guess``. The time
    left is what the current phase has left of its expectation (never below zero)
    plus the expectations of the phases still to come. Reusable: ``testbed
    reproduce`` can give each run of its grid a phase.
    """

    def __init__(self, phases: list[tuple[str, float | None]], *, history_key: str | None = None,
                 guess: float = 5.0, clock=time.monotonic) -> None:
        self.history_key = history_key
        self._clock = clock
        self._hist = self._load() if history_key else {}
        self.phases = [name for name, _ in phases]
        self.expected = {name: (exp if exp is not None else self._learned(name, guess)) for name, exp in phases}
        self.exact = {name for name, exp in phases if exp is not None}
        self.current: str | None = None
        self._t_phase = self._t0 = clock()
        self.actual: dict[str, float] = {}
        self.skipped: set[str] = set()

    # history -------------------------------------------------------------------
    def _load(self) -> dict[str, Any]:
        try:
            return json.loads(eta_history_path().read_text())
        except (OSError, ValueError):
            return {}

    @staticmethod
    def _base(name: str) -> str:
        return name.split("#", 1)[0]  # "up#2" (the second run's bring-up) learns from "up"

    def _learned(self, name: str, guess: float) -> float:
        v = (self._hist.get(self.history_key or "") or {}).get(self._base(name))
        return float(v) if isinstance(v, (int, float)) else guess

    def save(self) -> None:
        """Fold the observed durations of the finished, not exactly known, phases into the history."""
        if not self.history_key:
            return
        hist = self._load()
        mine = hist.setdefault(self.history_key, {})
        for name, d in self.actual.items():
            if name in self.exact or name in self.skipped:
                continue
            b = self._base(name)
            old = mine.get(b)
            mine[b] = round(d if not isinstance(old, (int, float)) else 0.5 * old + 0.5 * d, 3)
        try:
            path = eta_history_path()
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(hist, indent=1, sort_keys=True))
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only home: estimates stay guesses

    # progress ------------------------------------------------------------------
    def enter(self, phase: str) -> None:
        """Phase ``phase`` starts now; the current one (and any skipped before it) are finished."""
        now = self._clock()
        if self.current is not None:
            self.actual[self.current] = now - self._t_phase
        if phase in self.phases:
            for name in self.phases[: self.phases.index(phase)]:
                if name not in self.actual:  # never entered (e.g. no settle time): nothing left, nothing learned
                    self.actual[name] = 0.0
                    self.skipped.add(name)
        self.current = phase
        self._t_phase = now

    def finish(self) -> None:
        if self.current is not None and self.current not in self.actual:
            self.actual[self.current] = self._clock() - self._t_phase
        self.current = None
        self.save()

    def elapsed(self) -> float:
        return self._clock() - self._t0

    def remaining(self) -> float:
        now = self._clock()
        left = 0.0
        for name in self.phases:
            if name in self.actual:
                continue
            exp = self.expected.get(name, 0.0)
            left += max(exp - (now - self._t_phase), 0.0) if name == self.current else exp
        return left

    def fraction(self) -> float:
        el, left = self.elapsed(), self.remaining()
        return el / (el + left) if el + left > 0 else 1.0


class Live:
    """One live line with a bar and the ETA on a terminal; plain timestamped lines otherwise.

    ``line(msg)`` prints a message (above the bar on a terminal); ``phase(name)``
    moves the ETA on (and, without a terminal, prints one line with the time left).
    Use as a context manager around the long call.
    """

    def __init__(self, title: str, eta: ETA | None = None, *, interactive: bool | None = None,
                 stream: Console | None = None) -> None:
        self.title = title
        self.eta = eta
        self.console = stream or console
        self.interactive = self.console.is_terminal if interactive is None else interactive
        self._progress: Progress | None = None
        self._task = None
        self._stop = threading.Event()
        self._desc = title
        self._ok = False

    def __enter__(self) -> "Live":
        if self.interactive:
            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                      TextColumn("{task.fields[clock]}"), console=self.console, transient=True)
            self._task = self._progress.add_task(self._desc, total=1000, clock="")
            self._progress.start()
            threading.Thread(target=self._tick, daemon=True).start()
        return self

    def __exit__(self, exc_type, *_: Any) -> None:
        self._stop.set()
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self.eta is not None:
            if exc_type is None:
                self.eta.finish()  # only a finished job teaches the history
            else:
                self.eta.current = None

    def _clock_text(self) -> str:
        if self.eta is None:
            return ""
        return f"{format_duration(self.eta.elapsed())} elapsed, ETA {format_duration(self.eta.remaining())}"

    def _tick(self) -> None:
        while not self._stop.wait(0.25):
            p = self._progress
            if p is not None and self._task is not None:
                frac = self.eta.fraction() if self.eta is not None else 0.0
                p.update(self._task, completed=int(frac * 1000), description=self._desc, clock=self._clock_text())

    def line(self, msg: str) -> None:
        if self._progress is not None:
            self._progress.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {msg}")
        else:
            self.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {msg}", soft_wrap=True)

    def phase(self, name: str, desc: str | None = None) -> None:
        if self.eta is not None:
            self.eta.enter(name)
        self._desc = f"{self.title}: {desc or name}"
        if self._progress is None and self.eta is not None:
            self.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {escape(desc or name)}: "
                               f"about {format_duration(self.eta.remaining())} left", soft_wrap=True)


ANALYZE_PHASES = [("ingest", None), ("checks", None), ("figures", None), ("report", None)]


class LiveAnalyze(Live):
    """``testbed analyze``: phases follow the analysis job's own progress lines (see analysis/job.py)."""

    NEXT = {"ingest:": "checks", "metrics:": "figures", "figures:": "report"}
    DESC = {"checks": "running the checks and metrics", "figures": "drawing the figures",
            "report": "writing the reports"}

    def __init__(self, **kw: Any) -> None:
        super().__init__("analyze", ETA(ANALYZE_PHASES, history_key="analyze", guess=8.0), **kw)

    def __enter__(self) -> "LiveAnalyze":
        super().__enter__()
        self.phase("ingest", "starting Spark, ingesting the logs")
        return self

    def line(self, msg: str) -> None:
        super().line(msg)
        for prefix, nxt in self.NEXT.items():
            if msg.startswith(prefix):
                self.phase(nxt, self.DESC[nxt])


class LiveRun(Live):
    """The live display of ``testbed run``: phases with an ETA, a workload bar, each fault as it fires.

    ``plans`` (the run's plans, one per sweep point) make the phases: per run bring-up,
    settle, workload (+ drain), collect and down; then the analysis of them all.
    """

    def __init__(self, plans: list[Any] | None = None, *, analyze: bool = True, drain_s: float = 2.0,
                 **kw: Any) -> None:
        phases: list[tuple[str, float | None]] = []
        self._n = len(plans or [])
        for i, p in enumerate(plans or []):
            settle = float(p.params.get("settle", 1.0)) if isinstance(p.params, dict) else 1.0
            phases += [(f"up#{i}", None), (f"settle#{i}", settle), (f"workload#{i}", float(p.duration_s) + drain_s),
                       (f"collect#{i}", None)]
        if analyze and plans:
            phases.append((f"analyze#{len(plans)}", None))
        key = f"run/{plans[0].provider}" if plans else None  # bring-up and collect differ by provider
        super().__init__("run", ETA(phases, history_key=key, guess=5.0) if plans else None, **kw)
        self._i = -1

    def _tag(self, name: str, i: int) -> str:
        return f"{name}#{i}"

    def line(self, msg: str) -> None:
        super().line(msg)
        if msg.startswith("settling ") and self._i >= 0:
            self.phase(self._tag("settle", self._i), f"settling{self._of()}")

    def _of(self) -> str:
        return f" (run {self._i + 1}/{self._n})" if self._n > 1 else ""

    def event(self, e: dict[str, Any]) -> None:
        kind = e.get("kind")
        if kind == "phase" and e.get("phase") == "up":
            self._i += 1
            self.phase(self._tag("up", self._i), f"bringing up{self._of()}")
        elif kind == "phase" and e.get("phase") == "collect":
            self.phase(self._tag("collect", self._i), f"collecting logs, down{self._of()}")
        elif kind == "phase" and e.get("phase") == "analyze":
            self.phase(f"analyze#{self._n}", "analysis (Spark)")
        elif kind == "workload" and e.get("phase") == "start":
            self.phase(self._tag("workload", self._i), f"workload {e['duration_s']:g}s{self._of()}")
            self.line(f"workload started ({e['duration_s']:g}s)")
        elif kind == "workload" and e.get("phase") == "end":
            self.line("workload finished")
        elif kind == "fault":
            self.line(fault_line(e))
        elif kind == "restarted":
            self.line(f"{e['node']} is back and has its link state and workload again")
        elif kind == "error":
            self.line(f"[red]{e.get('node', '')}: {e.get('error')}[/red]")


def status_table(st: dict[str, Any]) -> None:
    el = st.get("elapsed_s")
    when = f"{el:.1f}s of {st['duration_s']:g}s" if el is not None and el >= 0 else "workload not started"
    out.print(f"[bold]{st['run_id']}[/bold]  status {st['status']}  provider {st['provider']}  "
              f"emulation {st.get('emulation')}  {when}")
    t = Table(show_edge=False)
    for c in ("node", "role", "site", "host", "state", "detail", "msgs"):
        t.add_column(c, no_wrap=True)
    colours = {"running": "green", "paused": "yellow", "stopped": "red", "crashed": "red"}
    for n in st["nodes"]:
        info = n.get("info") or {}
        cnt = info.get("counters") or {}
        counters = f"out {cnt.get('sent', 0)} in {cnt.get('received', 0)}" if cnt else ""
        if info.get("stalled"):
            counters += " STALLED"
        if info.get("down"):
            counters += f" down:{','.join(sorted(info['down']))}"
        c = colours.get(n["state"], "white")
        t.add_row(n["node"], n["role"], n["site"], n["host"], f"[{c}]{n['state']}[/{c}]", n["detail"], counters)
    out.print(t)
    if st["fired"]:
        out.print("[bold]faults fired[/bold]")
        for e in st["fired"]:
            out.print("  " + fault_line(e))
    nxt = st.get("next")
    if nxt:
        out.print(f"[bold]next[/bold]: {nxt['op']} {' '.join(nxt['target'])} at {nxt['planned_s']:.1f}s "
                  f"({st['pending']} pending)")
    elif st["fired"]:
        out.print("no fault pending")


def hosts_table(rows: list[dict[str, Any]]) -> None:
    """``testbed hosts``: what each host has and what a run would use there."""
    t = Table(show_edge=False)
    for c in ("host", "address", "nodes", "python", "docker", "image", "tc", "netem", "root", "runs nodes as"):
        t.add_column(c, no_wrap=True)
    for r in rows:
        yes = "[green]yes[/green]"
        no = "[dim]no[/dim]"
        root = "root" if r["uid"] == 0 else ("sudo" if r["become"] else no)
        runs = "[cyan]containers[/cyan]" if r["runtime"] == "docker" else "processes"
        t.add_row(r["host"], str(r["address"]), str(r["nodes"]), str(r["python"]), r["docker"] or no,
                  yes if r["image"] else no, yes if r["tc"] else no, yes if r["sch_netem"] else no, root, runs)
    out.print(t)
    for r in rows:
        out.print(f"  {r['host']}: {r['runtime_reason']}")
    if rows:
        out.print(f"[bold]link emulation[/bold]: {rows[0]['emulation']} ({rows[0]['emulation_reason']})")
        if rows[0].get("image_ref") and any(r["runtime"] == "docker" and not r["image"] for r in rows):
            out.print(f"`up` ships the node image {rows[0]['image_ref']} to the container hosts that lack it")


def plain(msg: str) -> None:
    print(msg, file=sys.stdout, flush=True)
