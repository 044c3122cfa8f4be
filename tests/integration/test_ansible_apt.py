"""The apt path of `prepare` for real: hosts whose SSH user may sudo (``become: true``) and that
lack ``tc``; kernel link emulation forced, so iproute2 must be installed with apt as root.

Marker ``ssh``: real SSH, real Ansible, real ``apt-get`` against the Debian mirror the hosts'
image was built from. Two containers of ``testbed-sshhost-sudo`` (``.ci/ssh-setup.sh``: no
python3, no iproute2, passwordless sudo, CAP_NET_ADMIN): python3 comes first (``raw``), then
iproute2 (Ansible's apt module). This kernel has no sch_netem, so after the install
the ``links`` playbook must fail on the netem qdisc, naming the hosts, and leave no qdisc
behind. Locally a missing prerequisite skips with the reason; in CI (CI=true) it fails.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from testbed import api
from testbed.errors import ProviderError
from testbed.testing.testhosts import SUDO_IMAGE, USER, SSHHosts, require

pytestmark = [pytest.mark.ssh, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("h1", "h2")

TOPO = """
version: 1
name: apt
protocol: pubsub
duration: 3s
sites: {ny: {}, rome: {}}
hosts:
  h1: {address: "{{ h1_addr }}", user: tb, key: "{{ key }}", site: ny, become: true}
  h2: {address: "{{ h2_addr }}", user: tb, key: "{{ key }}", site: rome, become: true}
nodes:
  b1: {role: broker, site: ny}
  b2: {role: broker, site: rome, neighbors: [b1]}
clients:
  pubs: {role: publisher, count: 1, attach: b1, rate: 5/s, size: 10B}
  subs: {role: subscriber, count: 1, attach: b2, filter: "[class,eq,'X']"}
links:
  default: {delay: 20ms}
"""


@pytest.fixture(scope="module")
def sudo_hosts(tmp_path_factory):
    require((SUDO_IMAGE,))
    with SSHHosts(tmp_path_factory.mktemp("sudo"), HOSTS, sudo=HOSTS) as hosts:
        yield hosts


def test_prepare_installs_iproute2_with_apt_then_kernel_links_fail_without_netem(sudo_hosts, tmp_path,
                                                                                   monkeypatch):
    hosts = sudo_hosts
    for h in HOSTS:
        assert hosts.exec(h, "sh", "-c", "command -v tc || echo none") == "none", h
        assert hosts.exec(h, "sh", "-c", "command -v python3 || echo none") == "none", h
    hosts.use(monkeypatch.setenv, tmp_path)
    monkeypatch.setenv("TESTBED_ANSIBLE_EMULATION", "kernel")
    topo = tmp_path / "apt.yaml"
    topo.write_text(TOPO)
    set_vars = {**{f"{h}_addr": a for h, a in hosts.addresses.items()}, "key": str(hosts.key)}
    lines: list[str] = []
    with pytest.raises(ProviderError) as ei:
        api.up(str(topo), set_vars=set_vars, provider="ansible", runs_dir=str(tmp_path / "runs"),
               schedule=False, progress=lines.append)
    msg = str(ei.value)
    # apt ran as root (become) and installed tc; the run got as far as the links playbook
    assert "prepare: install python3" in lines and "prepare: install missing packages" in lines, lines
    for h in HOSTS:
        assert hosts.exec(h, "sh", "-c", "command -v tc").endswith("/tc"), h
        assert hosts.exec(h, "sh", "-c", "command -v python3").endswith("/python3"), h
        assert hosts.exec(h, "dpkg-query", "-W", "-f", "${Status}", "iproute2") == "install ok installed"
    assert "playbook links" in msg and all(h in msg for h in HOSTS), msg
    assert "netem" in msg or "qdisc" in msg, msg
    # the failed up removed what it had shaped (state.json recorded the devices) and started nothing
    for h in HOSTS:
        assert "htb" not in hosts.exec(h, "tc", "qdisc", "show"), h
        assert hosts.node_processes(h) == [], h
        assert hosts.exec(h, "ls", f"/home/{USER}/.testbed/runs") == "", h
    # a killed run's leftover qdisc (made here by hand) is removed by `wipe`: the registry kept
    # the devices the run was about to shape
    from testbed.providers.ansible.provider import AnsibleProvider, registry_path

    reg = json.loads(registry_path().read_text())
    assert all(r.get("tc_devices") for r in reg), reg
    dev = reg[0]["tc_devices"][0]
    for h in HOSTS:
        subprocess.run(["docker", "exec", hosts.containers[h], "tc", "qdisc", "add", "dev", dev, "root", "handle",
                        "1:", "htb"], check=True)
        assert "htb" in hosts.exec(h, "tc", "qdisc", "show", "dev", dev), h
    AnsibleProvider.wipe(lines.append)
    assert any("tc qdiscs removed" in ln for ln in lines), lines
    for h in HOSTS:
        assert "htb" not in hosts.exec(h, "tc", "qdisc", "show", "dev", dev), h
        assert hosts.exec(h, "ls", "-a", f"/home/{USER}").split().count(".testbed") == 0, h
