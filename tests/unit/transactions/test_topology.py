"""The transactions topology keys: defaults, strictness, located one-line errors."""

import pytest

from testbed.topology.loader import load
from tests.unit.topology.helpers import one_error, write

BASE = """\
version: 1
name: tx
protocol: transactions
duration: 10s
sites: {lab: {}}
nodes:
  b1: {role: broker, site: lab}
  b2: {role: broker, site: lab, neighbors: [b1]}
clients:
  e: {role: coordinator, attach: b1}
  d: {role: dispatcher, attach: b2}
  a: {role: agent, count: 2, attach: [b2, b1]}
params:
  variant: dtx
"""


def test_defaults_and_units(tmp_path):
    topo = load(write(tmp_path, BASE + "  wait: 150ms\n  regular_rate: 500/s\n"))
    p = topo.protocol_params
    assert (p.variant, p.transactions, p.threads, p.instances) == ("dtx", 20, 1, 1)
    assert p.wait == pytest.approx(0.15) and p.timeout == pytest.approx(5.0)
    assert p.regular_rate == pytest.approx(500.0) and (p.round_size, p.round_txs) == (2000, 4)


@pytest.mark.parametrize("old,new,expect", [
    ("variant: dtx", "variant: dtz", "14:12: params.variant: "),
    ("variant: dtx", "variant: dtx\n  treads: 2", "15:3: params.treads: "),
    ("variant: dtx", "variant: dtx\n  wait: 150", "15:9: params.wait: a bare number is not a time"),
    ("variant: dtx", "variant: dtx\n  threads: 0", "15:12: params.threads: "),
    ("a: {role: agent, count: 2,", "a: {role: agent, count: 3,", "12:27: clients.a.count: an agent group needs count 2"),
    ("  d: {role: dispatcher, attach: b2}\n", "", "10:3: clients: the scenario needs one client group with role dispatcher"),
    ("  d: {role: dispatcher, attach: b2}\n",
     "  d: {role: dispatcher, attach: b2}\n  d2: {role: dispatcher, attach: b1}\n",
     "12:14: clients.d2.role: only one dispatcher group"),
    ("e: {role: coordinator, attach: b1}", "e: {role: coordinator, attach: b1, rate: 5/s}",
     "10:44: clients.e.rate: transactions clients take no rate (regular events: params.regular_rate)"),
    ("variant: dtx", "variant: dtx\n  transactions: 3\n  threads: 2\n  instances: 1\n  timeout: 1s\n"
     "  think: 0s\n  round_txs: 4\n  settle: 1s\n  round_size: 10\n  regular_rate: 1/s\n  wait: 1ms\n"
     "  instances: 1", None),
    ("variant: dtx", "variant: blwait\n  wait: 6s", "15:9: params.wait: wait must be shorter than timeout"),
    ("variant: dtx", "variant: stx\n  transactions: 1\n  threads: 2",
     "15:17: params.transactions: at least one transaction per TXC thread"),
])
def test_one_located_error(tmp_path, old, new, expect):
    assert old in BASE
    text = BASE.replace(old, new, 1)
    if expect is None:  # a duplicate key is the YAML loader's error; just make sure it is one line
        with pytest.raises(Exception):
            load(write(tmp_path, text))
        return
    err = one_error(tmp_path, text)
    assert err.startswith(expect), err


def test_counts_follow_instances_and_roles_are_the_scenario_s(tmp_path):
    from tests.unit.topology.helpers import errors
    errs = errors(tmp_path, BASE.replace("variant: dtx", "variant: dtx\n  instances: 2"))
    assert errs == ["10:6: clients.e.count: a coordinator group needs count 2 (1 per instance, params.instances = 2)",
                    "11:6: clients.d.count: a dispatcher group needs count 2 (1 per instance, params.instances = 2)",
                    "12:27: clients.a.count: an agent group needs count 4 (2 per instance, params.instances = 2)"]
    errs = errors(tmp_path, BASE.replace("e: {role: coordinator,", "e: {role: publisher,"))
    assert any(e.startswith("10:13: clients.e.role: unknown client role 'publisher'") for e in errs), errs


ADVPUB = BASE.replace("  d: {role: dispatcher, attach: b2}\n", "").replace(
    "a: {role: agent, count: 2, attach: [b2, b1]}", "a: {role: agent, attach: b2}").replace(
    "variant: dtx", "variant: dtx\n  scenario: advpub")


def test_scenario_advpub_takes_a_coordinator_and_an_agent_per_instance(tmp_path):
    from tests.unit.topology.helpers import errors
    topo = load(write(tmp_path, ADVPUB))
    assert topo.protocol_params.scenario == "advpub"
    assert load(write(tmp_path, BASE)).protocol_params.scenario == "dispatch"
    errs = errors(tmp_path, ADVPUB.replace("a: {role: agent, attach: b2}",
                                           "a: {role: agent, count: 2, attach: b2}\n  d: {role: dispatcher, attach: b1}"))
    assert errs == ["11:27: clients.a.count: an agent group needs count 1 (1 per instance, params.instances = 1)",
                    "12:13: clients.d.role: scenario advpub has no dispatcher role (roles: coordinator, agent)"], errs


@pytest.mark.parametrize("extra,expect", [
    ("  scenario: advpub\n  variant: blwait", "params.variant: scenario advpub needs a transactional variant"),
    ("  threads: 2", "15:12: params.threads: scenario advpub runs one TXC thread"),
    ("  conflict: true", "15:13: params.conflict: scenario advpub has no conflict workload"),
    ("  scenario: advpup", "14:13: params.scenario: "),
])
def test_scenario_advpub_errors_are_located(tmp_path, extra, expect):
    text = ADVPUB + extra + "\n"
    if "variant: blwait" in extra:
        text = ADVPUB.replace("variant: dtx\n  scenario: advpub", "variant: blwait\n  scenario: advpub")
    if "advpup" in extra:
        text = ADVPUB.replace("scenario: advpub", "scenario: advpup")
    err = one_error(tmp_path, text)
    assert expect in err, err
