"""gryphon topology rules: subscriber filters are checked with the pubsub parser the nodes use."""

from __future__ import annotations

import pytest

from testbed.errors import TopologyError
from testbed.topology.loader import load

BASE = """\
version: 1
name: g
protocol: gryphon
duration: 10s
sites:
  lab: {{}}
nodes:
  p1: {{role: broker, site: lab}}
  s1: {{role: broker, site: lab, neighbors: [p1]}}
clients:
  pubs: {{role: publisher, count: 2, attach: p1, rate: 10/s{pub}}}
  subs: {{role: subscriber, count: 2, attach: s1{sub}}}
"""


def _load(tmp_path, pub: str = "", sub: str = ""):
    p = tmp_path / "g.yaml"
    p.write_text(BASE.format(pub=pub, sub=sub))
    return p, load(p)


def _errors(tmp_path, **kw) -> list[str]:
    with pytest.raises(TopologyError) as ei:
        _load(tmp_path, **kw)
    return str(ei.value).splitlines()


def test_valid_filters_load(tmp_path):
    for sub in ("", ", filter: \"[k,eq,3]\"", ", filter: \"[src,str-prefix,'pubs'],[k,<,10]\"",
                ", params: {filter_mod: 4}"):
        _load(tmp_path, sub=sub)


@pytest.mark.parametrize("sub, message", [
    (", filter: \"[k,eq,three]\"", "clients.subs.filter: bad filter: col 7: expected a quoted string or a number"),
    (", filter: \"[k,ne,1]\"", "clients.subs.filter: bad filter: col 4: unknown operator"),
    (", filter: \"[k,eq,1]\", params: {filter_mod: 4}",
     "clients.subs.filter: params.filter_mod replaces the filter; give one of them"),
])
def test_bad_subscriber_filter(tmp_path, sub, message):
    errs = _errors(tmp_path, sub=sub)
    assert len(errs) == 1 and message in errs[0], errs
    assert errs[0].startswith(str(tmp_path / "g.yaml") + ":12:"), errs  # file:line of the subs group


def test_publisher_filter_is_an_error(tmp_path):
    errs = _errors(tmp_path, pub=", filter: \"[k,eq,1]\"")
    assert len(errs) == 1 and "clients.pubs.filter: publishers do not subscribe" in errs[0], errs


def test_dedicated_subscribers_give_the_shbs_and_the_client_process_their_connections(tmp_path):
    """``connection: dedicated``: each SHB opens one connection per subscriber attached to it, the
    client process accepts them all; both reach the node configs (``connections``)."""
    from testbed.api import plans
    from testbed.render.node_config import PlanParts, render_node_config
    from testbed.topology.protocols import connections

    text = BASE.format(pub="", sub="").replace(
        "  s1: {role: broker, site: lab, neighbors: [p1]}\n",
        "  s1: {role: broker, site: lab, neighbors: [p1]}\n  s2: {role: broker, site: lab, neighbors: [p1]}\n")
    shared = tmp_path / "shared.yaml"
    shared.write_text(text.replace("count: 2, attach: s1", "count: 5, attach: [s1, s2]"))
    dedicated = tmp_path / "dedicated.yaml"
    dedicated.write_text(text.replace("count: 2, attach: s1",
                                      "count: 5, attach: [s1, s2], params: {connection: dedicated}"))
    [plan] = plans(str(shared))
    assert connections(plan) == {}
    [plan] = plans(str(dedicated))
    assert connections(plan) == {"subs": 5, "s1": 3, "s2": 2}
    for parts in (None, PlanParts(plan)):
        got = {n: render_node_config(plan, "run", n, listen=("127.0.0.1", 1), control=("127.0.0.1", 2), peers={},
                                     emulation="userspace", log_path="x", state_dir="s", secret=b"x" * 32,
                                     parts=parts)["connections"] for n in plan.nodes}
        assert got == {"p1": 0, "s1": 3, "s2": 2, "pubs": 0, "subs": 5}


def test_a_bad_connection_kind_is_an_error(tmp_path):
    errs = _errors(tmp_path, sub=", params: {connection: own}")
    assert len(errs) == 1 and "clients.subs.params.connection" in errs[0], errs
