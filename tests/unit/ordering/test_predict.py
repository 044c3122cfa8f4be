"""The ordering predictor (testbed/protocols/ordering/analysis/predict.py) on hand-computable topologies."""

import pytest

from testbed.protocols.ordering.analysis.predict import chain, pipeline_path, predict
from testbed.protocols.ordering.nodes.workload import rank_weights
from testbed.topology.loader import plans

TWO_SITES = """
version: 1
name: two-sites
protocol: ordering
duration: 10s
seed: 3
sites: {s1: {}, s2: {}}
nodes:
  b1: {role: broker, site: s1}
  b2: {role: broker, site: s2, neighbors: [b1]}
  tm1: {role: tm-server, site: s1}
  tm2: {role: tm-server, site: s2}
clients:
  c1: {role: client, count: 3, attach: b1, rate: 2/s, params: {topics_per_client: 4, shape: 0.349}}
  c2: {role: client, count: 3, attach: b2, rate: 2/s, params: {topics_per_client: 4, shape: 0.349}}
placement:
  topic_managers: {topics: 4, strategy: range, servers: [tm1, tm2]}
params: {diffuse: false, ens_settle: 1s}
links:
  default: {delay: 10ms, jitter: 0ms}
  rules:
    - {sites: [s1, s2], delay: 100ms, jitter: 0ms}
  clients: {delay: 10ms, jitter: 0ms}
"""


def _plan(tmp_path, text):
    p = tmp_path / "t.yaml"
    p.write_text(text)
    (plan,) = plans(p)
    return plan


def test_chains_follow_the_rank_and_the_pipeline_relays():
    rank = [0, 1, 2, 3]
    assert chain(3, {0, 1, 2, 3}, rank) == [3, 2, 1, 0]
    assert chain(1, {1, 3}, rank) == [1]  # lower-ranked entries come from LLC, no step
    assert pipeline_path(["a", "b", "c", "d"], "d", "a") == ["d", "c", "b", "a"]
    assert pipeline_path(["a", "b", "c", "d"], "b", "a") == ["b", "a"]


def test_two_sites_everyone_subscribes_everything(tmp_path):
    plan = _plan(tmp_path, TWO_SITES)
    # the links the hand computation assumes
    assert plan.links["c1->tm1"].delay_ms == 10 and plan.links["c1->tm2"].delay_ms == 100
    assert plan.links["tm2->tm1"].delay_ms == 100 and plan.links["c2->tm2"].delay_ms == 10
    p = predict(plan)
    # k = 4 = every topic: SG_T = {0, 1, 2, 3} for all T, every timestamp the same keys and
    # (with the same mid-run sequence numbers) the same bytes
    assert p["sg_size_mean"] == 4
    a, b, c, d = rank_weights(4, 0.349)
    # topic rates (R each site): s1 ranks 0,1,2,3 -> a,b,c,d; s2 ranks 2,3,0,1 -> a,b,c,d
    # chains: 3 -> [3,2 | 1,0], 2 -> [2 | 1,0], 1 -> [1,0], 0 -> [0]  ('|' = tm2 -> tm1)
    # tm2 handles 2 steps of chain 3 and 1 of chain 2, forwards one of each:
    r2, r3 = c + a, d + b
    assert p["forwarding_pct"]["tm2"] == pytest.approx(100 * (r2 + r3) / (2 * r3 + r2))
    assert p["forwarding_pct"]["tm1"] == 0.0
    # latency: c1: topics 0,1 -> 10 + 10; topics 2,3 -> 100 (to tm2) + 100 (tm2 -> tm1) + 10
    lat = p["latency_by_client_group"]
    assert lat["c1"]["latency_mean_ms"] == pytest.approx((a + b) * 20 + (c + d) * 210)
    # c2: own topics 2,3 (weights a,b) -> 10 + 100 + 100; topics 0,1 -> 100 + 100
    assert lat["c2"]["latency_mean_ms"] == pytest.approx((a + b) * 210 + (c + d) * 200)
    assert lat["c1"]["latency_max_ms"] == pytest.approx(210)
    assert p["clients_with_foreign_topic"] == 1.0


def test_geographic_law_without_foreign_topics_forwards_nothing(tmp_path):
    text = (TWO_SITES.replace("shape: 0.349", "shape: 0.901").replace("topics: 4,", "topics: 40,")
            .replace("topics_per_client: 4", "topics_per_client: 3")
            .replace("params: {diffuse: false,", "params: {foreign_eps: 0.0, diffuse: false,"))
    p = predict(_plan(tmp_path, text))
    assert p["forwarding_pct"] == {"tm1": 0.0, "tm2": 0.0}
    assert p["clients_with_foreign_topic"] == 0.0
    # publications keep the whole ranking: own topics (ranks 1-20) 10 + 10 ms, the other site's
    # (ranks 21-40, TMs on tm1, chains staying there) 100 + 100 ms
    w = rank_weights(40, 0.901)
    abroad = sum(w[20:])
    assert 0 < abroad < 0.05
    assert p["latency_by_client_group"]["c2"]["latency_mean_ms"] == pytest.approx(20 + 180 * abroad)
    # every client abroad: the foreign topic drags some chains across (seed-dependent amount)
    p1 = predict(_plan(tmp_path, text.replace("foreign_eps: 0.0", "foreign_eps: 1.0")))
    assert p1["clients_with_foreign_topic"] == 1.0


def test_rejects_other_protocols(tmp_path):
    import dataclasses
    plan = dataclasses.replace(_plan(tmp_path, TWO_SITES), protocol="gryphon")
    with pytest.raises(ValueError, match="ordering"):
        predict(plan)


def test_cli_predict_prints_one_line_per_plan_and_refuses_other_protocols(tmp_path, capsys):
    import json

    from testbed import cli

    p = tmp_path / "t.yaml"
    p.write_text(TWO_SITES)
    assert cli.main(["predict", str(p), "--json"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    doc = json.loads(line)
    assert doc["forwarding_pct"]["tm1"] == 0.0 and doc["forwarding_pct"]["tm2"] > 0
    assert cli.main(["predict", "topologies/gryphon/fig6.yaml"]) == 2
    assert "ordering" in capsys.readouterr().err
