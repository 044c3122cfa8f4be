"""Every bad-input kind gives one clear line, located at the offending value."""

from __future__ import annotations

import pytest

from testbed.errors import TopologyError
from testbed.topology.loader import load

from .cases import CASES
from .helpers import BASE, errors, one_error, write

EXPECTED = {
    "bare-number-time": '4:11: duration: a bare number is not a time: write it with a unit (us, ms, s, m), e.g. 20s',
    "bad-name": "2:7: name: 'T_1' is not a valid name: use lowercase letters, digits and '-', starting with a letter",
    "unknown-protocol": "3:11: protocol: unknown protocol 'pubsbu'; one of: echo, gryphon, mobility, ordering, pubsub, transactions",
    "unknown-top-key": "6:1: sed: unknown key 'sed' (did you mean 'seed'?)",
    "typo-node-key": "11:32: nodes.b2.neighbours: unknown key 'neighbours' (did you mean 'neighbors'?)",
    "missing-role": '10:7: nodes.b1.role: required key is missing',
    "unknown-site": "12:28: nodes.b3.site: unknown site 'roma' (did you mean 'rome'?)",
    "unknown-neighbor": "11:44: nodes.b2.neighbors[0]: unknown node 'b9'",
    "self-neighbor": '11:44: nodes.b2.neighbors[0]: a node cannot be its own neighbor',
    "unknown-node-role": "10:14: nodes.b1.role: unknown role 'tm-server' for protocol pubsub; one of: broker",
    "unknown-attach": "15:51: clients.subs.attach[1]: unknown node 'b7'",
    "attach-client-group": "14:45: clients.pubs.attach: 'subs' is a client group; clients attach to nodes",
    "count-zero": '14:34: clients.pubs.count: must be at least 1; got 0',
    "count-text": "14:34: clients.pubs.count: expected a whole number; got 'two'",
    "bad-rate-unit": '14:55: clients.pubs.rate: a bare number is not a rate: write it with a unit (N/s), e.g. 10/s',
    "bad-size-unit": "14:67: clients.pubs.size: '100kb' is not a size; use a number with one of the units B, KB, MB (e.g. 100B)",
    "name-clash": "15:3: clients.b1: 'b1' is already the name of a node (nodes and client groups share one namespace)",
    "duplicate-yaml-key": "13:3: nodes.b3: duplicate key 'b3'",
    "loss-over-100": "17:31: links.default.loss: '150%': a loss must be between 0% and 100%",
    "bad-distribution": "17:39: links.default.distribution: must be one of: uniform, normal, pareto, paretonormal; got 'gauss'",
    "link-rule-unknown-site": "19:20: links.rules[0].sites[1]: unknown site 'mars'",
    "link-rule-unknown-node": "19:20: links.rules[0].nodes[1]: unknown node or client group 'zz'",
    "link-rule-two-selectors": '19:7: links.rules[0]: give exactly one of sites: [a, b] or nodes: [x, y]',
    "cycle": "12:50: nodes.b3.neighbors[1]: 'b2' closes a cycle b3 - b1 - b2 - b3: the broker overlay must be a tree (no cycles)",
    "bad-filter": '15:60: clients.subs.filter: bad filter: col 11: expected a quoted string or a number',
    "subscriber-without-filter": '15:9: clients.subs: a subscriber group needs a filter, e.g. "[class,eq,\'STOCK\']"',
    "covering-bad": "19:20: params.covering: must be one of: off, lazy, active; got 'eager'",
    "params-unknown": "19:22: params.setle: unknown key 'setle' (did you mean 'settle'?)",
    "fault-after-end": '19:10: faults[0].at: at 20s is not before the end of the run (duration 20s)',
    "fault-past-end": '19:31: faults[0].for: the fault ends at 21s, after the end of the run (duration 20s)',
    "fault-zero-for": "19:34: faults[0].for: 'for' must be longer than 0s",
    "fault-unknown-target": "19:21: faults[0].stall: unknown node 'b8'",
    "fault-two-kinds": '19:5: faults[0]: a fault has exactly one kind, got stall, crash',
    "fault-no-kind": '19:5: faults[0]: a fault needs one of: stall, crash, restart, cut, partition, pause, set_link, throttle',
    "fault-for-on-crash": "19:5: faults[0]: 'for' does not apply to crash (only to stall, pause, cut, partition, throttle)",
    "restart-not-crashed": "19:23: faults[0].restart: 'b1' is not crashed at 5s (restart needs an earlier crash)",
    "crash-twice": "20:21: faults[1].crash: 'b1' is crashed since 5s (faults[0]); restart it first",
    "stall-crashed": "20:21: faults[1].stall: 'b1' is crashed since 5s (faults[0]); restart it first",
    "stall-while-paused": "20:21: faults[1].stall: 'b1' is paused from 5s to 9s (faults[0]); a stall cannot start inside that window",
    "partition-unknown": "19:33: faults[0].partition[1][0]: unknown site or node 'paris'",
    "partition-overlap": "19:39: faults[0].partition[1][1]: 'b2' is in two partition groups",
    "set-link-unknown-site": "19:37: faults[0].set_link.sites[1]: unknown site 'mars'",
    "set-link-empty": '19:24: faults[0].set_link: set_link changes nothing: give at least one of delay, jitter, distribution, loss, rate, reorder',
    "cut-unknown": "19:24: faults[0].cut[1]: unknown node 'q1'",
    "host-unknown": "10:38: nodes.b1.host: unknown host 'h9' (the file has no hosts section)",
    "repeat-zero": '19:9: repeat: must be at least 1; got 0',
    "version-2": '1:10: version: must be one of: 1; got 2',
    "subscriber-rate": '15:58: clients.subs.rate: subscribers do not publish; remove rate',
    "publisher-param-bad": "14:89: clients.pubs.params.attrs: price: 'uniform(5,1)': uniform(a,b) needs a < b",
    "unsubscribe-after-end": '15:107: clients.subs.params.unsubscribe_at: unsubscribe_at must be before the end of the run (20s)',
}


def test_base_is_valid(tmp_path):
    topo = load(write(tmp_path, BASE))
    assert topo.name == "t" and list(topo.nodes) == ["b1", "b2", "b3"]


def test_every_case_has_an_expectation():
    assert {c[0] for c in CASES} == set(EXPECTED)


@pytest.mark.parametrize("cid,old,new", CASES, ids=[c[0] for c in CASES])
def test_one_line_error_at_the_right_place(tmp_path, cid, old, new):
    assert old in BASE
    assert one_error(tmp_path, BASE.replace(old, new, 1)) == EXPECTED[cid]


def test_all_errors_at_once_schema_and_references_together(tmp_path):
    text = (BASE.replace("duration: 20s", "duration: 20")                      # schema
                .replace("site: rome,", "site: roma,")                          # cross-reference
                .replace("count: 2,", "count: 0,")                              # schema in an entry
                .replace("attach: [b3]", "attach: [b3, b7]")                    # cross-reference
                .replace("faults: []\n", "faults:\n  - {at: 5s, restart: b1}\n  - {at: 6s, stall: b1, for: 0s}\n"))
    errs = errors(tmp_path, text)
    assert errs == [
        "4:11: duration: a bare number is not a time: write it with a unit (us, ms, s, m), e.g. 20s",
        "12:28: nodes.b3.site: unknown site 'roma' (did you mean 'rome'?)",
        "14:34: clients.pubs.count: must be at least 1; got 0",
        "15:51: clients.subs.attach[1]: unknown node 'b7'",
        "19:23: faults[0].restart: 'b1' is not crashed at 5s (restart needs an earlier crash)",
        "20:30: faults[1].for: 'for' must be longer than 0s",
    ]


def test_an_invalid_entry_is_still_a_known_name(tmp_path):
    # b1 has a schema error; references to b1 elsewhere must not be reported as unknown.
    text = BASE.replace("b1: {role: broker, site: ny}", "b1: {role: broker, site: ny, colour: red}")
    errs = errors(tmp_path, text)
    assert errs == ["10:32: nodes.b1.colour: unknown key 'colour'"]


def test_yaml_syntax_error_is_located(tmp_path):
    err = one_error(tmp_path, BASE.replace("  rome: {}", "  rome: {"))
    assert err == "10:5: YAML syntax error: while parsing a flow mapping: expected ',' or '}', but got ':'"


def test_not_a_mapping_and_empty_file(tmp_path):
    assert one_error(tmp_path, "- a\n- b\n") == "1:1: the file must be a mapping of keys (version, name, ...)"
    assert one_error(tmp_path, "# nothing\n") == "1:1: the file is empty"


def test_missing_file_is_a_topology_error(tmp_path):
    with pytest.raises(TopologyError, match="no such topology file"):
        load(tmp_path / "nope.yaml")


def test_error_exit_code_is_2(tmp_path):
    with pytest.raises(TopologyError) as ei:
        load(write(tmp_path, BASE.replace("duration: 20s", "duration: 20")))
    assert ei.value.exit_code == 2
    assert len(ei.value.problems) == 1
    p = ei.value.problems[0]
    assert (p.line, p.col, p.key) == (4, 11, "duration")


GRYPHON = """\
version: 1
name: g
protocol: gryphon
duration: 10s
sites: {ny: {}, rome: {}}
nodes:
  p1: {role: broker, site: ny}
  b1: {role: broker, site: rome, neighbors: [p1], cell: ib1}
  b2: {role: broker, site: rome, neighbors: [p1], cell: ib1}
  s1: {role: broker, site: rome, neighbors: [b1, b2]}
params: {gct: 200ms, dct: inf}
"""


def test_gryphon_cells_collapse_before_the_cycle_check(tmp_path):
    topo = load(write(tmp_path, GRYPHON))  # p1 - {b1,b2} - s1 is a path once the cell is one vertex
    assert topo.protocol_params.dct == float("inf")
    assert topo.protocol_params.gct == pytest.approx(0.2)


def test_gryphon_cycle_across_cells(tmp_path):
    text = GRYPHON.replace("  s1: {role: broker, site: rome, neighbors: [b1, b2]}",
                           "  s1: {role: broker, site: rome, neighbors: [b1, b2, p1]}")
    assert one_error(tmp_path, text) == (
        "10:54: nodes.s1.neighbors[2]: 'p1' closes a cycle s1 - cell ib1 - p1 - s1: "
        "the broker graph must be acyclic after collapsing each cell")


def test_the_same_cycle_is_an_error_without_cells_for_pubsub(tmp_path):
    text = GRYPHON.replace("protocol: gryphon", "protocol: pubsub").replace("params: {gct: 200ms, dct: inf}\n", "")
    assert one_error(tmp_path, text) == (
        "10:50: nodes.s1.neighbors[1]: 'b2' closes a cycle s1 - b1 - p1 - b2 - s1: "
        "the broker overlay must be a tree (no cycles)")


def test_ordering_allows_cycles_and_checks_topic_manager_servers(tmp_path):
    text = GRYPHON.replace("protocol: gryphon", "protocol: ordering").replace(
        "params: {gct: 200ms, dct: inf}\n",
        "placement:\n  topic_managers: {topics: 10, strategy: hash, servers: [b1, zz]}\n")
    text = text.replace("neighbors: [b1, b2]", "neighbors: [b1, b2, p1]")
    assert one_error(tmp_path, text) == "12:62: placement.topic_managers.servers[1]: topic-manager server 'zz' is not a node"


def test_gryphon_inf_only_for_dct(tmp_path):
    err = one_error(tmp_path, GRYPHON.replace("gct: 200ms", "gct: inf"))
    assert err == "11:15: params.gct: inf is not allowed here; give a time in us, ms, s or m"


@pytest.mark.parametrize("protocol", ["nosuch", "gryphon"])
def test_required_sections_missing_are_errors_not_a_crash(tmp_path, protocol):
    """A file without sites, nodes or duration (and maybe an unknown protocol) gets its problems
    listed; before, the cross-reference checks tripped over the missing sections (exit 70)."""
    errs = errors(tmp_path, f"version: 1\nname: x\nprotocol: {protocol}\n")
    got = [e.split(": ", 1)[1] for e in errs]
    assert "duration: required key is missing" in got and "sites: required key is missing" in got
    assert "nodes: required key is missing" in got
    assert any("unknown protocol" in e for e in got) == (protocol == "nosuch")
