"""Metrics from the ingested history: delivery latency per site pair, delivered rate, per-fault counts.

Latency of one delivery = subscriber's receive time minus the publisher's send time
(``deliver.pub_t``), each corrected by its own host's clock offset (the ingest's
``t_corr = t - offset_ns`` for the receive side; the publisher's offset is
``publish.t - publish.t_corr`` of the same publisher client).
"""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from testbed.analysis.checks import COMPLETENESS
from testbed.analysis.context import AnalysisContext

CDF_POINTS = 201  # quantiles per site pair for the CDF figure


# -- transforms ---------------------------------------------------------------------
def publisher_clocks(publish: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """publish -> [publisher, pub_site, pub_offset_ns]: where each publisher client runs and its clock offset
    (``by``: extra key columns kept first, e.g. ``run_id`` over many runs)."""
    return (
        publish.select(*by, F.col("client").alias("publisher"), "site", (F.col("t") - F.col("t_corr")).alias("off"))
        .groupBy(*by, "publisher")
        .agg(F.first("site", ignorenulls=True).alias("pub_site"), F.max("off").alias("pub_offset_ns"))
        .select(*by, "publisher", "pub_site", "pub_offset_ns")
    )


def latencies(deliver: DataFrame, publish: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """-> [pub_site, sub_site, latency_ms, deliver_s] for every delivery (unknown site: '?')."""
    return (
        deliver.select(*by, "publisher", "pub_t", "t_corr", "site", "t_rel_s")
        .join(publisher_clocks(publish, by), on=[*by, "publisher"], how="left")
        .select(
            *by,
            F.coalesce("pub_site", F.lit("?")).alias("pub_site"),
            F.coalesce("site", F.lit("?")).alias("sub_site"),
            ((F.col("t_corr") - (F.col("pub_t") - F.coalesce("pub_offset_ns", F.lit(0)))) / F.lit(1e6))
            .alias("latency_ms"),
            F.col("t_rel_s").alias("deliver_s"),
        )
    )


def latency_summary(lat: DataFrame) -> DataFrame:
    """-> [pub_site, sub_site, count, mean_ms, p50_ms, p90_ms, p99_ms, max_ms] (exact percentiles)."""
    q = F.percentile(F.col("latency_ms"), F.array(F.lit(0.5), F.lit(0.9), F.lit(0.99)))
    return (
        lat.select("pub_site", "sub_site", "latency_ms")
        .groupBy("pub_site", "sub_site")
        .agg(F.count("*").alias("count"), F.mean("latency_ms").alias("mean_ms"), q.alias("q"),
             F.max("latency_ms").alias("max_ms"))
        .select("pub_site", "sub_site", "count", "mean_ms", F.col("q")[0].alias("p50_ms"),
                F.col("q")[1].alias("p90_ms"), F.col("q")[2].alias("p99_ms"), "max_ms")
        .orderBy("pub_site", "sub_site")
    )


def latency_quantiles(lat: DataFrame, points: int = CDF_POINTS) -> DataFrame:
    """-> [pub_site, sub_site, quantiles(array<double>)] at ``points`` evenly spaced probabilities."""
    probs = F.array(*[F.lit(i / (points - 1)) for i in range(points)])
    return (
        lat.select("pub_site", "sub_site", "latency_ms")
        .groupBy("pub_site", "sub_site")
        .agg(F.percentile_approx("latency_ms", probs, 10000).alias("quantiles"))
        .select("pub_site", "sub_site", "quantiles")
    )


def latency_stats(lat: DataFrame, points: int = CDF_POINTS, by: tuple[str, ...] = ()) -> DataFrame:
    """:func:`latency_summary` and :func:`latency_quantiles` in one aggregation (one scan of the
    deliveries): [pub_site, sub_site, count, mean_ms, p50_ms, p90_ms, p99_ms, max_ms, quantiles]."""
    q = F.percentile(F.col("latency_ms"), F.array(F.lit(0.5), F.lit(0.9), F.lit(0.99)))
    probs = F.array(*[F.lit(i / (points - 1)) for i in range(points)])
    return (
        lat.select(*by, "pub_site", "sub_site", "latency_ms")
        .groupBy(*by, "pub_site", "sub_site")
        .agg(F.count("*").alias("count"), F.mean("latency_ms").alias("mean_ms"), q.alias("q"),
             F.max("latency_ms").alias("max_ms"),
             F.percentile_approx("latency_ms", probs, 10000).alias("quantiles"))
        .select(*by, "pub_site", "sub_site", "count", "mean_ms", F.col("q")[0].alias("p50_ms"),
                F.col("q")[1].alias("p90_ms"), F.col("q")[2].alias("p99_ms"), "max_ms", "quantiles")
        .orderBy(*by, "pub_site", "sub_site")
    )


def per_second(events: DataFrame, value: str | None = None, by: tuple[str, ...] = ()) -> DataFrame:
    """-> [second, n]: events (or the sum of column ``value``) per 1 s bin of t_rel_s."""
    v = F.sum(value) if value else F.count("*")
    return (
        events.select(*by, "t_rel_s", *([value] if value else []))
        .where(F.col("t_rel_s").isNotNull())
        .groupBy(*by, F.floor("t_rel_s").cast("long").alias("second"))
        .agg(v.alias("n"))
        .select(*by, "second", "n")
        .orderBy(*by, "second")
    )


# -- the metrics phase -----------------------------------------------------------------
def _bins(lo: float, hi: float) -> range:
    """The 1 s bins a window [lo, hi] touches (at least one)."""
    a = math.floor(lo)
    return range(a, max(math.ceil(hi), a + 1))


def _in(series: dict[int, int], lo: float, hi: float) -> int:
    return sum(series.get(s, 0) for s in _bins(lo, hi))


def per_second_series(parts: list[tuple[str, DataFrame, str | None]], by: tuple[str, ...] = ()) -> DataFrame:
    """[(kind, events, value column or None)] -> [*by, second, n, kind]: every :func:`per_second`
    in one query (one job and its planning, not one per series)."""
    frames = [per_second(df, value, by=by).withColumn("kind", F.lit(kind)) for kind, df, value in parts]
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def compute_metrics(ctx: AnalysisContext) -> dict[str, Any]:
    """Every metric as plain JSON-friendly values (also kept in ``ctx.results['metrics']``)."""
    rows: list = []
    if ctx.has("deliver"):
        rows = latency_stats(latencies(ctx.df("deliver"), ctx.df("publish"))).collect()  # one job, no cache
    parts = [(ev, ctx.df(ev), value) for ev, value in (("deliver", None), ("publish", None), ("drop", "count"))
             if ctx.has(ev)]
    series: dict[str, dict[int, int]] = {"deliver": {}, "publish": {}, "drop": {}}
    if parts:
        for r in per_second_series(parts).collect():
            series[r["kind"]][int(r["second"])] = int(r["n"] or 0)
    return metrics_of(ctx, rows, series["deliver"], series["publish"], series["drop"])


def metrics_of(ctx: AnalysisContext, rows: list, deliver_s: dict[int, int], publish_s: dict[int, int],
               drop_s: dict[int, int]) -> dict[str, Any]:
    """The metrics of one run from its collected :func:`latency_stats` rows and per-second series
    (plain Python; the batch (``batch_checks``) collects these for many runs at once)."""
    m: dict[str, Any] = {"events": {}, "latency": [], "cdf": [], "rate": {}, "faults": []}
    m["latency"] = [{k: _num(v) for k, v in r.asDict().items() if k not in ("quantiles", "run_id")} for r in rows]
    m["cdf"] = [
        {"pub_site": r["pub_site"], "sub_site": r["sub_site"], "quantiles": [_num(x) for x in r["quantiles"]]}
        for r in rows
    ]
    end = max([int(math.ceil(ctx.end_s))] + list(deliver_s) + list(publish_s) + [0])
    start = min([0] + list(deliver_s) + list(publish_s))
    seconds = list(range(start, end + 1))
    m["rate"] = {
        "bin_s": 1.0,
        "second": seconds,
        "delivered": [deliver_s.get(s, 0) for s in seconds],
        "published": [publish_s.get(s, 0) for s in seconds],
        "dropped": [drop_s.get(s, 0) for s in seconds],
    }
    steady = [deliver_s.get(s, 0) for s in range(0, int(ctx.end_s))]
    mean_rate = sum(steady) / len(steady) if steady else 0.0
    m["delivered_per_s_mean"] = mean_rate
    attributed = (ctx.results.get(COMPLETENESS) or {}).get("attributed_by_fault", {})
    for w in ctx.windows:
        lo, hi = w.actual if w.actual is not None else w.planned
        span = float(len(_bins(lo, hi)))
        d = _in(deliver_s, lo, hi)
        m["faults"].append({
            "fault": w.fault, "source": w.source, "ops": list(w.ops), "targets": list(w.targets),
            "status": w.status, "planned": list(w.planned), "actual": list(w.actual) if w.actual else None,
            "delivered": d, "published": _in(publish_s, lo, hi), "dropped": _in(drop_s, lo, hi),
            "delivered_per_s": d / span, "delivered_per_s_ratio": (d / span / mean_rate) if mean_rate else None,
            "missing_attributed": (attributed.get(str(w.fault)) or {}).get("count", 0),
        })
    ctx.results["metrics"] = m
    return m


def _num(v: Any) -> Any:
    if isinstance(v, float):
        return None if math.isnan(v) else round(v, 4)
    return v
