"""What a check, metric or figure sees: the ingested history plus the run's plan and manifest.

Checks read only this (Jepsen-style: the history, nothing live), so a run can be
re-analysed later from its run directory alone.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from testbed.analysis.timeline import FaultWindow, fault_windows

DEFAULT_SETTLE_S = 1.0
DEFAULT_TRAVEL_MARGIN_S = 2.0
DEFAULT_FAULT_MARGIN_S = 2.0


@dataclass
class AnalysisOptions:
    settle_s: float | None = None  # None = plan params["settle"], else 1 s
    travel_margin_s: float = DEFAULT_TRAVEL_MARGIN_S
    fault_margin_s: float = DEFAULT_FAULT_MARGIN_S


@dataclass
class AnalysisContext:
    spark: SparkSession
    run_dir: Path
    plan: dict[str, Any]  # plan.json as loaded
    manifest: dict[str, Any]
    events: MutableMapping[str, DataFrame]  # ingest.Frames: each read on first use
    options: AnalysisOptions = field(default_factory=AnalysisOptions)
    windows: list[FaultWindow] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)  # shared between phases (check details, metrics)

    @classmethod
    def build(cls, spark, run_dir, plan, manifest, events, options=None) -> "AnalysisContext":
        return cls(spark, Path(run_dir), plan, manifest, events, options or AnalysisOptions(),
                   fault_windows(manifest, plan))

    @property
    def protocol(self) -> str:
        return str(self.plan.get("protocol", ""))

    def df(self, ev: str) -> DataFrame:
        """The ingested events of one type; an empty, correctly typed DataFrame when the run has none."""
        if ev not in self.events:
            from testbed.analysis.ingest import empty_events

            self.events[ev] = empty_events(self.spark, ev)
        return self.events[ev]

    def has(self, ev: str) -> bool:
        return ev in self.events

    @property
    def settle_s(self) -> float:
        if self.options.settle_s is not None:
            return float(self.options.settle_s)
        v = (self.plan.get("params") or {}).get("settle")
        return float(v) if isinstance(v, (int, float)) else DEFAULT_SETTLE_S

    @property
    def end_s(self) -> float:
        """End of the workload, seconds from t0: manifest ``workload_end_s`` or ``duration_s``, else the plan's."""
        for k in ("workload_end_s", "duration_s"):
            v = self.manifest.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
        return float(self.plan.get("duration_s", 0.0))

    def release(self) -> None:
        """Unpersist every DataFrame a phase cached in ``results`` (alone or in a tuple/list)."""
        for v in self.results.values():
            for x in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(x, DataFrame) and x.is_cached:
                    x.unpersist()

    def window_rows(self) -> list[tuple[int, float, float, str]]:
        """(fault, lo, hi, source): attribution windows (planned U actual, widened by the fault margin)."""
        rows = []
        for w in self.windows:
            if w.attributable:
                lo, hi = w.attribution_window(self.options.fault_margin_s)
                rows.append((w.fault, float(lo), float(hi), w.source or "/".join(w.ops)))
        return rows

    def windows_df(self) -> DataFrame:
        """[fault, lo, hi, source]: :meth:`window_rows` as a DataFrame."""
        return self.spark.createDataFrame(self.window_rows(), "fault int, lo double, hi double, source string")
