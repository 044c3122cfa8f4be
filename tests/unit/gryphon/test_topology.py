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
