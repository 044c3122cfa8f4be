"""Docker provider: pure parts (remote-engine host-key policy, naming, engine selection, image context)."""

from __future__ import annotations

import paramiko
import pytest

from testbed.errors import ProviderError
from testbed.providers import engine
from testbed.providers.image import apt_mirror, context_files
from testbed.providers.docker.provider import container_name, engine_url, network_name, run_labels
from testbed.topology.plan import HostPlan, NodePlan, Plan


def test_unknown_hosts_refused_by_default():
    assert engine.accept_unknown_hosts(None, env={}) is False
    assert isinstance(engine.host_key_policy(False), paramiko.RejectPolicy)


@pytest.mark.parametrize("value,expected", [("1", True), ("true", True), ("YES", True), ("0", False),
                                            ("", False), ("no", False)])
def test_env_opt_in(value, expected):
    assert engine.accept_unknown_hosts(None, env={engine.ACCEPT_ENV: value}) is expected


def test_explicit_flag_wins_over_env():
    assert engine.accept_unknown_hosts(False, env={engine.ACCEPT_ENV: "1"}) is False
    assert engine.accept_unknown_hosts(True, env={}) is True
    accept = engine.host_key_policy(True)
    assert not isinstance(accept, (paramiko.RejectPolicy, paramiko.AutoAddPolicy))  # accepts, never saves


def test_adapter_carries_policy_key_and_known_hosts(tmp_path, monkeypatch):
    kh = tmp_path / "known_hosts"
    key = paramiko.RSAKey.generate(1024)
    kh.write_text(f"engine.example {key.get_name()} {key.get_base64()}\n")
    monkeypatch.setenv(engine.KNOWN_HOSTS_ENV, str(kh))
    a = engine.ssh_adapter("ssh://alice@engine.example:2222", accept_unknown=False,
                           key_filename="/keys/id", connect=False)
    assert isinstance(a.ssh_client._policy, paramiko.RejectPolicy)
    assert a.ssh_params["hostname"] == "engine.example"
    assert a.ssh_params["port"] == 2222
    assert a.ssh_params["username"] == "alice"
    assert a.ssh_params["key_filename"] == "/keys/id"
    assert a.ssh_client.get_host_keys().lookup("engine.example") is not None
    b = engine.ssh_adapter("ssh://alice@engine.example", accept_unknown=True, connect=False)
    assert not isinstance(b.ssh_client._policy, (paramiko.RejectPolicy, paramiko.AutoAddPolicy))


def test_bad_ssh_url():
    with pytest.raises(ProviderError, match="ssh://"):
        engine.parse_ssh_url("tcp://x:2375")


def _plan(hosts: dict[str, HostPlan]) -> Plan:
    nodes = {f"b{i}": NodePlan(f"b{i}", "node", "broker", "s", h) for i, h in enumerate(hosts)}
    return Plan("t", "echo", "docker", 1.0, 1, ("s",), hosts, nodes, {}, ())


def test_engine_url_selection():
    assert engine_url(_plan({"h": HostPlan("h")})) is None
    assert engine_url(_plan({"h": HostPlan("h", docker="ssh://u@e")})) == "ssh://u@e"
    assert engine_url(_plan({"h": HostPlan("h", address="10.1.1.1", user="bob", port=2200)})) == \
        "ssh://bob@10.1.1.1:2200"
    with pytest.raises(ProviderError, match="one engine"):
        engine_url(_plan({"h1": HostPlan("h1"), "h2": HostPlan("h2", docker="ssh://u@e")}))


def test_names_and_labels():
    assert container_name("run-1", "b1") == "tb-run-1-b1"
    assert container_name("run 1", "b/1") == "tb-run_1-b_1"
    assert network_name("r") == "tb-r"
    assert run_labels("r", **{"testbed.node": "b1"}) == {"testbed.run": "r", "testbed.managed": "1",
                                                          "testbed.node": "b1"}


def test_image_context_holds_only_node_files():
    import re

    from testbed import registry

    rels = [rel for _, rel in context_files()]
    assert rels[0] == "Dockerfile"
    assert "code/testbed/__init__.py" in rels and "code/testbed/protocols/__init__.py" in rels
    node_part = re.compile(r"code/testbed/protocols/[a-z_0-9]+/(__init__\.py|nodes/.*)")
    assert all(r == "Dockerfile" or r == "code/testbed/__init__.py" or r.startswith("code/testbed/nodes/")
               or r == "code/testbed/protocols/__init__.py" or node_part.fullmatch(r) for r in rels), rels
    assert not any("__pycache__" in r or r.endswith(".pyc") for r in rels)
    # every runnable protocol's nodes part is shipped, and nothing of its controller side
    for p in registry.registry():
        if p.nodes:
            assert f"code/{p.nodes.replace('.', '/')}/__init__.py" in rels, p.name
    assert not any("/analysis/" in r or r.endswith("/topology.py") or "/experiments" in r for r in rels)


def test_apt_mirror_parsing(tmp_path, monkeypatch):
    monkeypatch.delenv("TESTBED_DEBIAN_MIRROR", raising=False)
    deb822 = tmp_path / "debian.sources"
    deb822.write_text("Types: deb\nURIs: http://mirror.example/debian-security\nSuites: x\n\n"
                      "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n")
    assert apt_mirror([deb822]) == "http://mirror.example/debian"
    legacy = tmp_path / "sources.list"
    legacy.write_text("deb [arch=amd64] http://old.example/debian bookworm main\n")
    assert apt_mirror([legacy]) == "http://old.example/debian"
    assert apt_mirror([tmp_path / "missing"]) == "http://deb.debian.org/debian"
    monkeypatch.setenv("TESTBED_DEBIAN_MIRROR", "http://x/debian")
    assert apt_mirror([legacy]) == "http://x/debian"


class _SlowRemovalEngine:
    """An engine whose container removal takes ``removal_s`` (as on a slow storage driver): the
    container stays listed, and a second remove answers 409 "removal already in progress"."""

    def __init__(self, removal_s: float):
        import time as _t

        self._t = _t
        self.removal_s = removal_s
        self.conts = {"c1": None, "c2": None}  # id -> time its removal started
        self.api = self

    def containers(self, all, filters):  # noqa: A002 - the docker API's name
        now = self._t.monotonic()
        for cid, t in list(self.conts.items()):
            if t is not None and now - t >= self.removal_s:
                del self.conts[cid]
        return [{"Id": cid, "Names": [f"/{cid}"], "State": "removing" if t else "running"}
                for cid, t in self.conts.items()]

    def remove_container(self, cid, force, v):
        import docker.errors

        if self.conts.get(cid) is not None:
            raise docker.errors.APIError("removal in progress",
                                         response=type("R", (), {"status_code": 409, "reason": ""})())
        self.conts[cid] = self._t.monotonic()

    def networks(self, filters):
        return []

    def volumes(self, filters):
        return {"Volumes": []}


def test_remove_labeled_waits_for_a_slow_removal_instead_of_giving_up():
    """CI failed with "keep appearing" on a removal that took ~3 s: the loop counted passes, not time."""
    from testbed.providers.docker.provider import remove_labeled

    eng = _SlowRemovalEngine(removal_s=1.5)
    removed = remove_labeled(eng, {"testbed.run": "r"}, settle_s=0.05, timeout_s=30)
    assert sorted(removed) == ["container c1", "container c2"] and not eng.conts


def test_remove_labeled_names_what_is_left_after_its_timeout():
    from testbed.providers.docker.provider import remove_labeled

    eng = _SlowRemovalEngine(removal_s=3600)
    with pytest.raises(ProviderError, match=r"still there after 0 s \(container c1 \(removing\), container c2"):
        remove_labeled(eng, {"testbed.run": "r"}, settle_s=0.05, timeout_s=0.3)
