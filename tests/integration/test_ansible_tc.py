"""testbed/providers/ansible/playbooks/links.yml for real: ansible-playbook (local connection, as root) in a fresh network
namespace, applying the tc argument lists the ansible provider renders for its kernel link
emulation path, twice (idempotent), then the teardown lists.

This kernel has no sch_netem, so the netem qdisc lines are left out of the lists; the HTB root,
classes and u32 filters of the same lists are applied for real. Needs root, ``unshare`` and
``tc``: a missing one skips locally and fails under CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.providers.ansible import links
from testbed.topology.loader import plans

pytestmark = [pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
TOPO = """
version: 1
name: links
protocol: pubsub
duration: 5s
sites: {ny: {}, rome: {}, tokyo: {}}
hosts:
  h1: {address: 127.0.0.1, site: ny}
  h2: {address: 127.0.0.2, site: rome}
  h3: {address: 127.0.0.3, site: tokyo}
nodes:
  b1: {role: broker, site: ny}
  b3: {role: broker, site: rome, neighbors: [b1]}
  b5: {role: broker, site: tokyo, neighbors: [b1]}
links:
  default: {delay: 10ms}
  rules:
    - {sites: [ny, rome], delay: 40ms, jitter: 5ms, loss: 1%}
    - {sites: [ny, tokyo], delay: 80ms, rate: 10mbit}
"""
NETNS_SCRIPT = r"""
import json, subprocess, sys
from testbed.providers.ansible.inventory import render_inventory_hosts
from testbed.providers.ansible.runner import run_playbook

tc = json.loads(sys.argv[1])
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
rec = [{"name": "h1", "address": "127.0.0.1", "port": 22, "user": None, "key": None}]

def play(v):
    inv = render_inventory_hosts(rec, "r", "", {"h1": {"ansible_connection": "local", "tb_root": "/nonexistent", **v}})
    run_playbook("links", inv, {}, lambda s: None, timeout=120)
    return {k: subprocess.run(["tc", k, "show", "dev", "lo"], capture_output=True, text=True, check=True).stdout
            for k in ("qdisc", "class", "filter")}

out = {"first": play(tc["apply"]), "again": play(tc["apply"]), "down": play(tc["down"])}
print(json.dumps(out))
"""


def test_links_playbook_applies_idempotently_and_removes_in_a_network_namespace(tmp_path):
    """On ``lo`` of a fresh network namespace: remove-then-add makes the second apply succeed
    (a second plain add would fail: the root qdisc exists); teardown leaves lo bare."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("tc") is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI needs root, unshare and tc for the links playbook test")
        pytest.skip("needs root, unshare and tc")
    (tmp_path / "t.yaml").write_text(TOPO)
    (plan,) = plans(tmp_path / "t.yaml", provider="ansible")
    addrs = {"h1": "127.0.0.1", "h2": "127.0.0.2", "h3": "127.0.0.3"}
    devices = {h: {a: "lo" for a in addrs.values()} for h in addrs}
    tc = links.tc_vars(plan, {n: p.host for n, p in plan.nodes.items()}, addrs, devices)["h1"]
    apply = {"tb_tc_remove": tc["tb_tc_remove"], "tb_tc_add": [c for c in tc["tb_tc_add"] if "netem" not in c]}
    assert len(apply["tb_tc_add"]) == len(tc["tb_tc_add"]) - 2  # two destination hosts, two netem lines
    down = links.teardown_vars(links.devices_used({"h1": tc}))["h1"]
    r = subprocess.run(["unshare", "--net", sys.executable, "-c", NETNS_SCRIPT,
                        json.dumps({"apply": apply, "down": down})],
                       capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for phase in ("first", "again"):
        assert "qdisc htb 1: root" in out[phase]["qdisc"], out[phase]
        assert out[phase]["class"].count("class htb 1:") == 2, out[phase]
        assert "7f000002" in out[phase]["filter"] and "7f000003" in out[phase]["filter"], out[phase]
    assert "htb" not in out["down"]["qdisc"] and out["down"]["class"].strip() == "", out["down"]
