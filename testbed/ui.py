"""Terminal presentation: progress lines, the live run display, status tables. Controller side only."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

console = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def progress_line(msg: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {msg}")


def fault_line(e: dict[str, Any]) -> str:
    who = " ".join(e.get("target") or []) or " | ".join(",".join(g) for g in e.get("groups") or [])
    delta = ""
    if e.get("actual_s") is not None:
        delta = f"planned {e['planned_s']:.3f}s actual {e['actual_s']:.3f}s (+{(e['actual_s'] - e['planned_s']) * 1000:.1f} ms)"
    colour = {"done": "green", "failed": "red", "skipped": "yellow"}.get(e.get("status", ""), "white")
    err = f" [red]{e['error']}[/red]" if e.get("error") else ""
    return f"[bold]{e['op']}[/bold] {who}  {delta}  [{colour}]{e.get('status')}[/{colour}]{err}"


class LiveRun:
    """The live display of ``testbed run``: phases, a workload bar, each fault as it fires."""

    def __init__(self) -> None:
        self.interactive = console.is_terminal
        self._progress: Progress | None = None
        self._task = None
        self._t0 = 0.0
        self._stop = threading.Event()

    def line(self, msg: str) -> None:
        if self._progress is not None:
            self._progress.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {msg}")
        else:
            progress_line(msg)

    def event(self, e: dict[str, Any]) -> None:
        kind = e.get("kind")
        if kind == "workload" and e.get("phase") == "start":
            self._start_bar(float(e["duration_s"]))
            self.line(f"workload started ({e['duration_s']:g}s)")
        elif kind == "workload" and e.get("phase") == "end":
            self._stop_bar()
            self.line("workload finished")
        elif kind == "fault":
            self.line(fault_line(e))
        elif kind == "restarted":
            self.line(f"{e['node']} is back and has its link state and workload again")
        elif kind == "error":
            self.line(f"[red]{e.get('node', '')}: {e.get('error')}[/red]")

    def _start_bar(self, duration: float) -> None:
        if not self.interactive:
            return
        self._progress = Progress(TextColumn("workload"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f}s"),
                                  TimeRemainingColumn(), console=console, transient=True)
        self._task = self._progress.add_task("workload", total=duration)
        self._t0 = time.monotonic()
        self._progress.start()
        self._stop.clear()

        def tick() -> None:
            while not self._stop.wait(0.25):
                if self._progress is not None:
                    self._progress.update(self._task, completed=min(duration, time.monotonic() - self._t0))

        threading.Thread(target=tick, daemon=True).start()

    def _stop_bar(self) -> None:
        self._stop.set()
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


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
