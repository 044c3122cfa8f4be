"""Fault attribution by route (issue #27 item 5): a miss is excused only by a fault that touches the
path from the publisher's broker to the subscriber's broker at that time."""

import json

from testbed.analysis.job import analyze
from testbed.testing.synthetic import make_run_dir


def _completeness(run_dir):
    checks = json.loads((run_dir / "analysis" / "checks.json").read_text())
    return next(c for c in checks["checks"] if c["name"] == "completeness")


def test_a_miss_on_a_route_no_fault_touches_is_caught(spark, tmp_path):
    # b2 stalls 8-10 s: it is on the route pubs-b1-b2-subs, not on pubs-b1-locs. One delivery to
    # locs-0 published inside the stall window is dropped: only the stall's own route is excused.
    run = make_run_dir(tmp_path, run_id="offroute", duration_s=16, rate_per_s=5, lost_off_route=True,
                       torn=False, unknown_event=False)
    analyze(run.path, spark=spark, progress=lambda _: None)
    c = _completeness(run.path)
    assert not c["passed"] and c["violations"] == 1, c
    assert c["examples"][0]["client"] == "locs-0" and 8.0 <= c["examples"][0]["pub_s"] <= 10.0
    assert c["attributed"] == run.lost_in_fault  # the stalled route's misses are still excused


def test_the_same_run_without_the_drop_passes(spark, tmp_path):
    run = make_run_dir(tmp_path, run_id="onroute", duration_s=16, rate_per_s=5, torn=False, unknown_event=False)
    analyze(run.path, spark=spark, progress=lambda _: None)
    c = _completeness(run.path)
    assert c["passed"] and c["violations"] == 0 and c["attributed"] == run.lost_in_fault > 0, c


def _restart_run(spark, applied_s=None):
    """b1 - b2, b2 crashed at 5 s and restarted at 6 s; b1 and b2 send their re-syncs at 6.4 and 6.5 s
    and (``applied_s``: when set) the other end logs each applied at ``applied_s``. p-0 publishes at
    3 .. 12 s; lost: s-0's p-0:3 (5.0 s, b2 down on p-b1-b2-s), s-0's p-0:7 (9.0 s), q-0's p-0:3
    (route p-b1-q, b2 not on it) and s-0's p-0:6 (8.0 s: after the applied re-syncs, before the
    sent re-sync + the 2 s margin)."""
    from pathlib import Path

    from analysis_helpers import T0, dlv, events_df, pub, sub
    from testbed.analysis.context import AnalysisContext
    from testbed.protocols.pubsub.analysis.checks import check_completeness

    stock = "[class,eq,'STOCK']"
    nodes = {"b1": {"kind": "node", "role": "broker", "neighbors": ["b2"]},
             "b2": {"kind": "node", "role": "broker", "neighbors": ["b1"]}}
    for g, att in (("p", "b1"), ("s", "b2"), ("q", "b1")):
        nodes[g] = {"kind": "clients", "role": "x", "neighbors": [], "clients": {"name": g, "count": 1, "attach": [att]}}
    plan = {"name": "t", "protocol": "pubsub", "duration_s": 20.0, "params": {}, "actions": [], "nodes": nodes}
    src = "{at: 5s, crash: b2, restart_after: 1s}"
    timeline = [{"fault": 0, "op": op, "target": ["b2"], "planned_s": t, "actual_s": t, "status": "done",
                 "window": [5.0, 6.0], "source": src} for op, t in (("crash", 5.0), ("restart", 6.0))]
    pubs = [pub("p-0", k, {"class": "STOCK"}, 2.0 + k) for k in range(1, 11)]  # at 3 .. 12 s
    lost = {("s-0", "p-0:3"), ("s-0", "p-0:6"), ("s-0", "p-0:7"), ("q-0", "p-0:3")}
    dels = [dlv(c, "p-0", k, 2.05 + k, 2.0 + k) for c in ("s-0", "q-0") for k in range(1, 11)
            if (c, f"p-0:{k}") not in lost]
    resync = [{"node": "b1", "peer": "b2", "advs": 1, "subs": 0, "s": 6.4},
              {"node": "b2", "peer": "b1", "advs": 0, "subs": 1, "s": 6.5}]
    ev = {"subscribe": [sub("s-0", stock, 0.0), sub("q-0", stock, 0.0)], "publish": pubs, "deliver": dels,
          "broker_resync": resync}
    if applied_s is not None:
        ev["broker_resync_applied"] = [{"node": "b2", "peer": "b1", "wave": "b1>b2@1", "fwd": 0, "s": applied_s},
                                       {"node": "b1", "peer": "b2", "wave": "b2>b1@1", "fwd": 0, "s": applied_s}]
    ctx = AnalysisContext.build(spark, Path("/nonexistent"), plan, {"t0_wall_ns": T0, "timeline": timeline},
                                {k: events_df(spark, k, v) for k, v in ev.items()})
    return check_completeness(ctx)


def test_old_logs_a_restart_excuses_only_its_routes_until_the_sent_resyncs_plus_the_margin(spark):
    r = _restart_run(spark)
    # excused: s-0's p-0:3 (5.0 s, b2 down on p-b1-b2-s) and p-0:6 (8.0 s, inside the re-sync sent at
    # 6.5 s plus the 2 s margin); caught: s-0's p-0:7 (9.0 s) and q-0's p-0:3 (b2 not on its route)
    assert r.attributed == 2 and r.violations == 2, (r.attributed, r.examples)
    assert {(e["client"], e["pub_id"]) for e in r.examples} == {("s-0", "p-0:7"), ("q-0", "p-0:3")}
    f = r.details["attributed_by_fault"]["0"]
    assert f["count"] == 2 and f["recovered"] == "resync-sent" and f["window"] == [3.0, 8.5]


def test_a_restart_excuses_its_routes_only_until_the_resyncs_were_applied(spark):
    r = _restart_run(spark, applied_s=6.6)
    # the window ends at 6.6 s, when both re-syncs were applied: p-0:6 (8.0 s) is caught now
    assert r.attributed == 1 and r.violations == 3, (r.attributed, r.examples)
    assert {(e["client"], e["pub_id"]) for e in r.examples} == {("s-0", "p-0:6"), ("s-0", "p-0:7"), ("q-0", "p-0:3")}
    f = r.details["attributed_by_fault"]["0"]
    assert f["count"] == 1 and f["recovered"] == "resync" and f["window"] == [3.0, 6.6]
