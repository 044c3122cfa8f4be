"""The Spark history checks of Gryphon on tiny inline histories: they pass on a clean one and
fail on each kind of broken one; and they agree with the simulated protocol runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.protocols.gryphon.analysis import checks as G
from testbed.analysis.context import AnalysisContext, AnalysisOptions
from testbed.analysis.ingest import output_schema
from testbed.nodes.runtime.events import all_events

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000_000_000


def df(spark, ev, rows):
    schema = output_schema(all_events()[ev])
    out = []
    for i, r in enumerate(rows):
        r = dict(r)
        s = r.pop("s")
        full = {"t": T0 + int(s * 1e9), "m": i, "node": r.pop("node", "n"), "ev": ev, "host": "h",
                "site": "x", "t_rel_s": float(s), "t_corr": T0 + int(s * 1e9)}
        full.update(r)
        out.append(tuple(full.get(f.name) for f in schema.fields))
    return spark.createDataFrame(out, schema)


def ctx(spark, logged, subs, deliver, actions=()):
    plan = {"name": "t", "protocol": "gryphon", "duration_s": 10.0, "params": {"settle": 0.5},
            "actions": list(actions), "nodes": {}}
    events = {"g_logged": df(spark, "g_logged", logged), "g_subscribe": df(spark, "g_subscribe", subs),
              "g_deliver": df(spark, "g_deliver", deliver)}
    return AnalysisContext.build(spark, Path("/nonexistent"), plan, {"t0_wall_ns": T0, "timeline": []}, events,
                                 AnalysisOptions())


def logged(pe, ticks, s, keys=None):
    return {"pubend": pe, "ticks": ticks, "seqs": list(range(len(ticks))),
            "keys": keys or [0] * len(ticks), "recovered": False, "s": s}


def sub(c, flt="[]", broker="s1"):
    return {"client": c, "filter": flt, "broker": broker, "s": 0.1}


def dlv(c, pe, tick, s, broker="s1"):
    return {"client": c, "pubend": pe, "tick": tick, "seq": 0, "pub_t": T0, "broker": broker, "s": s}


LOGGED = [logged("p/a", [100, 110, 120], 1.0, keys=[1, 2, 1]), logged("p/a", [130], 2.0, keys=[2])]


def results(c):
    return {fn.__name__.removeprefix("check_"): fn(c) for fn in G.CHECKS}


def test_clean_history_passes(spark):
    c = ctx(spark, LOGGED, [sub("x"), sub("y", '[["k", "eq", 2]]')],
            [dlv("x", "p/a", t, 3.0 + i) for i, t in enumerate([100, 110, 120, 130])]
            + [dlv("y", "p/a", 110, 3.0), dlv("y", "p/a", 130, 3.5)])
    r = results(c)
    assert all(x.passed for x in r.values()), {k: v.to_dict() for k, v in r.items()}


def test_duplicate_reorder_gap_unpublished_and_missing_fail(spark):
    c = ctx(spark, LOGGED, [sub("x"), sub("y", '[["k", "eq", 1]]')],
            [dlv("x", "p/a", 100, 3.0), dlv("x", "p/a", 120, 3.1), dlv("x", "p/a", 120, 3.2),  # dup, gap 110
             dlv("x", "p/a", 115, 3.3),  # out of order and never published
             dlv("y", "p/a", 120, 3.0), dlv("y", "p/a", 100, 3.1)])  # y: reordered
    r = results(c)
    assert r["exactly_once"].violations == 1
    assert r["tick_order"].violations == 3  # 120 again, 115 after 120, y: 100 after 120
    assert r["published"].violations == 1
    assert r["gapless"].violations == 1  # x misses 110 below its top tick 120
    assert r["complete"].violations == 2  # x misses 110 and 130
    assert not any(x.passed for x in r.values())


def test_subscribers_of_crashed_shb_and_other_filters_are_not_judged(spark):
    c = ctx(spark, LOGGED, [sub("x", broker="s9"), sub("z", '[["price", ">", 3]]')], [],
            actions=[{"op": "crash", "target": ["s9"]}])
    r = results(c)
    assert r["complete"].passed and r["complete"].details["not_connected_throughout"] == 1
    assert r["complete"].details["unverifiable_filters"] == 1
