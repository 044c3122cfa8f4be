import json

import pytest

from testbed.analysis.ingest import event_schema, ingest, load_parquet
from testbed.testing.synthetic import T0, make_plan
from testbed.errors import AnalysisError
from testbed.nodes.runtime.events import all_events


def write_run(tmp_path, logs: dict[str, str], manifest=None):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps(make_plan(10.0, 1, 1, None).to_dict()))
    (run / "manifest.json").write_text(json.dumps(manifest if manifest is not None else {
        "t0_wall_ns": T0, "clock_offsets": {"h2": {"offset_ns": 250_000_000}}}))
    for node, text in logs.items():
        (run / "logs" / f"{node}.jsonl").write_text(text)
    return run


def line(**kw):
    return json.dumps(kw) + "\n"


def test_schema_types_come_from_the_registry():
    s = event_schema(all_events()["publish"])
    types = {f.name: f.dataType.simpleString() for f in s.fields}
    assert types == {"t": "bigint", "m": "bigint", "node": "string", "ev": "string", "client": "string",
                     "pub_id": "string", "seq": "bigint", "attrs": "string", "size": "bigint", "broker": "string"}


def test_ingest_torn_line_unknown_event_host_and_clock_correction(spark, tmp_path):
    sec = 1_000_000_000
    run = write_run(tmp_path, {
        "pubs": line(t=T0 + 2 * sec, m=1, node="pubs", ev="publish", client="pubs-0", pub_id="pubs-0:1", seq=1,
                     attrs={"class": "STOCK", "p": [1, 2]}, size=10, broker="b1")
        + line(t=T0 + 3 * sec, m=2, node="pubs", ev="martian", x=1)
        + "\n",
        # subs runs on h2 whose clock is 250 ms ahead: its t=5.25 s is 5.0 s on the controller's clock
        "subs": line(t=T0 + 5 * sec + 250_000_000, m=1, node="subs", ev="deliver", client="subs-0",
                     pub_id="pubs-0:1", publisher="pubs-0", seq=1, pub_t=T0 + 2 * sec, hops=2,
                     undeclared="dropped")
        + '{"t": 123, "m": 4, "node": "subs", "ev": "deli',  # torn by a kill
        "b1": line(t=T0, m=0, node="b1", ev="link_set", peer="b2", spec={"delay_ms": 5})
        + line(t=T0, m=0, node="b1", ev="cpu", user_s=1.5, sys_s=0.25, rss_kb=1000)
        + "not json at all\n",
    })
    ev = ingest(spark, run)
    rep = ev.report
    assert rep.malformed == 2 and rep.malformed_by_file == {"subs.jsonl": 1, "b1.jsonl": 1}
    assert rep.unknown == {"martian": 1}
    assert rep.events == {"publish": 1, "deliver": 1, "link_set": 1, "cpu": 1}
    assert sorted(ev) == ["cpu", "deliver", "link_set", "publish"]

    d = ev["deliver"].collect()[0]
    assert d["host"] == "h2" and d["site"] == "rome"
    assert d["t_corr"] == T0 + 5 * sec and d["t_rel_s"] == pytest.approx(5.0)
    assert "undeclared" not in ev["deliver"].columns
    p = ev["publish"].collect()[0]
    assert p["host"] == "h1" and p["t_rel_s"] == pytest.approx(2.0)
    assert json.loads(p["attrs"]) == {"class": "STOCK", "p": [1, 2]}  # json field kept as raw JSON text
    assert json.loads(ev["link_set"].collect()[0]["spec"]) == {"delay_ms": 5}
    assert ev["cpu"].collect()[0]["sys_s"] == 0.25

    assert (run / "analysis" / "parquet" / "deliver").is_dir()
    again = load_parquet(spark, run)
    assert sorted(again) == sorted(ev) and again["publish"].count() == 1


def test_ingest_without_logs_is_an_error(spark, tmp_path):
    run = write_run(tmp_path, {})
    with pytest.raises(AnalysisError, match="no event logs"):
        ingest(spark, run)


def test_reingest_of_an_unchanged_run_reuses_the_parquet_and_other_protocols_events_parse(spark, tmp_path):
    sec = 1_000_000_000
    pub = dict(m=1, node="pubs", ev="publish", client="pubs-0", seq=1, attrs={"class": "STOCK"}, size=1,
               broker="b1")
    run = write_run(tmp_path, {
        "pubs": line(t=T0 + sec, pub_id="pubs-0:1", **pub)
        # an event of another protocol's registry (outside the one union parse: its own schema after the split)
        + line(t=T0 + 2 * sec, m=2, node="pubs", ev="g_peer", peer="b2", up=False, extra=1),
    })
    first = ingest(spark, run)
    assert not first.report.reused and first.report.events == {"g_peer": 1, "publish": 1}
    g = first["g_peer"].collect()[0]
    assert g["peer"] == "b2" and g["t_rel_s"] == pytest.approx(2.0) and "extra" not in first["g_peer"].columns
    in_memory = ingest(spark, run, write=False)
    assert sorted(in_memory) == sorted(first)
    for ev in first:
        assert sorted(in_memory[ev].collect()) == sorted(first[ev].collect())

    again = ingest(spark, run)
    assert again.report.reused and again.report.events == first.report.events
    assert sorted(again["publish"].collect()) == sorted(first["publish"].collect())

    with open(run / "logs" / "pubs.jsonl", "a") as f:  # the log changed: parsed again
        f.write(line(t=T0 + 3 * sec, pub_id="pubs-0:2", **pub))
    third = ingest(spark, run)
    assert not third.report.reused and third.report.events == {"g_peer": 1, "publish": 2}
    assert ingest(spark, run, reuse=False).report.reused is False


def test_key_order_field_type_mismatch_and_torn_lines(spark, tmp_path):
    """Any key order parses the same; a field of the wrong type is null (the event is kept); a line
    torn after a valid header is malformed."""
    sec = 1_000_000_000
    fields = dict(client="pubs-0", pub_id="pubs-0:1", seq=1, attrs={"class": "STOCK"}, size=10, broker="b1")
    canonical = line(t=T0 + sec, m=1, node="pubs", ev="publish", **fields)
    reordered = json.dumps({"ev": "publish", "node": "pubs", **{**fields, "pub_id": "pubs-0:2"}, "m": 2,
                            "t": T0 + sec}) + "\n"
    mismatch = line(t=T0 + sec, m=3, node="pubs", ev="publish", **{**fields, "pub_id": "pubs-0:3", "seq": "x"})
    torn = line(t=T0 + sec, m=4, node="pubs", ev="publish", **fields)[:70] + "\n"
    run = write_run(tmp_path, {"pubs": canonical + reordered + mismatch + torn})
    ev = ingest(spark, run)
    assert ev.report.malformed == 1 and ev.report.events == {"publish": 3}
    rows = {r["pub_id"]: r for r in ev["publish"].collect()}
    assert rows["pubs-0:1"]["seq"] == 1 and rows["pubs-0:2"]["seq"] == 1
    assert rows["pubs-0:3"]["seq"] is None and rows["pubs-0:3"]["size"] == 10  # kept, the bad field null
    for r in rows.values():
        assert r["node"] == "pubs" and r["ev"] == "publish" and r["t_rel_s"] == pytest.approx(1.0)
        assert json.loads(r["attrs"]) == {"class": "STOCK"}
    assert sorted(r["m"] for r in rows.values()) == [1, 2, 3]


def test_crafted_lines_are_malformed_and_the_ingest_goes_on(tmp_path):
    """Issue #32: a deeply nested line (RecursionError), "t": 2**64 (OverflowError) and a line in b1's
    log claiming to be b2's are each counted malformed; every other line is converted as usual."""
    from testbed.analysis.convert import ensure_parquet

    good = line(t=T0, m=0, node="b1", ev="cpu", user_s=1.5, sys_s=0.25, rss_kb=1000)
    deep = '{"t": %d, "m": 1, "node": "b1", "ev": "link_set", "peer": "b2", "spec": %s1%s}\n' % (
        T0, "[" * 100_000, "]" * 100_000)
    deep_obj = '{"t": %d, "m": 1, "node": "b1", "ev": "link_set", "peer": "b2", "spec": %s1%s}\n' % (
        T0, '{"a":' * 50_000, "}" * 50_000)
    huge_t = '{"t": %d, "m": 1, "node": "b1", "ev": "cpu", "user_s": 1.0, "sys_s": 0.0, "rss_kb": 1}\n' % 2 ** 64
    other = line(t=T0, m=2, node="b2", ev="cpu", user_s=9.0, sys_s=0.0, rss_kb=1)
    run = write_run(tmp_path, {"b1": good + deep + good + huge_t + deep_obj + other + good})
    _, rep = ensure_parquet(run, reuse=False)
    assert rep.malformed == 4 and rep.malformed_by_file == {"b1.jsonl": 4}, rep.to_dict()
    assert rep.events == {"cpu": 3}, rep.events
    # each crafted line alone, in a log of its own (the fast and the slow path)
    for i, crafted in enumerate((deep, deep_obj, huge_t, other)):
        run = write_run(tmp_path / f"alone{i}", {"b1": crafted})
        _, rep = ensure_parquet(run, reuse=False)
        assert rep.malformed == 1 and not rep.events, (crafted[:80], rep.to_dict())
