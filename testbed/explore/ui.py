"""The one progress display of ``testbed explore``: a bar with the ETA, a line per case and per
shrink step (plain timestamped lines without a terminal)."""

from __future__ import annotations

from typing import Any

from testbed import ui


class LiveExplore(ui.Live):
    """Phases: one per case (``--runs N``; learned durations) or the budget (``--budget``: exact)."""

    def __init__(self, runs: int | None, budget: str | None, **kw: Any) -> None:
        from testbed.explore.runner import parse_budget

        b = parse_budget(budget) if budget else None
        if b is not None:
            eta = ui.ETA([("budget", b)])
        else:
            eta = ui.ETA([(f"case#{i}", None) for i in range(runs or 10)], history_key="explore", guess=30.0)
        super().__init__("explore", eta, **kw)
        self._runs = runs or 10
        self._budget = b is not None

    def __enter__(self) -> "LiveExplore":
        super().__enter__()
        if self._budget:
            self.phase("budget", "exploring")
        return self

    def event(self, e: dict[str, Any]) -> None:
        kind, phase = e.get("kind"), e.get("phase")
        if kind == "case" and phase == "start":
            if not self._budget:
                self.phase(f"case#{e['index']}", f"case {e['index'] + 1}/{self._runs}")
            self.line(f"case {e['index']}: {'; '.join(e['faults']) or 'no fault'}")
        elif kind == "case" and phase == "end":
            v = e["verdict"]
            what = {"ok": "[green]ok[/green]", "violation": f"[red]VIOLATION[/red] {', '.join(v['failed'])}",
                    "rejected": "[yellow]rejected by the format (a generator bug)[/yellow]"}.get(
                v["status"], f"[yellow]error[/yellow] {v.get('error')}")
            cached = " (cached)" if v.get("cached") else ""
            took = f" in {v['run_s']:.0f}s" if v.get("run_s") else ""
            self.line(f"case {e['index']}: {what}{took}{cached}")
        elif kind == "shrink" and phase == "start":
            self.phase(f"shrink-{e['property']}", f"shrinking the case that violates {e['property']}")
        elif kind == "shrink" and phase == "try":
            verdict = {True: "still fails", False: "passes", None: "no verdict"}[e["verdict"]]
            self.line(f"  try {'; '.join(e['faults']) or 'no fault'}: {verdict}")
