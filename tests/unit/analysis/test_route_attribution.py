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
