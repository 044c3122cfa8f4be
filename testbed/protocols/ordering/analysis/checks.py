"""History checks of the ordering protocol, read from the node logs through Spark.

The DataFrames are reduced in Spark to the columns each property needs, collected,
and handed to the pure checkers of :mod:`testbed.protocols.ordering.analysis.history` (the
same functions the simulated-harness tests run).

* ``tno``: no two subscribers notify two common events in different orders.
* ``completeness`` (reliable ENS only): every event whose publish() began after a
  client's subscribe(T) returned is notified to it, unless it unsubscribed T within
  1 s after, or the event was published in the last second of the run.
* ``ooo_tagging`` (unreliable ENS only): an event is tagged out-of-order iff a
  previously notified event at that client has a larger timestamp.
* ``liveness``: no event stays in a client's buffer longer than a bound derived from the
  plan (``testbed.protocols.ordering.analysis.liveness``: the TM pipeline's delay, the way back to
  the publisher and the longest ENS path); each late event reported with what it waits for.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from testbed.analysis.checks import CheckResult
from testbed.analysis.context import AnalysisContext
from testbed.protocols.ordering.analysis import history as H
from testbed.protocols.ordering.analysis.liveness import check_liveness as _check_liveness
from testbed.protocols.ordering.analysis.liveness import liveness_bound

TRAVEL_MARGIN_S = 1.0  # events published in the last second may still be in flight at the end


def notify_rows(notify: DataFrame) -> DataFrame:
    """[client, eid, topic, ts, ooo, order, t] in notification order per client."""
    return notify.select("client", "eid", "topic", "ts", "ooo", F.col("n").alias("order"),
                         F.col("t_rel_s").alias("t"), "wait_ms")


def publish_rows(timestamp: DataFrame) -> DataFrame:
    """[client, eid, topic, sn, t, t0]: the ENS publication (t) and the publish() call (t0)."""
    return timestamp.select("client", "eid", "topic", "sn", F.col("t_rel_s").alias("t"),
                            (F.col("t_rel_s") - F.col("latency_ms") / 1e3).alias("t0"))


def _collect(df: DataFrame, ev: str) -> list[dict[str, Any]]:
    return [{**r.asDict(), "ev": ev} for r in df.toLocalIterator()]


def _history(ctx: AnalysisContext, with_subs: bool) -> list[dict[str, Any]]:
    key = ("ordering_history", with_subs)
    if key in ctx.results:
        return ctx.results[key]
    hist = _collect(notify_rows(ctx.df("o_notify")), "o_notify")
    if with_subs:
        hist += _collect(publish_rows(ctx.df("o_timestamp")), "o_ens_publish")
        hist += _collect(ctx.df("o_subscribed").select("client", "topic", "ts",
                                                       F.col("t_rel_s").alias("t")), "o_subscribed")
        hist += _collect(ctx.df("o_unsubscribe").select("client", "topic", F.col("t_rel_s").alias("t")),
                         "o_unsubscribe")
    ctx.results[key] = hist
    return hist


def _result(name: str, description: str, r: dict[str, Any], **details: Any) -> CheckResult:
    extra = {k: v for k, v in r.items() if k not in ("property", "passed", "violations", "examples")}
    return CheckResult(name=name, passed=bool(r["passed"]), violations=int(r["violations"]),
                       examples=r.get("examples", []), description=description,
                       details={**extra, **details})


def _params(ctx: AnalysisContext) -> dict[str, Any]:
    return ctx.plan.get("params") or {}


def check_tno(ctx: AnalysisContext) -> CheckResult:
    r = H.check_tno(_history(ctx, with_subs=False))
    return _result("tno", "no two subscribers notify two common events in different orders", r,
                   notifications=ctx.results.get("o_notify_count"))


def check_completeness(ctx: AnalysisContext) -> CheckResult:
    desc = "reliable ENS: every event published after subscribe(T) returned reaches the subscriber"
    if _params(ctx).get("ens", "reliable") != "reliable":
        return CheckResult("completeness", True, 0, description=desc,
                           details={"applicable": False, "why": "params.ens is unreliable"})
    hist = _history(ctx, with_subs=True)
    last = max((h["t"] for h in hist if h["ev"] == "o_notify"), default=0.0)
    until = last - min(ctx.options.travel_margin_s, TRAVEL_MARGIN_S)
    r = H.check_completeness(hist, until=until)
    # the report's completeness line: delivered, and the window (events whose publish() began
    # after subscribe(T) returned, which is ens_settle after the ENS subscription at the
    # earliest; the run's last travel margin is not counted; no fault attribution here)
    return _result("completeness", desc, r, applicable=True, until_s=round(until, 3),
                   delivered=int(r["expected"]) - int(r["violations"]),
                   settle_s=float(_params(ctx).get("ens_settle", 0.3)),
                   travel_margin_s=round(last - until, 3))


def check_ooo_tagging(ctx: AnalysisContext) -> CheckResult:
    desc = "unreliable ENS: tagged out-of-order iff an earlier notification had a larger timestamp"
    if _params(ctx).get("ens", "reliable") != "unreliable":
        return CheckResult("ooo_tagging", True, 0, description=desc,
                           details={"applicable": False, "why": "params.ens is reliable"})
    r = H.check_ooo_tags(_history(ctx, with_subs=False))
    return _result("ooo_tagging", desc, r, applicable=True)


def check_liveness(ctx: AnalysisContext) -> CheckResult:
    bound = liveness_bound(ctx.plan)
    desc = (f"no event stays in a client's buffer longer than {bound['bound_s']} s (TM pipeline + "
            "way back + ENS path + faults + slack, from the plan)")
    params = _params(ctx)
    if not params.get("diffuse", True) or not params.get("log_notify", True):
        return CheckResult("liveness", True, 0, description=desc,
                           details={"applicable": False, **bound,
                                    "why": "no events diffused or no notifications logged"})
    hist = _history(ctx, with_subs=True)
    if ctx.has("o_stuck"):
        hist = hist + _collect(ctx.df("o_stuck").select(
            "client", "eid", "topic", "age_ms", "final", "waits", "sub",
            F.col("t_rel_s").alias("t")), "o_stuck")
    r = _check_liveness(hist, bound["bound_s"])
    return _result("liveness", desc, r, **{k: v for k, v in bound.items() if k != "bound_s"})


CHECKS = [check_tno, check_completeness, check_ooo_tagging, check_liveness]
