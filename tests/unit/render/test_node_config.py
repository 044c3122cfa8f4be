"""Node configs: the shared parts computed once (PlanParts) give the same configs, and the
plan's fast paths (LinkSpec.to_dict, egress_all) give what the plain ones give."""

from __future__ import annotations

import dataclasses
import json
import os
import stat

from testbed.api import plans
from testbed.providers.control import write_private_json
from testbed.render.node_config import PlanParts, render_node_config
from testbed.topology.plan import LinkSpec

from tests.unit.topology.helpers import BASE, write

LINKS = BASE.replace("links:\n  default: {delay: 1ms}",
                     "links:\n  default: {delay: 1ms}\n  rules:\n    - {sites: [ny, rome], delay: 20ms, jitter: 2ms}")


def plan_of(tmp_path):
    assert LINKS != BASE
    [plan] = plans(str(write(tmp_path, LINKS)))
    return plan


def cfg(plan, node, parts=None):
    return render_node_config(plan, "run", node, listen=("127.0.0.1", 1), control=("127.0.0.1", 2),
                              peers={n: ("127.0.0.1", 10 + i) for i, n in enumerate(plan.nodes)},
                              emulation="userspace", log_path=f"{node}.jsonl", state_dir="st",
                              secret=b"x" * 32, parts=parts)


def test_linkspec_to_dict_is_asdict():
    for spec in (LinkSpec(), LinkSpec(delay_ms=3.5, jitter_ms=1, distribution="pareto", loss=0.25,
                                      rate_bps=10**6, reorder=True, up=False)):
        assert spec.to_dict() == dataclasses.asdict(spec)
        assert list(spec.to_dict()) == [f.name for f in dataclasses.fields(LinkSpec)]  # a new field: add it


def test_egress_all_is_egress_of_every_node(tmp_path):
    plan = plan_of(tmp_path)
    every = plan.egress_all()
    assert set(every) == set(plan.nodes)
    for n in plan.nodes:
        assert every[n] == plan.egress(n)
    assert every["b1"]["b3"].delay_ms == 20.0 and every["b1"]["b2"].delay_ms == 1.0


def test_configs_with_parts_equal_configs_without(tmp_path):
    plan = plan_of(tmp_path)
    parts = PlanParts(plan)
    for n in plan.nodes:
        assert cfg(plan, n, parts) == cfg(plan, n)
    assert cfg(plan, "b1", parts)["links"]["b3"]["delay_ms"] == 20.0
    other = dataclasses.replace(plan, links={k: LinkSpec() for k in plan.links})
    # parts of another plan are not used (the links would be the first plan's)
    assert cfg(other, "b1", parts)["links"]["b3"]["delay_ms"] == 0.0


def test_private_json_is_owner_only_and_reads_back(tmp_path):
    plan = plan_of(tmp_path)
    data = cfg(plan, "b1", PlanParts(plan))
    p = tmp_path / "c" / "b1.json"
    p.parent.mkdir()
    write_private_json(p, data)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert json.loads(p.read_text()) == json.loads(json.dumps(data))
    assert not [x for x in os.listdir(p.parent) if x != "b1.json"]  # no temporary file left
