"""The ansible provider's pure parts (inventory, layout, bundle, log unpacking, host helper)
and the playbook runner's typed error against a real closed port (real ansible-playbook)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import time
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from testbed.errors import ProviderError
from testbed.providers.ansible import bundle, inventory
from testbed.providers.ansible.provider import _extract_logs
from testbed.providers.ansible.runner import HostsUnreachable, PlaybookError, run_playbook, ssh_common_args
from testbed.topology.plan import HostPlan, NodePlan, Plan

TBHOST = Path(bundle.TBHOST)


def _plan(hosts: dict[str, HostPlan], placement: dict[str, str]) -> Plan:
    nodes = {n: NodePlan(n, "node", "broker", "s", h) for n, h in placement.items()}
    return Plan("p", "pubsub", "ansible", 1.0, 0, ("s",), hosts, nodes, {}, ())


class _UnsafeLoader(yaml.SafeLoader):
    """Reads ``!unsafe "text"`` as Ansible does (the text, never templated), marking it."""


class Unsafe(str):
    pass


_UnsafeLoader.add_constructor("!unsafe", lambda loader, node: Unsafe(loader.construct_scalar(node)))


def load_inventory(text: str) -> dict:
    return yaml.load(text, Loader=_UnsafeLoader)


def test_inventory_quotes_every_value_and_keeps_only_the_key_path():
    hosts = {
        "yes": HostPlan("yes", address="10.0.0.1", user="u.x", port=2222, key="/k/id ed25519"),
        "h2": HostPlan("h2", address="host-2.example", user=None),
    }
    plan = _plan(hosts, {"a": "yes", "b": "h2", "c": "yes"})
    text = inventory.render_inventory(plan, "run-1", ssh_common_args(["/kh/one", "/kh/two"]),
                                      {"yes": {"tb_root": "/home/u/.testbed"}})
    inv = load_inventory(text)["all"]
    assert set(inv["hosts"]) == {"yes", "h2"}  # "yes" stays a string, not a boolean
    h = inv["hosts"]["yes"]
    assert h["ansible_host"] == "10.0.0.1" and h["ansible_port"] == 2222 and h["ansible_user"] == "u.x"
    # every string is tagged unsafe (Ansible never templates it); numbers and booleans stay typed
    assert all(isinstance(h[k], Unsafe) for k in ("ansible_host", "ansible_user", "ansible_ssh_private_key_file",
                                                  "tb_root"))
    assert all(isinstance(n, Unsafe) for n in h["tb_nodes"]) and h["tb_become"] is False
    assert h["ansible_ssh_private_key_file"] == "/k/id ed25519"
    assert h["tb_nodes"] == ["a", "c"] and h["tb_root"] == "/home/u/.testbed"
    assert "ansible_user" not in inv["hosts"]["h2"] and inv["hosts"]["h2"]["tb_nodes"] == ["b"]
    assert "StrictHostKeyChecking=yes" in inv["vars"]["ansible_ssh_common_args"]
    assert "'UserKnownHostsFile=/kh/one /kh/two'" in inv["vars"]["ansible_ssh_common_args"]


@pytest.mark.parametrize("field,value,match", [
    ("address", "{{ lookup('pipe', 'id') }}", "hosts.h1.address: .* is not a host name or an IP address"),
    ("address", "10.0.0.1 -oProxyCommand=x", "is not a host name"),
    ("address", "h1.example\n", "is not a host name"),
    ("user", "{{ lookup('pipe', 'id') }}", "hosts.h1.user: .* is not a user name"),
    ("user", "root\n", "is not a user name"),
    ("key", "/k/{{ lookup('pipe', 'id') }}", "hosts.h1.key: .* is not a plain path"),
])
def test_ansible_templates_in_a_host_field_are_refused(field, value, match):
    kw = {"address": "10.0.0.1", "user": "u", "key": None, field: value}
    plan = _plan({"h1": HostPlan("h1", **kw)}, {"a": "h1"})
    with pytest.raises(ProviderError, match=match):
        inventory.render_inventory(plan, "run-1", "")


def test_a_root_a_host_reports_must_be_an_absolute_plain_path():
    plan = _plan({"h1": HostPlan("h1", address="h1.example")}, {"a": "h1"})
    for bad in ("relative/.testbed", "/home/{{ lookup('pipe','id') }}", "/home/u\n.testbed", 7):
        with pytest.raises(ProviderError, match="tb_root: .* is not an absolute path"):
            inventory.render_inventory(plan, "run-1", "", {"h1": {"tb_root": bad}})
    with pytest.raises(ProviderError, match="tb_root"):
        inventory.render_inventory_hosts([{"name": "h1", "address": "h1.example"}], "wipe", "",
                                         {"h1": {"tb_root": "{{ x }}"}})
    # a brace that is not a template in another value is text, tagged unsafe
    text = inventory.render_inventory(plan, "run-{x}", "", {"h1": {"tb_root": "/home/u/.testbed", "tb_x": "{{ y }}"}})
    h = load_inventory(text)["all"]["hosts"]["h1"]
    assert isinstance(h["tb_x"], Unsafe) and h["tb_x"] == "{{ y }}"


def test_hosts_without_address_are_refused_by_name():
    plan = _plan({"h1": HostPlan("h1", address=None)}, {"a": "h1"})
    with pytest.raises(ProviderError, match="host h1: .*address"):
        inventory.plan_hosts(plan)


def test_layout_uses_the_host_address_and_two_free_ports_per_node():
    hosts = {"h1": HostPlan("h1", address="10.0.0.1"), "h2": HostPlan("h2", address="10.0.0.2")}
    plan = _plan(hosts, {"a": "h1", "b": "h2", "c": "h1"})
    lay = inventory.layout(plan, {"h1": [5000, 5001, 5002, 5003], "h2": [6000, 6001]})
    assert list(lay.endpoints) == ["a", "b", "c"]
    assert lay.endpoints["a"].data == ("10.0.0.1", 5000) and lay.endpoints["a"].control == ("10.0.0.1", 5001)
    assert lay.endpoints["c"].data == ("10.0.0.1", 5002)
    assert lay.peers()["b"] == ("10.0.0.2", 6000)
    with pytest.raises(ProviderError, match="host h2: needs 2 free ports"):
        inventory.layout(plan, {"h1": [1, 2, 3, 4], "h2": [7]})


def test_bundle_holds_the_node_package_only_and_is_deterministic(tmp_path):
    p1, d1 = bundle.build_bundle(tmp_path / "a")
    p2, d2 = bundle.build_bundle(tmp_path / "b")
    assert d1 == d2 and p1.read_bytes() == p2.read_bytes()
    with tarfile.open(p1) as tf:
        names = set(tf.getnames())
    assert {"testbed/__init__.py", "testbed/nodes/__main__.py", "tbhost.py", "vendor/msgpack/fallback.py"} <= names
    assert not any(n.startswith(("testbed/providers", "testbed/analysis")) or n == "testbed/api.py" for n in names)
    # every protocol's nodes part travels, none of its controller side
    assert {"testbed/protocols/__init__.py", "testbed/protocols/pubsub/__init__.py",
            "testbed/protocols/pubsub/nodes/broker.py", "testbed/protocols/ordering/nodes/core.py"} <= names
    assert not any(n.startswith("testbed/protocols/") and ("/analysis/" in n or n.endswith(("/topology.py",
                   "/experiments.py")) or "/experiments/" in n or "/topologies/" in n) for n in names)
    assert not any(n.endswith(".so") for n in names)


def test_the_shipped_host_helper_runs_from_the_shipped_files_alone(tmp_path):
    """tbhost.py imports its modules by plain name: it runs from the bundle's code directory and
    from the files prepare copies to ~/.testbed/bin, with no testbed package and no PYTHONPATH."""
    path, _ = bundle.build_bundle(tmp_path / "cache")
    code = tmp_path / "code"
    with tarfile.open(path) as tf:
        for m in tf.getmembers():
            if "/" not in m.name:  # the host helper's files only: no testbed/ beside them
                tf.extract(m, code, filter="data")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for p in bundle.hostside_files():  # what prepare.yml copies
        (bin_dir / p.name).write_bytes(p.read_bytes())
    assert sorted(p.name for p in code.iterdir()) == sorted(p.name for p in bin_dir.iterdir())
    for where in (code, bin_dir):
        r = subprocess.run([sys.executable, "-E", "-s", str(where / "tbhost.py"), "--root", str(tmp_path / "root"),
                            "check", "--emulation", "userspace"], capture_output=True, text=True, timeout=60,
                           cwd=tmp_path, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["uid"] == os.getuid()


def _tgz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_collected_logs_are_unpacked_by_plain_name_only(tmp_path):
    tgz = tmp_path / "h1.tgz"
    tgz.write_bytes(_tgz({"logs/b1.jsonl": b'{"ev":1}\n', "logs/../../evil": b"x", "/etc/passwd": b"x",
                          "logs/sub/x.jsonl": b"x", "other/b2.jsonl": b"x"}))
    dest = tmp_path / "logs"
    dest.mkdir()
    assert _extract_logs(tgz, dest) == 1
    assert [p.name for p in dest.iterdir()] == ["b1.jsonl"]
    assert _extract_logs(tmp_path / "missing.tgz", dest) == 0


def _tbhost(*args: str, root: Path) -> dict:
    r = subprocess.run([sys.executable, str(TBHOST), "--root", str(root), *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_host_helper_prepares_a_root_and_reports_facts(tmp_path):
    root = tmp_path / "root"
    out = _tbhost("prepare", "--ports", "4", "--digest", "abc123", root=root)
    assert out["root"] == str(root) and Path(out["venv"]).exists()
    assert (root / "code" / "abc123").is_dir() and oct(root.stat().st_mode & 0o777) == "0o700"
    assert len(set(out["ports"])) == 4 and isinstance(out["sch_netem"], bool) and out["msgpack"] is True
    # configs: plain .json names only; the tar is consumed
    tar = tmp_path / "c.tar"
    bundle.tar_files(tar, {"b1.json": b"{}", "../x.json": b"{}", "a b.json": b"{}"})
    r = subprocess.run([sys.executable, str(TBHOST), "--root", str(root), "start", "--configs", str(tar), "run-1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "bad name" in r.stderr  # "a b" is refused before anything runs
    assert not (root / "runs" / "run-1" / "configs" / "x.json").exists()
    assert _tbhost("remove", "run-1", root=root)["stopped"] == []
    assert not (root / "runs" / "run-1").exists()
    assert _tbhost("wipe", root=root)["removed"] == str(root) and not root.exists()


def test_playbook_failure_names_the_unreachable_host(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    plan = _plan({"h9": HostPlan("h9", address="127.0.0.1", port=port, user="nobody")}, {"a": "h9"})
    inv = inventory.render_inventory(plan, "run-x", ssh_common_args([str(tmp_path / "kh")]))
    lines: list[str] = []
    with pytest.raises(HostsUnreachable) as ei:
        run_playbook("prepare", inv, {"tb_hostside": [str(p) for p in bundle.hostside_files()], "tb_digest": "d"}, lines.append, timeout=60)
    e = ei.value
    assert isinstance(e, PlaybookError) and isinstance(e, ProviderError)
    assert set(e.unreachable) == {"h9"} and e.host == "h9" and "unreachable: h9" in str(e)
    assert lines and lines[0].startswith("prepare: ")  # per-task progress was streamed


def test_host_agent_reports_a_node_that_died_with_its_stderr(tmp_path):
    """The agent protocol, locally: spawn a node with a broken config, see it gone, read why."""
    root = tmp_path / "root"
    code = str(Path(__file__).resolve().parents[3])  # holds testbed/
    cfg_dir = root / "runs" / "run-1" / "configs"
    cfg_dir.mkdir(parents=True)
    (cfg_dir / "b1.json").write_text("{}")  # no required key: the node exits at once
    p = subprocess.Popen([sys.executable, str(TBHOST), "--root", str(root), "--code", code, "agent", "run-1"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def call(**req):
        p.stdin.write(json.dumps(req) + "\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())

    try:
        assert call(id=1, op="ping")["ok"]
        pid = call(id=2, op="spawn", node="b1")["pid"]
        assert (root / "runs" / "run-1" / "pids" / "b1.pid").read_text() == str(pid)
        for _ in range(200):
            st = call(id=3, op="status")["nodes"]["b1"]
            if st["state"] is None:
                break
            time.sleep(0.05)
        assert st == {"pid": pid, "state": None}
        assert call(id=4, op="signal", node="b1", sig="KILL") == {"id": 4, "ok": False,
                                                                  "error": "the node is not running"}
        for _ in range(100):  # the file is complete once the process is gone; allow a slow fs
            tail = call(id=5, op="tail", node="b1")["lines"]
            if tail:
                break
            time.sleep(0.05)
        assert tail and "b1.json" in " ".join(tail)
        assert call(id=6, op="spawn", node="../x")["ok"] is False
        assert call(id=7, op="nonsense")["ok"] is False
    finally:
        p.stdin.close()
        assert p.wait(timeout=10) == 0  # EOF ends the agent


@pytest.mark.ssh
def test_ansible_itself_leaves_a_template_in_an_inventory_value_as_text(tmp_path):
    """Ansible reads the rendered inventory (local connection, no SSH): a ``{{ }}`` in a value stays
    text, while the playbooks' own templates still use the values; numbers and booleans stay typed."""
    import shutil

    ansible = shutil.which("ansible", path=str(Path(sys.executable).parent)) or shutil.which("ansible")
    if ansible is None:
        pytest.fail("ansible is a dependency of the ansible extra and should be installed")
    plan = _plan({"h1": HostPlan("h1", address="127.0.0.1", user="u")}, {"a": "h1"})
    marker = tmp_path / "pwned"
    inv = tmp_path / "inv.yml"
    inv.write_text(inventory.render_inventory(plan, "run-1", "", {"h1": {
        "tb_root": "/home/u/.testbed", "tb_image_args": ["--image", f"{{{{ lookup('pipe', 'touch {marker}') }}}}"],
        "tb_x": {"k": "{{ 7 * 7 }}"}}}))
    r = subprocess.run([ansible, "h1", "-i", str(inv), "-c", "local", "-m", "debug", "-a",
                        "msg={{ [tb_image_args, tb_x, tb_root ~ '/code', tb_nodes, tb_become, ansible_port] | to_json }}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(json.loads(r.stdout[r.stdout.index("{"):])["msg"])
    assert out == [["--image", f"{{{{ lookup('pipe', 'touch {marker}') }}}}"], {"k": "{{ 7 * 7 }}"},
                   "/home/u/.testbed/code", ["a"], False, 22]
    assert not marker.exists()
