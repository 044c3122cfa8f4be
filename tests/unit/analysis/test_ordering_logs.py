"""ordering.logs.load_history: the history from the run's Parquet (made without Spark), as the log says."""

import json

from testbed.protocols.ordering.analysis.history import check_tno
from testbed.protocols.ordering.analysis.logs import load_history
from testbed.testing.synthetic import T0, make_plan


def test_load_history_reads_the_parquet_it_makes_from_the_logs(tmp_path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps(make_plan(10.0, 1, 1, None).to_dict()))
    (run / "manifest.json").write_text(json.dumps({"t0_wall_ns": T0}))
    sec = 1_000_000_000

    def ln(**kw):
        return json.dumps({"m": 1, "node": "subs", **kw}) + "\n"

    (run / "logs" / "subs.jsonl").write_text(
        ln(t=T0 + 2 * sec, ev="o_notify", client="c1", eid="e1", topic=3, ts=[1, 0], ooo=False, n=1, wait_ms=0.5)
        + ln(t=T0 + 3 * sec, ev="o_notify", client="c1", eid="e2", topic=3, ts=[2, 0], ooo=True, n=2)
        + ln(t=T0 + sec, ev="o_timestamp", client="p", eid="e1", topic=3, sn=7, t0=T0 + sec // 2)
        + ln(t=T0 + sec, ev="o_subscribed", client="c1", topic=3, ts=[0, 0])
        + ln(t=T0 + 4 * sec, ev="o_stuck", client="c1", eid="e3", topic=3, ts=[3, 0], dummy=False, age_ms=9.5,
             final=True, waits=[[3, 1, 2]], sub="s")
        + ln(t=T0 + 5 * sec, ev="o_unsubscribe", client="c1", topic=3)
        + ln(t=T0 + 5 * sec, ev="deliver", client="c1", pub_id="x", publisher="p", seq=1, pub_t=T0, hops=1)
        + '{"t": 1, "node": "subs", "ev": "o_noti')  # torn
    hist = load_history(run)
    assert (run / "analysis" / "parquet" / "o_notify").is_dir()
    by = {}
    for h in hist:
        by.setdefault(h["ev"], []).append(h)
    assert sorted(by) == ["o_ens_publish", "o_notify", "o_stuck", "o_subscribed", "o_unsubscribe"]
    n = sorted(by["o_notify"], key=lambda h: h["order"])
    assert [(h["eid"], h["ts"], h["ooo"], h["order"], h["t"], h["wait_ms"]) for h in n] == [
        ("e1", [1, 0], False, 1, (T0 + 2 * sec) / 1e9, 0.5), ("e2", [2, 0], True, 2, (T0 + 3 * sec) / 1e9, None)]
    assert by["o_ens_publish"] == [{"ev": "o_ens_publish", "client": "p", "eid": "e1", "topic": 3,
                                    "t": (T0 + sec) / 1e9, "t0": (T0 + sec // 2) / 1e9, "sn": 7}]
    assert by["o_stuck"][0]["waits"] == [[3, 1, 2]] and by["o_stuck"][0]["final"] is True
    assert by["o_subscribed"][0]["ts"] == [0, 0] and by["o_unsubscribe"][0]["topic"] == 3
    assert check_tno(hist)["passed"]
    assert load_history(run) == hist  # the second read reuses the Parquet
