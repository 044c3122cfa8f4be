"""Hosts with a given capacity: ``cpu``/``memory`` on hosts and nodes, and the ``throttle`` fault."""

from __future__ import annotations

import pytest

from testbed.faults.inject import actions_for
from testbed.topology.describe import describe
from testbed.topology.expand import expand
from testbed.topology.loader import load
from testbed.topology.plan import Plan
from testbed.topology.units import parse_cpu, parse_memory

from .helpers import BASE, one_error, write

HOSTS = """hosts:
  h1: {site: ny, cpu: 1.0, memory: 512M}
  h2: {site: rome}
"""


def with_hosts(text: str = BASE, hosts: str = HOSTS) -> str:
    return text.replace("nodes:\n", hosts + "nodes:\n", 1)


def test_units() -> None:
    assert parse_memory("512M") == 512 * 1024 ** 2
    assert parse_memory("64MB") == parse_memory("64MiB") == 64 * 1024 ** 2
    assert parse_memory("1.5G") == int(1.5 * 1024 ** 3)
    assert parse_cpu(0.25) == 0.25 and parse_cpu(2) == 2.0
    for bad in ("512", 512, "512X", "-1M", "0M", "1K", True):
        with pytest.raises(ValueError):
            parse_memory(bad)
    for bad in ("0.5", 0, -1, 0.001, True, float("inf")):
        with pytest.raises(ValueError):
            parse_cpu(bad)


def test_node_inherits_host_and_overrides(tmp_path) -> None:
    text = with_hosts().replace("b2: {role: broker, site: ny, neighbors: [b1]}",
                                "b2: {role: broker, site: ny, neighbors: [b1], cpu: 0.2, memory: 64M}")
    plan = expand(load(write(tmp_path, text)))
    assert plan.hosts["h1"].cpu == 1.0 and plan.hosts["h1"].memory_bytes == 512 * 1024 ** 2
    assert (plan.nodes["b1"].cpu, plan.nodes["b1"].memory_bytes) == (1.0, 512 * 1024 ** 2)  # its host's
    assert (plan.nodes["b2"].cpu, plan.nodes["b2"].memory_bytes) == (0.2, 64 * 1024 ** 2)  # its own
    assert (plan.nodes["b3"].cpu, plan.nodes["b3"].memory_bytes) == (None, None)  # h2: no limit
    assert plan.nodes["pubs"].cpu == 1.0  # a client process on h1 (attached to b2)
    assert Plan.from_dict(plan.to_dict()) == plan
    text_out = describe(plan)
    assert "h1 [cpu 1, mem 512M]" in text_out and "b2(broker, cpu 0.2, mem 64M)" in text_out


@pytest.mark.parametrize("old,new,expected", [
    ("b1: {role: broker, site: ny}", "b1: {role: broker, site: ny, cpu: 0}",
     "nodes.b1.cpu: 0: a CPU share must be a positive number of cores"),
    ("b1: {role: broker, site: ny}", "b1: {role: broker, site: ny, cpu: '0.5'}",
     "nodes.b1.cpu: expected a number of cores (e.g. 0.25 or 2), got '0.5'"),
    ("b1: {role: broker, site: ny}", "b1: {role: broker, site: ny, memory: 512}",
     "nodes.b1.memory: a bare number is not a memory size: write it with a unit (K, M, G), e.g. 512M"),
    ("b1: {role: broker, site: ny}", "b1: {role: broker, site: ny, memory: 5T}",
     "nodes.b1.memory: '5T' is not a memory size; use a number with one of the units K, M, G (e.g. 512M)"),
    ("b1: {role: broker, site: ny}", "b1: {role: broker, site: ny, cpu: 1.5}",
     "nodes.b1.cpu: cpu 1.5 cores is more than its host 'h1' has (hosts.h1.cpu: 1 core)"),
    ("b1: {role: broker, site: ny}", "b1: {role: broker, site: ny, memory: 1G}",
     "nodes.b1.memory: memory 1G is more than its host 'h1' has (hosts.h1.memory: 512M)"),
    ("b2: {role: broker, site: ny, neighbors: [b1]}", "b2: {role: broker, site: ny, neighbors: [b1], cpu: 0.6}",
     None),  # alone: fine
])
def test_capacity_errors(tmp_path, old, new, expected) -> None:
    text = with_hosts().replace(old, new)
    if expected is None:
        load(write(tmp_path, text))
        return
    err = one_error(tmp_path, text)
    line, col, msg = err.split(":", 2)
    assert int(line) > 0 and int(col) > 0
    assert msg.strip() == expected


def test_host_nodes_sum_over_host(tmp_path) -> None:
    text = with_hosts().replace("b1: {role: broker, site: ny}", "b1: {role: broker, site: ny, cpu: 0.6}") \
        .replace("b2: {role: broker, site: ny, neighbors: [b1]}", "b2: {role: broker, site: ny, neighbors: [b1], cpu: 0.6}")
    err = one_error(tmp_path, text)
    assert err.endswith("nodes.b2.cpu: the nodes on host 'h1' ask for 1.2 cores of cpu in all, "
                        "more than the host has (hosts.h1.cpu: 1 core)"), err
    assert err.startswith(f"{text.splitlines().index(next(ln for ln in text.splitlines() if 'b2:' in ln)) + 1}:")


def test_throttle_fault_expands(tmp_path) -> None:
    text = with_hosts().replace("faults: []", "faults:\n  - {at: 2s, throttle: b1, cpu: 0.1, for: 5s}\n"
                                              "  - {at: 3s, throttle: b3, cpu: 0.3}")
    plan = expand(load(write(tmp_path, text)))
    acts = [(a.at_s, a.op, a.target, a.cpu, a.window) for a in plan.actions]
    assert acts == [(2.0, "throttle", ("b1",), 0.1, (2.0, 7.0)),
                    (3.0, "throttle", ("b3",), 0.3, (3.0, 20.0)),
                    (7.0, "unthrottle", ("b1",), 1.0, (2.0, 7.0))]  # back to its host's share
    assert "throttle        b1 to 0.1 cores" in describe(plan)
    assert Plan.from_dict(plan.to_dict()) == plan


@pytest.mark.parametrize("fault,expected", [
    ("{at: 2s, throttle: b1}", "faults[0]: throttle needs 'cpu': the node's share in cores during the fault (e.g. cpu: 0.1)"),
    ("{at: 2s, crash: b1, cpu: 0.1}", "faults[0]: 'cpu' only applies to throttle, not to crash"),
    ("{at: 2s, throttle: b9, cpu: 0.1}", "faults[0].throttle: unknown node 'b9'"),
    ("{at: 2s, throttle: b1, cpu: -1}", "faults[0].cpu: -1: a CPU share must be a positive number of cores"),
])
def test_throttle_errors(tmp_path, fault, expected) -> None:
    err = one_error(tmp_path, BASE.replace("faults: []", f"faults:\n  - {fault}"))
    assert err.split(":", 2)[2].strip() == expected, err


def test_throttle_windows_may_not_overlap(tmp_path) -> None:
    err = one_error(tmp_path, BASE.replace("faults: []", "faults:\n  - {at: 2s, throttle: b1, cpu: 0.1, for: 5s}\n"
                                                         "  - {at: 4s, throttle: b1, cpu: 0.2, for: 1s}"))
    assert "faults[1].throttle: 'b1' is throttled from 2s to 7s (faults[0]); throttle windows of one node may not overlap" in err


def test_inject_throttle(tmp_path) -> None:
    plan = expand(load(write(tmp_path, with_hosts())))
    acts = actions_for("{throttle: b2, cpu: 0.1, for: 5s}", plan, now_s=4.0, index=7)
    assert [(a.at_s, a.op, a.cpu, a.fault) for a in acts] == [(4.0, "throttle", 0.1, 7), (9.0, "unthrottle", 1.0, 7)]


def test_throttle_above_the_host_cpu_is_refused(tmp_path) -> None:
    text = with_hosts().replace("faults: []", "faults:\n  - {at: 2s, throttle: b1, cpu: 2, for: 1s}")
    err = one_error(tmp_path, text)
    assert err.split(":", 2)[2].strip() == "faults[0].cpu: cpu 2 is more than the host 'h1' of 'b1' has (hosts.h1.cpu: 1)"
