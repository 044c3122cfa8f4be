"""The Spark checks P1-P9 on histories logged by the real broker code (in-memory runtime),
written as run directories and ingested as a run is: they pass on clean reconfiguration
runs, attribute covering losses to moves, and each fails on a broken history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.analysis.context import AnalysisContext, AnalysisOptions
from testbed.analysis.ingest import ingest
from testbed.protocols.mobility.analysis.checks import CHECKS, intersects

from .harness import CHAIN, configs, publishers, run
from .test_moves import MOBILE

pytestmark = pytest.mark.spark
AFTER = 0.5
DURATION = 6.0


def history(movement: str):
    groups = publishers(["b1", "b4", "b7"], rate=100.0)
    groups["stay"] = {"role": "subscriber", "count": 2, "attach": ["b2", "b6"], "filter": "[w,eq,'cov']"}
    cfgs = configs(CHAIN, MOBILE, groups, movement=movement)
    sim = run(cfgs, duration=DURATION, after=AFTER)
    return cfgs, sim.logs


def write_run(root: Path, cfgs, logs, restarts: dict[str, int] | None = None,
              crashed: tuple[str, ...] = (), timeline: list[dict] | None = None, clients: bool = False,
              params: dict | None = None) -> Path:
    """A run directory as the real runtime leaves it: node_start first, node_stop last (none for a
    node that crashed and never came back; a second node_start(restarted) where it restarted)."""
    root.mkdir(parents=True)
    (root / "logs").mkdir()
    by_node: dict[str, list[str]] = {}
    rows: dict[str, list[dict]] = {}
    for r in logs:
        rows.setdefault(r["node"], []).append(r)
    for n, rs in rows.items():
        c = cfgs[n]
        first, last = rs[0], rs[-1]
        head = [{"t": first["t"], "m": first["m"], "node": n, "ev": "node_start", "pid": 1, "restarted": False,
                 "role": c["role"], "kind": c["kind"], "emulation": "userspace"}]
        if restarts and n in restarts:
            head.append({"t": restarts[n], "m": restarts[n] - 1_700_000_000_000_000_000, "node": n,
                         "ev": "node_start", "pid": 2, "restarted": True, "role": c["role"], "kind": c["kind"],
                         "emulation": "userspace"})
        tail = [] if n in crashed else [{"t": last["t"], "m": last["m"], "node": n, "ev": "node_stop",
                                         "reason": "shutdown"}]
        by_node[n] = [json.dumps(r) for r in head + rs + tail]
    for n, lines in by_node.items():
        (root / "logs" / f"{n}.jsonl").write_text("\n".join(lines) + "\n")
    any_cfg = next(iter(cfgs.values()))
    plan = {"name": "t", "protocol": "mobility", "duration_s": DURATION, "params": any_cfg["params"],
            "actions": [], "nodes": {n: {"kind": c["kind"], "role": c["role"], "neighbors": c["neighbors"],
                                         "host": "h", "site": "s",
                                         **({"clients": c.get("clients")} if clients else {})}
                                     for n, c in cfgs.items()}}
    if params:
        plan["params"] = {**plan["params"], **params}
    (root / "plan.json").write_text(json.dumps(plan))
    t0 = 1_700_000_000_000_000_000 + int(AFTER * 1e9)
    (root / "manifest.json").write_text(json.dumps({"t0_wall_ns": t0, "timeline": timeline or [],
                                                    "duration_s": DURATION}))
    return root


def results(spark, root: Path, only: set[str] | None = None) -> dict:
    """The checks' results on the run at ``root``, by name ("P1".."P9"); ``only`` those named (a test
    about one check's failure need not pay for the other eight: each is several Spark jobs)."""
    ing = ingest(spark, root, write=False)
    ctx = AnalysisContext.build(spark, root, json.loads((root / "plan.json").read_text()),
                                json.loads((root / "manifest.json").read_text()), dict(ing),
                                AnalysisOptions(settle_s=0.3, travel_margin_s=0.5))
    out = {}
    for i, c in enumerate(CHECKS):
        if only is not None and f"P{i + 1}" not in only:
            continue
        r = c(ctx)
        out[r.name.split("_", 1)[0]] = r
    ctx.release()
    return out


@pytest.fixture(scope="module")
def reconf():
    return history("reconfiguration")


@pytest.fixture(scope="module")
def clean(spark, reconf, tmp_path_factory):
    return results(spark, write_run(tmp_path_factory.mktemp("r") / "run", *reconf))


def test_reconfiguration_history_passes_every_check(clean):
    failed = {k: (r.violations, r.examples[:2]) for k, r in clean.items() if not r.passed}
    assert not failed
    assert clean["P2"].details["outcomes"]["commit"] >= 20
    assert clean["P4"].details["expected"] > 300 and clean["P4"].attributed == 0
    assert clean["P9"].details["pairs"] > 0


def test_covering_history_attributes_its_losses_to_moves(spark, tmp_path):
    res = results(spark, write_run(tmp_path / "run", *history("covering")))
    failed = {k: (r.violations, r.examples[:2]) for k, r in res.items() if not r.passed}
    assert not failed
    assert res["P4"].attributed > 0 and res["P4"].details["moves_with_losses"] > 0
    assert res["P7"].details["others_changes"] >= 0


def test_the_move_window_margin_is_the_runs_in_flight_time(spark):
    """Covering's misses are the move's within [begin - m, end + m]: m is the run's longest measured
    in-flight time when it exceeds 0.5 s (congested brokers), else 0.5 s; a miss outside stays a violation."""
    from pyspark.sql import functions as F

    from testbed.protocols.mobility.analysis.checks import attribute_to_moves, inflight, move_margin_s

    pubs = spark.createDataFrame([(f"p{i}", float(i) / 10) for i in range(100)], "pub_id string, pub_s double")
    slow = spark.createDataFrame([(f"p{i}", i / 10 + (1.5 if i == 97 else 0.1)) for i in range(100)],
                                 "pub_id string, t_rel_s double")
    fast = spark.createDataFrame([(f"p{i}", i / 10 + 0.1) for i in range(100)], "pub_id string, t_rel_s double")
    m_slow = move_margin_s(inflight(slow, pubs).first()["inflight_s"])
    m_fast = move_margin_s(inflight(fast, pubs).first()["inflight_s"])
    assert m_slow == pytest.approx(1.5) and m_fast == 0.5
    missing = spark.createDataFrame([("c", "p90", "pub", 9.0, None)],
                                    "client string, pub_id string, publisher string, pub_s double, fault int")
    moves = spark.createDataFrame([("c", "c#1", 10.0, 10.2)], "client string, mid string, begin_s double, end_s double")
    assert attribute_to_moves(missing, moves, m_slow).first()["mid"] == "c#1"  # 1 s before the move: in flight
    assert attribute_to_moves(missing, moves, m_fast).first()["mid"] is None  # a violation on a fast run
    per_run = F.when(F.col("client") == "c", F.lit(m_slow)).otherwise(F.lit(m_fast))  # a batch's per-run column
    assert attribute_to_moves(missing, moves, per_run).first()["mid"] == "c#1"
    by_run = inflight(slow.unionByName(fast.withColumn("pub_id", F.concat(F.lit("r2/"), "pub_id"))),
                      pubs.unionByName(pubs.withColumn("pub_id", F.concat(F.lit("r2/"), "pub_id"))),
                      (F.when(F.col("pub_id").startswith("r2/"), "r2").otherwise("r1"),))
    got = {r["_by0"]: move_margin_s(r["inflight_s"]) for r in by_run.collect()}
    assert got == {"r1": pytest.approx(1.5), "r2": 0.5}


def mutate(logs, fn):
    out = [dict(r) for r in logs]
    fn(out)
    return out


def _mover_delivery(logs):
    """A delivery of a mobile client at a target, during the client's second residence."""
    begins = [r for r in logs if r["ev"] == "move_begin"]
    ends = {r["mid"]: r for r in logs if r["ev"] == "move_end"}
    b = begins[len(begins) // 2]
    e = ends[b["mid"]]
    for r in logs:
        if r["ev"] == "deliver" and r["client"] == b["client"] and r["node"] == b["dst"] and r["t"] > e["t"]:
            return b, r
    raise AssertionError("no delivery after a move")


def test_two_started_copies_fail_p2(spark, reconf, tmp_path):
    def two(logs):
        last = max(r["m"] for r in logs if r["node"] == "b4")
        logs.append({"t": logs[-1]["t"], "m": last + 1, "node": "b4", "ev": "client_state", "mid": "",
                     "client": "m-0", "copy": "tgt", "state": "started"})
    res = results(spark, write_run(tmp_path / "run", reconf[0], mutate(reconf[1], two)), only={"P2", "P3"})
    assert not res["P2"].passed and res["P2"].details["clients_without_one_copy"] == 1
    assert res["P3"].passed


def test_a_lost_publication_in_a_reconfiguration_move_fails_p4(spark, reconf, tmp_path):
    def lose(logs):
        # drop a mover's delivery of a publication sent during one of its moves (before the end)
        t0 = 1_700_000_000_000_000_000 + int(AFTER * 1e9)
        ends = {r["mid"]: r["t"] for r in logs if r["ev"] == "move_end"}
        wins = [(r["client"], r["t"], ends[r["mid"]]) for r in logs if r["ev"] == "move_begin"]
        i = next(i for i, r in enumerate(logs) if r["ev"] == "deliver" and r["client"].startswith("m-")
                 and r["pub_t"] < t0 + int(4e9)
                 and any(c == r["client"] and lo - int(0.3e9) <= r["pub_t"] <= hi + int(0.3e9)
                         for c, lo, hi in wins))
        del logs[i]
    res = results(spark, write_run(tmp_path / "run", reconf[0], mutate(reconf[1], lose)), only={"P4"})
    assert not res["P4"].passed and res["P4"].violations == 1
    assert res["P4"].details["missed_in_move_windows"] == 1  # found, and not excused by the move


def test_a_duplicate_across_a_move_fails_p3_and_p1(spark, reconf, tmp_path):
    def dup(logs):
        b, d = _mover_delivery(reconf[1])
        # the same publication also delivered by the source copy, after it was cleaned
        logs.append(dict(d, node=b["src"], m=max(r["m"] for r in logs if r["node"] == b["src"]) + 1))
    res = results(spark, write_run(tmp_path / "run", reconf[0], mutate(reconf[1], dup)), only={"P1", "P3"})
    assert not res["P3"].passed and res["P3"].violations == 1
    assert not res["P1"].passed and res["P1"].details["deliveries_outside_started"] == 1


def test_a_tentative_entry_left_behind_fails_p8(spark, reconf, tmp_path):
    def leave(logs):
        dump = next(r for r in logs if r["ev"] == "rt_dump" and r["node"] == "b3")
        dump["tentative"] = [["m-0#1", "m-0:s1", "b4"]]
    res = results(spark, write_run(tmp_path / "run", reconf[0], mutate(reconf[1], leave)), only={"P8"})
    assert not res["P8"].passed and res["P8"].violations == 1


def test_a_change_off_the_path_fails_p7_and_a_missing_entry_fails_p9(spark, reconf, tmp_path):
    def off(logs):
        ch = next(r for r in logs if r["ev"] == "rt_change")
        logs.append(dict(ch, node="b7", m=ch["m"]))  # b7 is on no b1-b6 path
        dump = next(r for r in logs if r["ev"] == "rt_dump" and r["node"] == "b3")
        dump["prt"] = [e for e in dump["prt"] if not e[0].startswith("stay-1")]
    res = results(spark, write_run(tmp_path / "run", reconf[0], mutate(reconf[1], off)), only={"P7", "P9"})
    assert not res["P7"].passed and res["P7"].violations == 1
    assert not res["P9"].passed
    assert {e["id"] for e in res["P9"].examples} == {"stay-1:s1"}


def test_fifo_inversion_of_a_stationary_client_fails_p6(clean, spark, reconf, tmp_path):
    def swap(logs):
        ds = [i for i, r in enumerate(logs) if r["ev"] == "deliver" and r["client"] == "stay-0"
              and r["publisher"] == "pubs-0"]
        i, j = ds[5], ds[6]
        ti, tj = logs[i]["t"], logs[j]["t"]
        mi, mj = logs[i]["m"], logs[j]["m"]
        logs[i]["t"], logs[j]["t"], logs[i]["m"], logs[j]["m"] = tj, ti, mj, mi
    res = results(spark, write_run(tmp_path / "run", reconf[0], mutate(reconf[1], swap)), only={"P6"})
    assert clean["P6"].passed
    assert not res["P6"].passed and res["P6"].violations >= 1


def test_fifo_inversion_of_a_mover_fails_p6_under_reconfiguration(clean, spark, reconf, tmp_path):
    # reconfiguration keeps FIFO across a move: a mover's reordering is a violation, not information
    def swap(logs):
        b, d = _mover_delivery(logs)
        ds = [i for i, r in enumerate(logs) if r["ev"] == "deliver" and r["client"] == b["client"]
              and r["publisher"] == d["publisher"]]
        i, j = ds[len(ds) // 2], ds[len(ds) // 2 + 1]
        logs[i]["t"], logs[j]["t"] = logs[j]["t"], logs[i]["t"]
        logs[i]["m"], logs[j]["m"] = logs[j]["m"], logs[i]["m"]
    res = results(spark, write_run(tmp_path / "run", reconf[0], mutate(reconf[1], swap)), only={"P6"})
    assert clean["P6"].passed and clean["P6"].details["mover_inversions"] == 0
    assert not res["P6"].passed and res["P6"].violations >= 1
    assert res["P6"].details["movers_judged"] and res["P6"].details["mover_inversions"] >= 1
    assert res["P6"].examples[0]["client"].startswith("m-")


def test_p7_others_changes_counts_other_clients_entries_only(spark, reconf, tmp_path):
    # judged as covering: one change of the mover's own entry at a broker off its path, one change of
    # another client's entry; only the second is another client's change
    def add(logs):
        ch = next(r for r in logs if r["ev"] == "rt_change")
        logs.append(dict(ch, node="b7"))  # b7 is on no b1-b6 path: the mover's own entry, off the path
        logs.append(dict(ch, owner="stay-1", id="stay-1:s1"))
    res = results(spark, write_run(tmp_path / "run", reconf[0], mutate(reconf[1], add),
                                   params={"movement": "covering"}), only={"P7"})
    assert res["P7"].details["others_changes"] == 1, res["P7"].details
    assert res["P7"].details["own_changes_off_path"] == 1


def test_a_move_that_never_ends_is_a_finding_of_lost_clients(clean, spark, reconf, tmp_path):
    assert clean["P2"].details["clients_lost"]["moves_never_ended"] == 0
    assert "finding" not in clean["P2"].details

    def drop_end(logs):
        b, _ = _mover_delivery(logs)
        logs[:] = [r for r in logs if not (r["ev"] == "move_end" and r["mid"] == b["mid"])]
    res = results(spark, write_run(tmp_path / "run", reconf[0], mutate(reconf[1], drop_end)), only={"P2"})
    lost = res["P2"].details["clients_lost"]
    assert lost["moves_never_ended"] == 1 and lost["movement"] == "reconfiguration"
    assert lost["mobile_clients"] == 6 and lost["clients_running_nowhere"] == 0  # the move did commit
    assert res["P2"].details["finding"] == ("reconfiguration: 0 of 6 mobile client(s) lost (running nowhere at "
                                            "the end), 1 move(s) never ended")


def test_a_miss_on_a_stationary_route_no_fault_touches_fails_p4(clean, spark, reconf, tmp_path):
    # b5 stalls 2-3 s (window 0-5 s with the margin): it is on pubs-0's route to stay-1 (b1..b6), on
    # no route to stay-0 (b2). One delivery of each, published inside the window, is dropped.
    t0 = 1_700_000_000_000_000_000 + int(AFTER * 1e9)
    src = "{at: 2s, stall: b5, for: 1s}"
    timeline = [{"fault": 0, "op": op, "target": ["b5"], "planned_s": t, "actual_s": t, "status": "done",
                 "window": [2.0, 3.0], "source": src} for op, t in (("stall", 2.0), ("unstall", 3.0))]

    def drop(logs):
        for client in ("stay-0", "stay-1"):
            i = next(i for i, r in enumerate(logs) if r["ev"] == "deliver" and r["client"] == client
                     and r["publisher"] == "pubs-0" and t0 + int(2.2e9) <= r["pub_t"] <= t0 + int(2.8e9))
            del logs[i]
    res = results(spark, write_run(tmp_path / "run", reconf[0], mutate(reconf[1], drop), timeline=timeline,
                                   clients=True), only={"P4", "P5"})
    assert not res["P4"].passed and res["P4"].violations == 1 and res["P4"].attributed == 1
    assert res["P4"].examples[0]["client"] == "stay-0"
    assert not res["P5"].passed and res["P5"].violations == 1


def test_intersects_on_the_workload_filters():
    assert intersects("[w,eq,'cov'],[x,>=,0],[x,<,10]", "[w,isPresent,''],[x,>=,0],[x,<=,100]")
    assert not intersects("[w,eq,'cov'],[x,>=,0],[x,<,10]", "[w,eq,'cov'],[x,>=,10],[x,<,20]")
    assert not intersects("[w,eq,'cov']", "[w,eq,'tree']")
    assert intersects("[x,>=,10],[x,<,20]", "[x,>=,0],[x,<=,10]")
    assert not intersects("[x,>,10]", "[x,<=,10]")


def test_a_source_crash_mid_move_is_attributed_to_the_crash(spark, tmp_path):
    """The source crashes while its move waits for (2): the client dies with it (section 4.1), the
    target's copy stays queued and the path keeps tentative entries (3PC blocks). P2 and P8 attribute
    that to the crash; P3 holds; the restarted broker hosts no client."""
    from .harness import Sim

    cfgs = configs(CHAIN, {"m": dict(MOBILE["m"], count=2, moving=0)}, publishers(["b4"], 20.0))
    for n, c in cfgs.items():
        c["state_dir"] = str(tmp_path / "state" / n)
    sim = Sim(cfgs, delay_ms=1.0)
    sim.start()
    sim.run_for(AFTER)
    sim.start_workload(0.0, DURATION)
    sim.run_for(0.2)
    assert sim.nodes["b1"].on_control("move", {"client": "m-0", "to": "b6"})["ok"]
    sim.run_for(0.007)  # (2) is on its way back: b6 .. b3 have prepared
    sim.crash("b1")
    sim.run_for(0.5)
    restart_t = sim.rts["b2"].wall_ns()
    sim.restart("b1")
    sim.run_until(int((AFTER + DURATION + 1.0) * 1e9))
    for name, node in sim.nodes.items():
        sim.drive(node.stop_workload())
    sim.shutdown()
    assert sim.nodes["b1"].copies == {} and sim.nodes["b6"].copies["m-0"].state == "queued"
    assert [d for d in sim.events("rt_dump") if d["tentative"]]
    res = results(spark, write_run(tmp_path / "run", cfgs, sim.logs, restarts={"b1": restart_t}))
    assert res["P2"].passed and res["P2"].details["moves_cut_by_source_crash"] == 1
    assert res["P2"].details["clients_lost_in_crashes"] == 1
    assert res["P8"].passed and res["P8"].details["left_by_source_crash"] >= 3
    assert res["P3"].passed and res["P1"].passed
    # the dead client's entries elsewhere are stale: P9 does not expect it at b1 (attributed)
    assert res["P9"].passed and res["P9"].details["clients_lost_in_crashes"] == ["m-0"]
    # without the crash in the history (no restart, a clean stop) the same tables are violations
    res = results(spark, write_run(tmp_path / "run2", cfgs, sim.logs), only={"P2", "P8", "P9"})
    assert not res["P2"].passed and not res["P8"].passed
    assert not res["P9"].passed and {(e["broker"], e["id"]) for e in res["P9"].examples} >= {("b1", "m-0:s1")}
