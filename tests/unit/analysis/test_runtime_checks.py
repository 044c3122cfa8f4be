"""control_provenance passes when the timeline explains every state change and fails when it does not;
rejected_summary sums conn_rejected counts per node."""

from testbed.analysis.report import render_report
from testbed.analysis.runtime_checks import check_control_provenance, rejected_summary, timeline_entries

from analysis_helpers import context


def applied(node, op, s, origin="schedule", args=(), ok=True):
    return {"node": node, "op": op, "origin": origin, "peer": "127.0.0.1:5000", "ok": ok, "args": list(args),
            "s": s}


def cpu(node, s):
    return {"node": node, "user_s": 0.1, "sys_s": 0.0, "rss_kb": 1, "s": s}


def entry(op, target=(), groups=(), at=0.0, status="done", fault=0, **kw):
    return {"fault": fault, "op": op, "target": list(target), "groups": [list(g) for g in groups],
            "planned_s": at, "actual_s": at, "status": status, "error": None, "window": [at, at], "source": "",
            **kw}


TIMELINE = [entry("stall", ["b1"], at=3.0), entry("unstall", ["b1"], at=5.0, fault=0),
            entry("cut", ["b1", "b2"], at=6.0, fault=1), entry("pause", ["b2"], at=10.0, fault=2),
            entry("resume", ["b2"], at=17.0, fault=2)]


def history():
    beats = [cpu(n, float(s)) for n in ("b1", "b2") for s in range(0, 21) if not (n == "b2" and 10 < s < 17)]
    return {"ctl_applied": [applied("b1", "stall", 3.01), applied("b1", "unstall", 5.02),
                            applied("b1", "cut", 6.0, args=["b2"]), applied("b2", "cut", 6.01, args=["b1"]),
                            applied("b1", "start", 0.0, origin="housekeeping"),
                            applied("b2", "stall", 8.0, ok=False)],  # refused by the node: changed nothing
            "cpu": beats, "node_start": [{"node": n, "pid": 1, "restarted": False, "role": "broker",
                                          "kind": "node", "emulation": "userspace", "s": -1.0}
                                         for n in ("b1", "b2")]}


def test_explained_history_passes(spark):
    r = check_control_provenance(context(spark, history(), timeline=TIMELINE))
    assert r.passed, r.examples
    assert r.details["state_changes"] == 4 and r.details["by_origin"] == {"schedule": 4}


def test_stall_no_schedule_explains_fails(spark):
    h = history()
    h["ctl_applied"].append(applied("b1", "stall", 12.0, origin="unknown"))  # in no timeline entry
    r = check_control_provenance(context(spark, h, timeline=TIMELINE))
    assert not r.passed and r.violations == 1
    assert r.examples[0]["node"] == "b1" and r.examples[0]["op"] == "stall" and r.examples[0]["t_s"] == 12.0


def test_state_change_on_another_node_or_time_fails(spark):
    h = history()
    h["ctl_applied"] += [applied("b2", "stall", 3.0),  # the stall at 3 s was b1's
                         applied("b1", "partition", 6.0, args=["b2", "id=x"]),  # a cut, not a partition
                         applied("b1", "stall", 9.0),  # b1's stall was at 3 s
                         applied("b2", "unstall", 19.5)]  # explained: the unstall's calls took until 18 s
    late = entry("unstall", ["b2"], at=16.0, fault=3, done_s=18.0)
    r = check_control_provenance(context(spark, h, timeline=TIMELINE + [late]))
    assert r.violations == 3, r.examples
    assert [(e["node"], e["op"], e["t_s"]) for e in r.examples] == [
        ("b2", "stall", 3.0), ("b1", "partition", 6.0), ("b1", "stall", 9.0)]


def test_silence_without_pause_fails(spark):
    r = check_control_provenance(context(spark, history(), timeline=[e for e in TIMELINE if e["op"] != "pause"
                                                                     and e["op"] != "resume"]))
    assert not r.passed and r.violations == 1 and r.examples[0]["kind"].startswith("silent")
    assert r.examples[0]["node"] == "b2"


def test_restart_explains_restored_links_and_the_gap():
    plan = {"actions": [{"op": "set_link", "fault": 4, "links": {"a->b": {}, "b->c": {}}}]}
    m = {"timeline": [entry("set_link", at=2.0, fault=4), entry("restart", ["b"], at=3.0, fault=5),
                      entry("crash", ["c"], at=1.0, status="pending")],
         "injected": [entry("set_link", at=9.0, fault=1000, injected=True)]}
    es = timeline_entries(m, plan)
    assert [e["op"] for e in es] == ["set_link", "restart", "set_link"]  # the pending crash never ran
    assert es[0]["nodes"] == {"a", "b", "c"} and es[2]["nodes"] is None


def test_rejected_summary_and_report(spark, tmp_path):
    rows = [{"node": "b1", "channel": "control", "peer": "1.2.3.4:5", "reason": "unauthenticated", "detail": "",
             "count": 1, "s": 1.0},
            {"node": "b1", "channel": "control", "peer": "1.2.3.4:5", "reason": "unauthenticated", "detail": "",
             "count": 40, "s": 2.0},
            {"node": "b2", "channel": "data", "peer": "1.2.3.4:6", "reason": "bad-mac", "detail": "", "count": 3,
             "s": 2.0}]
    rej = rejected_summary(context(spark, {"conn_rejected": rows}))
    assert rej == {"by_node": {"b1": {"control": 41}, "b2": {"data": 3}}, "total": 44, "control": 41,
                   "reasons": {"bad-mac": 3, "unauthenticated": 41}}
    md = render_report(run_id="r", plan={}, manifest={}, ingest={}, checks=[], metrics={"rejected": rej},
                       figures=[], out_dir=tmp_path)
    head = md.split("## Event logs")[0]
    assert "Warning: 41 control request(s)" in head and "b1 (41)" in head
    assert "| b1 | 41 | 0 | 41 |" in md and "| b2 | 0 | 3 | 3 |" in md
    quiet = render_report(run_id="r", plan={}, manifest={}, ingest={}, checks=[],
                          metrics={"rejected": {"by_node": {"b2": {"data": 3}}, "total": 3, "control": 0,
                                                "reasons": {"bad-mac": 3}}}, figures=[], out_dir=tmp_path)
    assert "Warning" not in quiet and "| b2 | 3 | 3 |" in quiet


# -- node_lives: a node that dies unplanned is a finding, never "a fault" ----------------------
def start(node, s, restarted=False):
    return {"node": node, "pid": 1, "restarted": restarted, "role": "broker", "kind": "node",
            "emulation": "userspace", "s": s}


def stop(node, s):
    return {"node": node, "reason": "shutdown", "s": s}


def lives_history():
    # b1 lives through the run; b2 is crashed at 6 s by the schedule and restarted at 8 s
    return {"node_start": [start("b1", -1.0), start("b2", -1.0), start("b2", 8.1, True)],
            "node_stop": [stop("b1", 21.0), stop("b2", 21.0)]}


LIVES_TIMELINE = [entry("crash", ["b2"], at=6.0, fault=0), entry("restart", ["b2"], at=8.0, fault=1)]


def test_node_lives_planned_crash_passes(spark):
    from testbed.analysis.runtime_checks import check_node_lives

    r = check_node_lives(context(spark, lives_history(), timeline=LIVES_TIMELINE))
    assert r.passed, r.examples
    assert r.details["lives"] == 3 and r.details["unplanned"] == 0


def test_node_lives_unplanned_death_and_node_error_fail(spark):
    from testbed.analysis.runtime_checks import check_node_lives

    h = lives_history()
    h["node_stop"] = [stop("b2", 21.0)]  # b1's log just ends: killed, no crash in the timeline
    r = check_node_lives(context(spark, h, timeline=LIVES_TIMELINE))
    assert not r.passed and r.violations == 1 and r.examples[0]["node"] == "b1", r.examples
    assert r.examples[0]["kind"] == "ended without node_stop"
    h = lives_history()
    h["node_error"] = [{"node": "b1", "error": "ValueError: filedescriptor out of range in select()",
                        "where": "the event loop", "rejected": '{"data:over-limit": 900}', "s": 5.0}]
    h["node_stop"] = [stop("b2", 21.0)]
    r = check_node_lives(context(spark, h, timeline=LIVES_TIMELINE))
    assert not r.passed and [e["kind"] for e in r.examples] == ["node_error"], r.examples
    assert "select()" in r.examples[0]["detail"]
    # a crash of another node (or at a time outside the life) explains nothing
    h = lives_history()
    h["node_stop"] = [stop("b2", 21.0)]
    r = check_node_lives(context(spark, h, timeline=[entry("crash", ["b2"], at=6.0)]))
    assert not r.passed and r.examples[0]["node"] == "b1"


def test_node_lives_failed_restart_fails(spark):
    from testbed.analysis.runtime_checks import check_node_lives

    h = lives_history()
    h["node_start"] = h["node_start"][:2]  # b2 never came back
    h["node_stop"] = [stop("b1", 21.0)]
    tl = [entry("crash", ["b2"], at=6.0, fault=0),
          entry("restart", ["b2"], at=8.0, fault=1, status="failed")]
    tl[1]["error"] = "b2: exited during start-up: error: node b2: [Errno 98] address already in use"
    r = check_node_lives(context(spark, h, timeline=tl))
    assert not r.passed and r.violations == 1, r.examples
    assert r.examples[0]["kind"] == "restart failed" and "address already in use" in r.examples[0]["detail"]
