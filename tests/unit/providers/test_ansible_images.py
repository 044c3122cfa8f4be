"""Containers on the ansible provider's hosts, the pure parts: the runtime per host, how the
node image gets there, its build context, the ``runtime`` key, and the host helper's checks
without a docker command (real tbhost.py subprocesses). The real path -- hosts with their own
Docker engine over real SSH -- is tests/integration/test_ansible_docker.py."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from testbed.errors import ProviderError, TopologyError
from testbed.providers.ansible import bundle, images
from testbed.providers.ansible.runner import _message
from testbed.providers.image import context_digest, context_files
from testbed.topology.loader import plans

TOPO = """
version: 1
name: rt
protocol: pubsub
duration: 5s
sites: {ny: {}}
hosts:
  h1: {address: 10.0.0.1, site: ny, runtime: docker}
  h2: {address: 10.0.0.2, site: ny, runtime: RUNTIME}
  h3: {address: 10.0.0.3, site: ny}
nodes:
  b1: {role: broker, site: ny, host: h1}
  b2: {role: broker, site: ny, host: h2, neighbors: [b1]}
  b3: {role: broker, site: ny, host: h3, neighbors: [b1]}
"""


def _docker(cmd=None, version="28.2.2", error=None, image=False):
    return {"docker": {"cmd": cmd, "version": version if cmd else None, "error": error, "image": image}}


def test_runtime_key_reaches_the_plan_and_bad_values_are_located(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(TOPO.replace("RUNTIME", "process"))
    (plan,) = plans(p, provider="ansible")
    assert {h: hp.runtime for h, hp in plan.hosts.items()} == {"h1": "docker", "h2": "process", "h3": "auto"}
    p.write_text(TOPO.replace("RUNTIME", "containers"))
    with pytest.raises(TopologyError) as ei:
        plans(p, provider="ansible")
    msg = str(ei.value)
    assert f"{p}:9:46: hosts.h2.runtime: must be one of: auto, docker, process" in msg, msg


def test_runtime_per_host_from_the_topology_and_the_facts():
    facts = {"h1": _docker(["docker"]), "h2": _docker(["docker"]), "h3": _docker(None, error="no docker command"),
             "h4": _docker(["sudo", "-n", "/usr/bin/docker"], version="20.10.24")}
    rt, why = images.choose_runtimes({"h1": "docker", "h2": "process", "h3": "auto", "h4": "auto"}, facts)
    assert rt == {"h1": "docker", "h2": "process", "h3": "process", "h4": "docker"}
    assert why["h1"] == "runtime: docker; Docker engine 28.2.2" and why["h2"] == "runtime: process"
    assert "no usable Docker engine (no docker command)" in why["h3"]
    assert why["h4"].endswith("20.10.24 with sudo")


def test_runtime_docker_without_a_usable_engine_names_every_such_host():
    facts = {"h1": _docker(None, error="permission denied while trying to connect to the Docker daemon socket"),
             "h2": _docker(None, error="no docker command"), "h3": _docker(["docker"])}
    with pytest.raises(ProviderError) as ei:
        images.choose_runtimes({"h1": "docker", "h2": "docker", "h3": "docker"}, facts)
    msg = str(ei.value)
    assert "host h1: runtime: docker" in msg and "permission denied" in msg
    assert "host h2:" in msg and "h3" not in msg and "docker group" in msg


def test_image_mode_override_and_its_validation(monkeypatch):
    assert images.choose_mode("build") == ("build", "TESTBED_ANSIBLE_IMAGE=build")
    assert images.choose_mode("save")[0] == "save"
    with pytest.raises(ProviderError, match="choose save or build"):
        images.choose_mode("scp")
    monkeypatch.setattr(images, "local_engine", lambda: (None, "no engine here"))
    mode, why = images.choose_mode(None)
    assert mode == "build" and "no engine here" in why


def test_image_ref_is_named_by_the_build_context():
    ref, digest = images.image_ref()
    assert digest == context_digest() and ref == f"testbed-node:ctx-{digest[:12]}"


def test_build_context_tar_is_the_node_image_context_and_deterministic(tmp_path):
    ref, _ = images.image_ref()
    a = images.build_context(tmp_path / "a", ref)
    b = images.build_context(tmp_path / "b", ref)
    assert a.read_bytes() == b.read_bytes()
    with tarfile.open(a) as tf:
        names = tf.getnames()
        dockerfile = tf.extractfile("Dockerfile").read().decode()
    assert names == sorted(rel for _, rel in context_files())
    assert "Dockerfile" in names and "code/testbed/nodes/__main__.py" in names
    assert not any(n.startswith(("testbed/analysis", "testbed/providers")) for n in names)
    assert "ENTRYPOINT" in dockerfile and "ARG BASE" in dockerfile


def _tbhost(root: Path, *args: str, path: str = "/nonexistent", ok: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, str(bundle.TBHOST), "--root", str(root), *args], capture_output=True,
                       text=True, timeout=60, env={"PATH": path, "HOME": str(root.parent)})
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def test_host_helper_without_docker(tmp_path):
    root = tmp_path / "root"
    out = json.loads(_tbhost(root, "check", "--runtime", "docker", "--emulation", "userspace").stdout)
    assert out["missing"] == ["docker.io"]
    out = json.loads(_tbhost(root, "check", "--runtime", "auto", "--emulation", "userspace").stdout)
    assert out["missing"] == []
    facts = json.loads(_tbhost(root, "prepare", "--image", "testbed-node:ctx-0").stdout)
    assert facts["docker"] == {"cmd": None, "version": None, "error": "no docker command", "image": False}
    assert not (root / "docker.json").exists()
    # containers asked for on a host whose prepare found no engine: refused, nothing started
    tar = tmp_path / "c.tar"
    bundle.tar_files(tar, {"b1.json": b"{}"})
    r = _tbhost(root, "start", "--configs", str(tar), "--image", "testbed-node:ctx-0", "run-1", "b1", ok=False)
    assert r.returncode != 0 and "no usable Docker engine" in r.stderr
    assert list((root / "runs" / "run-1" / "pids").glob("*.pid")) == []
    r = _tbhost(root, "image-load", str(tmp_path / "missing.tar"), "--ref", "x", ok=False)
    assert r.returncode != 0 and "no usable Docker engine" in r.stderr


def test_a_failed_command_task_names_its_stderr():
    res = {"msg": "non-zero return code", "stderr": "Traceback ...\nRuntimeError: docker load: no space left"}
    assert _message(res) == "non-zero return code: RuntimeError: docker load: no space left"
    assert _message({"msg": "unreachable"}) == "unreachable"
    assert _message({"stderr": "only this"}) == "only this"
    loop = {"msg": "One or more items failed", "results": [
        {"failed": False, "stdout": ""},
        {"failed": True, "msg": "non-zero return code", "stderr": "Error: Specified qdisc kind is unknown."}]}
    assert _message(loop) == "non-zero return code: Error: Specified qdisc kind is unknown."


def test_build_context_is_cached_per_code_version(tmp_path):
    # the cached build context is named by the ref's tag: one per code version
    ref, _ = images.image_ref()
    p = images.build_context(tmp_path, ref)
    assert p.name == f"context-{ref.split(':')[1]}.tar"
    assert tarfile.open(fileobj=io.BytesIO(p.read_bytes())).getmember("Dockerfile").mtime == 0


def test_registry_remembers_hosts_once_and_the_devices_runs_shaped(tmp_path, monkeypatch):
    from testbed.providers.ansible import provider

    monkeypatch.setenv(provider.REGISTRY_ENV, str(tmp_path / "hosts.json"))
    h1 = {"name": "h1", "address": "10.0.0.1", "port": 22, "user": "tb", "key": "/k", "become": False}
    h2 = {"name": "h2", "address": "10.0.0.2", "port": 22, "user": "tb", "key": "/k", "become": True}
    provider._register([h1, h2])
    provider._register([h1, h2], {"h2": ["eth0"]})
    provider._register([{**h1, "become": True}], {"h1": ["eth1"]})
    provider._register([h2], {"h2": ["eth0", "bond0"]})
    reg = json.loads((tmp_path / "hosts.json").read_text())
    assert [r["name"] for r in reg] == ["h1", "h2"]
    assert reg[0]["tc_devices"] == ["eth1"] and reg[0]["become"] is True
    assert reg[1]["tc_devices"] == ["bond0", "eth0"]
    assert "secret" not in json.dumps(reg) and reg[0]["key"] == "/k"  # a path, never a key
