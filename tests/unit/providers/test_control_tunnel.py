"""Remote control endpoints carry the SSH target the controller reaches them through."""

from __future__ import annotations

import socket

import pytest

from testbed.errors import ProviderError
from testbed.providers.ansible.provider import LOOPBACK, ssh_tunnel as ansible_tunnel
from testbed.providers.control import Controls
from testbed.providers.docker.provider import ssh_tunnel as docker_tunnel
from testbed.runs.deployment import Deployment, Endpoint
from testbed.topology.plan import HostPlan


def test_the_tunnel_survives_the_deployment_record():
    t = {"kind": "ansible", "address": "10.0.0.1", "port": 22, "user": "tb", "key": "/k"}
    dep = Deployment("r", "ansible", "userspace", {"b1": Endpoint("b1", "h1", ("10.0.0.1", 5000),
                                                                 (LOOPBACK, 5001), "42", t)})
    back = Deployment.from_dict(dep.to_dict())
    assert back.endpoints["b1"].tunnel == t and back.endpoints["b1"].control == ("127.0.0.1", 5001)
    old = dep.to_dict()
    del old["endpoints"]["b1"]["tunnel"]  # a deployment written before tunnels: plain TCP
    assert Deployment.from_dict(old).endpoints["b1"].tunnel is None


def test_ssh_targets_of_the_providers():
    hp = HostPlan("h1", address="10.0.0.7", user="tb", port=2222, key="/keys/lab")
    assert ansible_tunnel(hp) == {"kind": "ansible", "address": "10.0.0.7", "port": 2222, "user": "tb",
                                  "key": "/keys/lab"}
    assert docker_tunnel("ssh://ops@engine.lab:2200", "/k") == {
        "kind": "docker", "address": "engine.lab", "port": 2200, "user": "ops", "key": "/k"}
    assert docker_tunnel("ssh://engine.lab", None)["port"] == 22
    assert docker_tunnel(None, None) is None and docker_tunnel("unix:///var/run/docker.sock", None) is None


def test_a_tunnelled_endpoint_is_never_reached_over_plain_tcp():
    """The endpoint's control address is a listening socket here; its tunnel names an SSH port
    nothing listens on: the call fails naming the SSH target, the socket is never connected to."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(0.2)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        ssh_port = free.getsockname()[1]
    t = {"kind": "ansible", "address": "127.0.0.1", "port": ssh_port, "user": "tb", "key": None}
    dep = Deployment("r", "ansible", "userspace", {"b1": Endpoint("b1", "h1", ("127.0.0.1", 1),
                                                                 srv.getsockname(), "", t)})
    controls = Controls(dep, timeout=1.0, secret=b"k" * 32)
    try:
        with pytest.raises(ProviderError, match=f"through ssh://tb@127.0.0.1:{ssh_port}"):
            controls.call("b1", "ping")
        with pytest.raises(socket.timeout):
            srv.accept()
    finally:
        controls.close()
        srv.close()


def test_a_tcp_engine_is_refused_in_one_line(tmp_path):
    from testbed.providers.docker.provider import DockerProvider
    from testbed.runs.rundir import RunDir
    from testbed.topology.plan import NodePlan, Plan

    plan = Plan(name="t", protocol="echo", provider="docker", duration_s=1.0, seed=1, sites=("s1",),
                hosts={"h1": HostPlan("h1", docker="tcp://10.0.0.9:2375")},
                nodes={"b1": NodePlan("b1", "node", "broker", "s1", "h1")}, links={}, actions=(), params={})
    called = []
    p = DockerProvider("img", client_factory=lambda url: called.append(url))
    with pytest.raises(ProviderError) as e:
        p.up(plan, RunDir.create(tmp_path, "r1"), lambda m: None)
    assert "tcp://10.0.0.9:2375" in str(e.value) and "ssh://" in str(e.value) and "\n" not in str(e.value)
    assert called == []  # refused before any connection
