"""Kernel link emulation of the ansible provider (pure): the choice, the per-host tc argument
lists rendered into the inventory for testbed/providers/ansible/playbooks/links.yml, and the prepare check of the host
helper (real tbhost.py subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testbed.errors import ProviderError
from testbed.providers.ansible import bundle, inventory, links
from testbed.providers.ansible.runner import PLAYBOOKS, ssh_common_args
from testbed.topology.loader import plans

TOPO = """
version: 1
name: links
protocol: pubsub
duration: 5s
sites: {ny: {}, rome: {}, tokyo: {}}
hosts:
  h1: {address: 10.0.0.1, site: ny, become: true}
  h2: {address: 10.0.0.2, site: rome}
  h3: {address: 10.0.0.3, site: tokyo}
nodes:
  b1: {role: broker, site: ny}
  b2: {role: broker, site: ny, neighbors: [b1]}
  b3: {role: broker, site: rome, neighbors: [b1]}
  b5: {role: broker, site: tokyo, neighbors: [b1]}
clients:
  pubs: {role: publisher, count: 1, attach: b2, rate: 1/s, size: 10B}
links:
  default: {delay: 10ms, jitter: 2ms}
  rules:
    - {sites: [ny, rome], delay: 40ms, jitter: 5ms, loss: 1%}
    - {sites: [ny, tokyo], delay: 80ms, rate: 10mbit}
    - {sites: [rome, tokyo], delay: 40ms}
  clients: {delay: 1ms}
"""

FACTS_OK = {h: {"sch_netem": True, "tc": "/usr/sbin/tc", "uid": 0} for h in ("h1", "h2", "h3")}


class _Loader(yaml.SafeLoader):
    """The inventory as Ansible reads it: ``!unsafe "text"`` is the text (never templated)."""


_Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def _load(text: str):
    return yaml.load(text, Loader=_Loader)


def _plan(tmp_path, text: str = TOPO):
    p = tmp_path / "t.yaml"
    p.write_text(text)
    (plan,) = plans(p, provider="ansible")
    return plan


def _node_hosts(plan):
    return {n: p.host for n, p in plan.nodes.items()}


def test_become_reaches_the_plan_and_the_inventory(tmp_path):
    plan = _plan(tmp_path)
    assert plan.hosts["h1"].become is True and plan.hosts["h2"].become is False
    inv = _load(inventory.render_inventory(plan, "r", ssh_common_args(["/kh"])))["all"]["hosts"]
    assert inv["h1"]["tb_become"] is True and inv["h2"]["tb_become"] is False
    assert inventory.host_record(plan.hosts["h1"])["become"] is True


def test_links_per_host_pair_ignore_same_host_pairs(tmp_path):
    plan = _plan(tmp_path)
    pairs = links.host_pair_links(plan, _node_hosts(plan))
    assert set(pairs) == {"h1", "h2", "h3"}
    assert set(pairs["h1"]) == {"h2", "h3"}  # b1-b2 and pubs-b2 (same host) have no slice
    assert pairs["h1"]["h2"].delay_ms == 40 and pairs["h1"]["h2"].loss == pytest.approx(0.01)
    assert pairs["h1"]["h3"].rate_bps == 10_000_000 and pairs["h3"]["h2"].delay_ms == 40


def test_tc_vars_are_argument_lists_per_host_and_device(tmp_path):
    plan = _plan(tmp_path)
    addrs = {h: hp.address for h, hp in plan.hosts.items()}
    devices = {"h1": {"10.0.0.2": "eth0", "10.0.0.3": "eth1"},
               "h2": {"10.0.0.1": "eth0", "10.0.0.3": "eth0"},
               "h3": {"10.0.0.1": "ens3", "10.0.0.2": "ens3"}}
    tc = links.tc_vars(plan, _node_hosts(plan), addrs, devices)
    h1 = tc["h1"]
    assert h1["tb_tc_remove"] == [["tc", "qdisc", "del", "dev", "eth0", "root"],
                                  ["tc", "qdisc", "del", "dev", "eth1", "root"]]
    assert ["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb"] in h1["tb_tc_add"]
    assert ["tc", "qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "a:", "netem",
            "delay", "40ms", "5ms", "distribution", "normal", "loss", "1%"] in h1["tb_tc_add"]
    assert ["tc", "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
            "match", "ip", "dst", "10.0.0.2/32", "flowid", "1:1"] in h1["tb_tc_add"]
    assert ["tc", "class", "add", "dev", "eth1", "parent", "1:", "classid", "1:1", "htb", "rate",
            "10000000bit"] in h1["tb_tc_add"]
    assert all(isinstance(a, str) for c in h1["tb_tc_add"] for a in c)
    # h2: both destinations on one device, one tree with two slices; no filter for its own address
    dsts = [c[c.index("dst") + 1] for c in tc["h2"]["tb_tc_add"] if "dst" in c]
    assert dsts == ["10.0.0.1/32", "10.0.0.3/32"]
    assert links.devices_used(tc) == {"h1": ["eth0", "eth1"], "h2": ["eth0"], "h3": ["ens3"]}
    # teardown: removes only, for exactly the devices that were shaped
    td = links.teardown_vars(links.devices_used(tc))
    assert td["h1"] == {"tb_tc_remove": [["tc", "qdisc", "del", "dev", "eth0", "root"],
                                         ["tc", "qdisc", "del", "dev", "eth1", "root"]], "tb_tc_add": []}
    # the rendered inventory carries them as lists (JSON through tojson), and the playbook uses them
    inv = _load(inventory.render_inventory(plan, "r", "", {h: {"tb_root": "/r", **v} for h, v in tc.items()}))
    assert inv["all"]["hosts"]["h3"]["tb_tc_add"] == tc["h3"]["tb_tc_add"]
    book = yaml.safe_load((PLAYBOOKS / "links.yml").read_text())[0]["tasks"]
    assert [t["loop"] for t in book] == ["{{ tb_tc_remove }}", "{{ tb_tc_add }}"]
    assert all(t["ansible.builtin.command"] == {"argv": "{{ item }}"} for t in book)
    with pytest.raises(ProviderError, match="host h1: no route .* h3"):
        links.tc_vars(plan, _node_hosts(plan), addrs, {**devices, "h1": {"10.0.0.2": "eth0"}})


def test_kernel_only_when_every_host_can(tmp_path):
    plan = _plan(tmp_path)
    nh = _node_hosts(plan)
    become = {h: hp.become for h, hp in plan.hosts.items()}
    assert links.choose_emulation(plan, nh, FACTS_OK, become, None)[0] == "kernel"
    no = {**FACTS_OK, "h2": {**FACTS_OK["h2"], "sch_netem": False}}
    em, why = links.choose_emulation(plan, nh, no, become, None)
    assert em == "userspace" and "host h2: no sch_netem" in why
    # not root and no become: no kernel
    user = {**FACTS_OK, "h2": {**FACTS_OK["h2"], "uid": 1000}}
    em, why = links.choose_emulation(plan, nh, user, become, None)
    assert em == "userspace" and "host h2: tc needs root" in why
    # not root but become: true on h1 is enough there
    assert links.choose_emulation(plan, nh, {**FACTS_OK, "h1": {**FACTS_OK["h1"], "uid": 1000}}, become,
                                  None)[0] == "kernel"
    # the override: userspace always; kernel skips the sch_netem check but not tc/root
    assert links.choose_emulation(plan, nh, FACTS_OK, become, "userspace")[0] == "userspace"
    assert links.choose_emulation(plan, nh, no, become, "kernel")[0] == "kernel"
    with pytest.raises(ProviderError, match="TESTBED_ANSIBLE_EMULATION=kernel: host h2: tc needs root"):
        links.choose_emulation(plan, nh, user, become, "kernel")
    with pytest.raises(ProviderError, match="choose kernel or userspace"):
        links.choose_emulation(plan, nh, FACTS_OK, become, "tc")


def test_links_tc_cannot_tell_apart_mean_userspace(tmp_path):
    # b1 -> b3 is 40 ms (ny-rome) but b4 (rome, placed on h1) -> b3 is 10 ms: one host pair, two shapes
    text = TOPO.replace("  b5: {", "  b4: {role: broker, site: rome, host: h1, neighbors: [b3]}\n  b5: {")
    plan = _plan(tmp_path, text)
    nh = _node_hosts(plan)
    with pytest.raises(ValueError, match="b3->b1 and b3->b4 both go from host h2 to host h1"):
        links.host_pair_links(plan, nh)
    em, why = links.choose_emulation(plan, nh, FACTS_OK, {}, None)
    assert em == "userspace" and "different delay" in why
    with pytest.raises(ProviderError, match="different delay"):
        links.choose_emulation(plan, nh, FACTS_OK, {}, "kernel")


def _tbhost(root: Path, *args: str) -> dict:
    r = subprocess.run([sys.executable, str(bundle.TBHOST), "--root", str(root), *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_host_helper_check_and_routes(tmp_path):
    out = _tbhost(tmp_path / "root", "check", "--emulation", "userspace")
    assert out["missing"] == [] and isinstance(out["apt"], bool) and out["uid"] >= 0
    probe = _tbhost(tmp_path / "root", "probe", "--route-to=127.0.0.1", "--route-to=127.0.0.2")
    assert probe["routes"] == {"127.0.0.1": "lo", "127.0.0.2": "lo"} and isinstance(probe["sch_netem"], bool)

