"""`--provider ansible` for real: three SSH hosts (containers running sshd), real Ansible, real nodes.

Marker ``ssh``: locally a missing prerequisite (Docker engine to make the hosts, the host
image, ssh-keygen) skips with the reason; in CI (CI=true) it fails.

The hosts are containers of ``testbed-sshhost`` (``.ci/ssh-setup.sh``: sshd + python3, no
msgpack, no Docker engine) on the default bridge; each gets fresh host keys, the test's own
ed25519 user key, and its host key pinned in a known_hosts file (StrictHostKeyChecking=yes).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from testbed import api
from testbed.testing.testhosts import (
    HOSTS, IMAGE, USER, SSHHosts, require, set_vars, spread_smoke,
)

pytestmark = [pytest.mark.ssh, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ssh_hosts(tmp_path_factory):
    require((IMAGE,))
    with SSHHosts(tmp_path_factory.mktemp("ssh")) as hosts:
        yield hosts


@pytest.fixture
def ansible_env(ssh_hosts, tmp_path, monkeypatch):
    ssh_hosts.use(monkeypatch.setenv, tmp_path)
    return ssh_hosts


def test_smoke_across_three_hosts(ansible_env, tmp_path):
    hosts = ansible_env
    topo = spread_smoke(tmp_path)
    (rd,) = api.run(str(topo), set_vars=set_vars(hosts), provider="ansible", runs_dir=str(tmp_path / "runs"))
    m = rd.manifest
    plan = rd.plan()
    assert m["provider"] == "ansible" and m["emulation"] == "userspace"
    # no host has sch_netem here: userspace was chosen, the tc playbook was not run
    assert all(f"host {h}: no sch_netem" in m["emulation_reason"] for h in HOSTS), m["emulation_reason"]
    assert m["hosts_sch_netem"] == {h: False for h in HOSTS}
    assert "links_s" not in rd.state["timings"] and "tc_devices" not in rd.state
    # processes really spread: every host ran nodes, at its own address
    dep = rd.deployment()
    assert dep.emulation == "userspace" and "tc_commands" not in dep.extra
    assert all(dep.extra["hosts"][h]["routes"] for h in HOSTS)  # egress devices were probed
    for h in HOSTS:
        assert "htb" not in hosts.exec(h, "tc", "qdisc", "show"), h
    assert {ep.host for ep in dep.endpoints.values()} == set(HOSTS)
    for ep in dep.endpoints.values():
        assert ep.data[0] == hosts.addresses[ep.host]
        # control on the host's loopback, reached through the host's SSH connection
        assert ep.control[0] == "127.0.0.1" and ep.tunnel["address"] == hosts.addresses[ep.host], ep
    # faults on every host, all done on time
    tl = m["timeline"]
    assert tl and all(e["status"] == "done" for e in tl), tl
    fault_hosts = {plan.nodes[t].host for e in tl for t in e["target"]}
    assert fault_hosts == set(HOSTS)
    assert {e["op"] for e in tl} >= {"crash", "restart", "pause", "resume", "stall", "cut"}
    # clock offsets per host, with an uncertainty
    offs = m["clock_offsets"]
    assert set(offs) == set(HOSTS) and all(o["uncertainty_ns"] > 0 for o in offs.values())
    # every process's log came back (the crashed one too) and the history checks pass
    assert {p.stem for p in rd.logs_dir.glob("*.jsonl")} == set(plan.nodes)
    checks = api.run_checks(rd)
    assert {c["name"] for c in checks} >= {"no_duplicates", "filter_match", "fifo", "completeness"}
    assert all(c["passed"] for c in checks), checks
    # the inter-host delays were emulated: STOCK quotes from h1 (pub-stock at b2, ny) reach
    # sub-cheap on h2 (at b4, rome) over b2-b1 (10 ms), b1-b3 (40 ms), b3-b4 (10 ms)
    off = {h: o["offset_ns"] for h, o in offs.items()}
    lat = sorted(((e["t"] - off["h2"]) - (e["pub_t"] - off["h1"])) / 1e6
                 for e in map(json.loads, (rd.logs_dir / "sub-cheap.jsonl").read_text().splitlines())
                 if e["ev"] == "deliver" and e["publisher"].startswith("pub-stock"))
    assert len(lat) > 100 and 50.0 <= lat[len(lat) // 2] <= 150.0, lat[len(lat) // 2]
    assert (rd.path / "hosts" / "h1.json").exists()
    facts = json.loads((rd.path / "hosts" / "h2.json").read_text())
    assert facts.get("ansible_hostname") == "h2"
    # nothing left behind on the hosts, and no private key anywhere in the run directory
    for h in HOSTS:
        assert hosts.node_processes(h) == [], h
        assert "tbhost.py" not in hosts.exec(h, "ps", "-eo", "args"), h  # agent sessions ended
        assert hosts.exec(h, "ls", f"/home/{USER}/.testbed/runs") == "", h
    secret = hosts.key.read_text().split("\n")[1]
    for p in rd.path.rglob("*"):
        if p.is_file():
            assert secret not in p.read_text(errors="replace"), p


def test_unknown_host_key_is_refused(ansible_env, tmp_path, monkeypatch):
    hosts = ansible_env
    monkeypatch.setenv("TESTBED_KNOWN_HOSTS", str(tmp_path / "empty_known_hosts"))
    (tmp_path / "empty_known_hosts").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/known_hosts either
    from testbed.errors import ProviderError

    topo = spread_smoke(tmp_path)
    with pytest.raises(ProviderError) as ei:
        api.run(str(topo), set_vars=set_vars(hosts), provider="ansible", runs_dir=str(tmp_path / "runs"),
                analyze=False)
    msg = str(ei.value)
    assert "unreachable" in msg and all(h in msg for h in HOSTS), msg
    for h in HOSTS:
        assert hosts.node_processes(h) == []


def test_up_inject_down_and_wipe(ansible_env, tmp_path):
    """`testbed up` (background controller), a fault injected by hand, `down`, then `wipe`."""
    from testbed.providers.ansible.provider import AnsibleProvider

    hosts = ansible_env
    topo = spread_smoke(tmp_path)
    runs = str(tmp_path / "runs")
    rd = api.up(str(topo), set_vars=set_vars(hosts), provider="ansible", runs_dir=runs)  # background schedule
    st = api.status(rd.run_id, runs_dir=runs)  # status pings every node: through the SSH forwards
    assert {n["state"] for n in st["nodes"]} == {"running"}
    # another machine on the hosts' network (h2) reaches b1's data port on h1, never its control
    # port: that listens on h1's loopback only, for the controller's direct-tcpip channels
    ep = rd.deployment().endpoints["b1"]
    assert ep.host == "h1" and ep.control[0] == "127.0.0.1" and ep.tunnel
    probe = ("import socket, sys\n"
             "for port in sys.argv[2:]:\n"
             "    try:\n"
             "        socket.create_connection((sys.argv[1], int(port)), timeout=3).close(); print(port, 'open')\n"
             "    except OSError as e: print(port, type(e).__name__)\n")
    seen = hosts.exec("h2", "python3", "-c", probe, hosts.addresses["h1"], str(ep.data[1]), str(ep.control[1]))
    assert seen.split("\n") == [f"{ep.data[1]} open", f"{ep.control[1]} ConnectionRefusedError"], seen
    listening = hosts.exec("h1", "cat", "/proc/net/tcp")
    assert f"0100007F:{ep.control[1]:04X} 00000000:0000 0A" in listening  # 127.0.0.1, LISTEN
    assert f"00000000:{ep.data[1]:04X} 00000000:0000 0A" in listening  # 0.0.0.0, LISTEN
    deadline = time.monotonic() + 60
    while rd.manifest.get("status") != "running" and time.monotonic() < deadline:
        time.sleep(0.1)  # the controller started the workload (every node must be up for that)
    assert rd.manifest.get("status") == "running", (rd.path / "controller.log").read_text()
    entries = api.inject("{crash: b4}", rd.run_id, runs_dir=runs)
    assert entries[0]["status"] == "done", entries
    states = {n["node"]: n["state"] for n in api.status(rd.run_id, runs_dir=runs)["nodes"]}
    assert states["b4"] == "stopped" and states["b1"] == "running"
    assert len([p for h in HOSTS for p in hosts.node_processes(h)]) == len(rd.plan().nodes) - 1
    # the background controller (a fresh provider: agents opened by warm_up) fires the
    # schedule's process faults on the hosts: crash b3 at 12 s, restart at 14 s
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        tl = rd.manifest.get("timeline", [])
        if tl and all(e["status"] != "pending" for e in tl if e["planned_s"] <= 14.0):
            break
        time.sleep(0.5)
    early = [e for e in rd.manifest["timeline"] if e["planned_s"] <= 14.0]
    assert {e["op"] for e in early} >= {"crash", "restart", "pause", "resume"}
    assert all(e["status"] == "done" for e in early), early
    api.down(rd.run_id, runs_dir=runs)
    assert {p.stem for p in rd.logs_dir.glob("*.jsonl")} == set(rd.plan().nodes)
    for h in HOSTS:
        assert hosts.node_processes(h) == [], h
        assert hosts.exec(h, "ls", f"/home/{USER}/.testbed/runs") == "", h
        assert "tbhost.py" not in hosts.exec(h, "ps", "-eo", "args"), h
    AnsibleProvider().down(rd, lambda s: None)  # idempotent
    assert hosts.exec(HOSTS[0], "ls", f"/home/{USER}/.testbed") != ""  # venv + code stay until wipe
    removed = AnsibleProvider.wipe(lambda s: None)
    assert len(removed) == len(HOSTS)
    for h in HOSTS:
        assert hosts.exec(h, "ls", "-a", f"/home/{USER}") .split().count(".testbed") == 0, h


def test_missing_tc_that_cannot_be_installed_names_the_host(ansible_env, tmp_path, monkeypatch):
    """Kernel emulation forced: tc (iproute2) is needed; h3 lacks it and its user may not become
    root, so prepare fails naming h3 and the package. With tc back, the forced kernel choice
    still fails by name: the hosts' user is not root and no host sets become: true."""
    from testbed.errors import ProviderError

    hosts = ansible_env
    monkeypatch.setenv("TESTBED_ANSIBLE_EMULATION", "kernel")
    topo = spread_smoke(tmp_path)
    tc = hosts.exec("h3", "sh", "-c", "command -v tc")
    assert tc.endswith("/tc"), tc
    subprocess.run(["docker", "exec", hosts.containers["h3"], "mv", tc, tc + ".hidden"], check=True)
    try:
        with pytest.raises(ProviderError) as ei:
            api.run(str(topo), set_vars=set_vars(hosts), provider="ansible", runs_dir=str(tmp_path / "runs"),
                    analyze=False)
    finally:
        subprocess.run(["docker", "exec", hosts.containers["h3"], "mv", tc + ".hidden", tc], check=True)
    msg = str(ei.value)
    assert "failed: h3 (missing packages: missing iproute2 and cannot install: the user is not root and the " \
           "topology does not set become: true on this host)" in msg, msg
    assert "h1" not in msg and "h2" not in msg, msg
    with pytest.raises(ProviderError) as ei:
        api.run(str(topo), set_vars=set_vars(hosts), provider="ansible", runs_dir=str(tmp_path / "runs2"),
                analyze=False)
    msg = str(ei.value)
    assert "TESTBED_ANSIBLE_EMULATION=kernel: host h1: tc needs root" in msg and "host h3" in msg, msg
    for h in HOSTS:
        assert hosts.node_processes(h) == [], h
