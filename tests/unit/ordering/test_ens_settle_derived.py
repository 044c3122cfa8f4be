"""Issue #34: a default the validator rejected. ``ens_settle`` left out is derived from the
topology (long enough for an ENS subscription to reach every broker), shown by ``validate``;
an explicit value that is too short is still a located error."""

from __future__ import annotations

import json

import pytest

from testbed import api, jsonout
from testbed.errors import TopologyError

# three WAN sites, 60-70 ms links, a client group on two brokers: an ENS subscription needs
# 2 x (70 + 60) ms + 0.1 s = 0.36 s, above the 0.3 s the parameter used to default to
TOPO = """version: 1
name: wan3
protocol: ordering
duration: 6s
seed: 3
sites: {a: {}, b: {}, c: {}}
nodes:
  b1: {role: broker, site: a}
  b2: {role: broker, site: b, neighbors: [b1]}
  b3: {role: broker, site: c, neighbors: [b1]}
  t1: {role: tm-server, site: a}
clients:
  cb: {role: client, count: 4, attach: [b2, b3], rate: 4/s, params: {topics_per_client: 2, shape: 0.349}}
placement:
  topic_managers: {topics: 8, strategy: hash, servers: [t1]}
params: {ens: reliable, warmup: 1s{extra}}
links:
  default: {delay: 2ms}
  rules:
    - {sites: [a, b], delay: 70ms}
    - {sites: [a, c], delay: 60ms}
    - {sites: [b, c], delay: 50ms}
  clients: {delay: 1ms}
"""


def write(tmp_path, extra=""):
    p = tmp_path / "wan3.yaml"
    p.write_text(TOPO.replace("{extra}", extra))
    return p


def test_left_out_it_is_derived_from_the_topology_and_shown(tmp_path):
    path = write(tmp_path)
    [plan] = api.plans(str(path))
    assert plan.params["ens_settle"] == pytest.approx(0.4)  # 0.36 s rounded up to 0.1 s
    assert "ens_settle" in plan.derived and "b2..b3" in plan.derived["ens_settle"]
    text = api.validate(str(path))
    assert "ens_settle=0.4 (derived)" in text and "0.360s" in text
    doc = json.loads(jsonout.dumps(jsonout.validate_doc(str(path), [plan])))
    assert doc["plans"][0]["params"]["ens_settle"] == pytest.approx(0.4)
    assert "ens_settle" in doc["plans"][0]["derived"]


def test_an_explicit_value_too_short_is_a_located_error(tmp_path):
    path = write(tmp_path, ", ens_settle: 300ms")
    with pytest.raises(TopologyError) as e:
        api.validate(str(path))
    msg = str(e.value)
    assert msg.startswith(f"{path}:") and "params.ens_settle" in msg and "at least 0.4s" in msg
    assert "or leave it out" in msg


def test_an_explicit_value_long_enough_is_kept_as_written(tmp_path):
    [plan] = api.plans(str(write(tmp_path, ", ens_settle: 2s")))
    assert plan.params["ens_settle"] == 2.0 and plan.derived == {}


def test_a_lan_keeps_the_old_default(tmp_path):
    lan = TOPO.replace("{extra}", "").replace("delay: 70ms", "delay: 5ms").replace("delay: 60ms", "delay: 5ms")
    p = tmp_path / "lan.yaml"
    p.write_text(lan)
    [plan] = api.plans(str(p))
    assert plan.params["ens_settle"] == pytest.approx(0.3) and "at least 0.3s" in plan.derived["ens_settle"]


def test_the_plan_round_trips_with_what_was_derived(tmp_path):
    from testbed.topology.plan import Plan

    [plan] = api.plans(str(write(tmp_path)))
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))).derived == plan.derived
