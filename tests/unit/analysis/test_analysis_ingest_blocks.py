"""The pyarrow ingest (ensure_parquet, no Spark): blocks, the slow path and buffered row groups give the
same Parquet as one block; the rules of the slow path are the fast path's."""

import json

import pyarrow.parquet as pq

from testbed.analysis import convert as I  # the conversion (no Spark)
from testbed.testing.synthetic import T0, make_plan


def _run(tmp_path, name, text):
    run = tmp_path / name
    (run / "logs").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps(make_plan(10.0, 1, 1, None).to_dict()))
    (run / "manifest.json").write_text(json.dumps({"t0_wall_ns": T0, "clock_offsets": {"h2": {"offset_ns": 7}}}))
    (run / "logs" / "subs.jsonl").write_text(text)
    return run


def _table(run, ev):
    d = run / "analysis" / "parquet" / ev
    return sorted(json.dumps(r, sort_keys=True) for r in pq.read_table(str(d)).to_pylist()) if d.is_dir() else []


def _lines(n):
    out = []
    for i in range(n):
        out.append(json.dumps({"t": T0 + i, "m": i, "node": "subs", "ev": "deliver", "client": f"c{i % 3}",
                               "pub_id": f"p{i}", "publisher": "pubs-0", "seq": i, "pub_t": T0, "hops": 2}))
        if i % 7 == 0:
            out.append(json.dumps({"t": T0 + i, "m": i, "node": "subs", "ev": "publish", "client": "x",
                                   "pub_id": f"q{i}", "seq": i, "attrs": {"class": "STOCK", "price": i / 2},
                                   "size": 1, "broker": "b1"}))
    return out


def test_blocks_slow_path_and_row_groups_give_the_same_parquet(tmp_path, monkeypatch):
    lines = _lines(400)
    bad = lines[:100] + ['{"t": 5, "node": "subs", "ev": "deli'] + lines[100:250] + ["not json"] + lines[250:]
    # an undeclared field whose name a declared field has with another type: the union parse refuses the block
    clash = json.loads(lines[300])
    clash["hops"] = "two"
    bad[302] = json.dumps(clash)
    text = "\n".join(bad) + "\n"
    one = _run(tmp_path, "one", text)
    meta1, rep1 = I.ensure_parquet(one)
    monkeypatch.setattr(I, "BLOCK_BYTES", 997)  # many blocks, cut mid-line
    monkeypatch.setattr(I, "_ROWS_PER_FLUSH", 13)  # many row groups
    many = _run(tmp_path, "many", text)
    meta2, rep2 = I.ensure_parquet(many)
    assert rep1.malformed == rep2.malformed == 2 and rep1.events == rep2.events
    assert rep1.events == {"deliver": 400, "publish": 58}
    for ev in ("deliver", "publish", "_malformed"):
        assert _table(one, ev) == _table(many, ev)
    assert pq.ParquetFile(str(next((many / "analysis" / "parquet" / "deliver").glob("*.parquet")))).num_row_groups > 10
    rows = {r["e_deliver"]["pub_id"]: r for r in pq.read_table(str(many / "analysis" / "parquet" / "deliver")).to_pylist()}
    assert rows[json.loads(lines[300])["pub_id"]]["e_deliver"]["hops"] is None  # the clashing value: null, kept
    assert rows["p1"]["e_deliver"]["hops"] == 2 and rows["p1"]["host"] == "h2" and rows["p1"]["t_corr"] == T0 + 1 - 7
    pub = [r for r in pq.read_table(str(many / "analysis" / "parquet" / "publish")).to_pylist()]
    assert json.loads(pub[1]["e_publish"]["attrs"]) == {"class": "STOCK", "price": 3.5}
    assert pub[1]["e_publish"]["attrs"] == '{"class":"STOCK","price":3.5}'  # compact JSON text


def test_slow_path_rules_match_the_fast_path(tmp_path):
    """Per field: a wrong type is null, an int is a float where a float is declared, a non-string is its
    JSON text where a string is declared; a line without integer t, node or ev is malformed."""
    base = {"t": T0, "m": 1, "node": "subs", "ev": "cpu", "user_s": 1, "sys_s": 0.5, "rss_kb": 10}
    run_fast = _run(tmp_path, "fast", json.dumps(base) + "\n")  # pyarrow takes it as it is
    run_slow = _run(tmp_path, "slow", json.dumps(base) + "\n"  # with lines that send the block to Python
                    + '{"t": "1", "node": "subs", "ev": "cpu"}\n[1, 2]\n{"t": 1, "ev": "cpu"}\n')
    _, rf = I.ensure_parquet(run_fast)
    _, rs = I.ensure_parquet(run_slow)
    assert rf.events == rs.events == {"cpu": 1} and rs.malformed == 3 and rf.malformed == 0
    assert _table(run_fast, "cpu") == _table(run_slow, "cpu")
    assert json.loads(_table(run_slow, "cpu")[0])["e_cpu"] == {"user_s": 1.0, "sys_s": 0.5, "rss_kb": 10}
    mixed = _run(tmp_path, "mixed", json.dumps(base) + "\n" + json.dumps({**base, "user_s": "x", "rss_kb": 2.5}) + "\n")
    I.ensure_parquet(mixed)
    got = [json.loads(x)["e_cpu"] for x in _table(mixed, "cpu")]
    assert {"user_s": None, "sys_s": 0.5, "rss_kb": None} in got and {"user_s": 1.0, "sys_s": 0.5, "rss_kb": 10} in got
    assert I.convert(5, "str") == "5" and I.convert({"a": [1]}, "json") == '{"a":[1]}'
    assert I.convert("s", "json") == "s" and I.convert(True, "int") is None and I.convert([1, "x"], "list[int]") == [1, None]


def test_json_fields_are_the_json_modules_text_whatever_the_decoder(tmp_path, monkeypatch):
    """A ``json`` field (publish.attrs) is decoded by orjson where that is exact: an integer beyond
    64 bits (a float to orjson), NaN and a lone surrogate (refused by orjson) come out as the json
    module decodes them, and the text is json's compact encoding, with or without orjson."""
    assert I._utf8("\ud800x", "str") == "\ufffdx" and I._utf8(["a", "\ud800"], "list[str]") == ["a", "\ufffd"]
    import builtins

    attrs = [{"class": "STOCK", "price": 7}, {"big": 123456789012345678901234, "neg": -98765432109876543210987},
             {"f": 1e16, "g": 1.5e-7, "s": "Rose+e+"}, {"nested": [1, {"deep": 2 ** 70}], "u": "é\u0000"},
             {"n": None, "b": True, "x": 0.1}]
    raw = [{"t": T0 + i, "m": i, "node": "subs", "ev": "publish", "client": "x", "pub_id": f"q{i}", "seq": i,
            "attrs": a, "size": 1, "broker": "b1"} for i, a in enumerate(attrs)]
    lines = [json.dumps(r) for r in raw]
    lines.append(lines[0].replace('"price": 7', '"price": NaN').replace('"q0"', '"q5"'))
    lines.append(lines[0].replace('"STOCK"', '"\\ud800"').replace('"q0"', '"q6"'))
    want = {json.loads(x)["pub_id"]: json.dumps(json.loads(x)["attrs"], separators=(",", ":"), ensure_ascii=False)
            for x in lines}
    # a lone surrogate is not UTF-8: its text is the ASCII JSON of the same value (it used to crash the ingest)
    want["q6"] = json.dumps(json.loads(lines[-1])["attrs"], separators=(",", ":"))
    text = "\n".join(lines) + "\n"

    def stored(run):
        I.ensure_parquet(run)
        return {r["e_publish"]["pub_id"]: r["e_publish"]["attrs"]
                for r in pq.read_table(str(run / "analysis" / "parquet" / "publish")).to_pylist()}

    assert I.loads_lines([x.encode() for x in lines[:1]])[1] is False  # orjson is installed and used
    assert stored(_run(tmp_path, "orjson", text)) == want
    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name == "orjson" else real_import(name, *a, **k))
    assert I.loads_lines([x.encode() for x in lines[:1]])[1] is True
    assert stored(_run(tmp_path, "json", text)) == want


def test_threaded_conversion_is_the_one_thread_conversion(tmp_path, monkeypatch):
    """Blocks converted three at a time give the Parquet (row order included) and the report of one
    thread: tallies, malformed examples in file order, unknown events, the earliest t."""
    lines = _lines(300)
    lines[10] = '{"t": 5, "node": "subs", "ev": "deli'
    lines[50] = '{"t": 6, "m": 1, "node": "subs", "ev": "no_such_event"}'
    for i in (90, 120, 150, 200, 250, 280):
        lines[i] = f"garbage {i}"
    text = "\n".join(lines) + "\n"
    monkeypatch.setattr(I, "BLOCK_BYTES", 1500)  # dozens of blocks
    out = {}
    for n in (1, 3):
        monkeypatch.setattr(I, "INGEST_THREADS", n)
        run = _run(tmp_path, f"t{n}", text)
        meta, rep = I.ensure_parquet(run)
        rows = {ev: pq.read_table(str(run / "analysis" / "parquet" / ev)).to_pylist()
                for ev in ("deliver", "publish", "_malformed", "_unknown")}
        out[n] = (rows, {k: v for k, v in rep.to_dict().items()}, meta["t0_wall_ns"])
    assert out[1] == out[3]
    rep = out[3][1]
    assert rep["malformed"] == 7 and len(rep["malformed_examples"]) == 5 and rep["unknown"] == {"no_such_event": 1}
    assert [e["line"] for e in rep["malformed_examples"]][1:] == ["garbage 90", "garbage 120", "garbage 150",
                                                                  "garbage 200"]
