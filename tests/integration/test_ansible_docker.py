"""`--provider ansible` on hosts with a Docker engine of their own: one container per node.

Marker ``ssh``: real SSH, real Ansible, and real Docker engines on the hosts. h1 and h2 are
containers of ``testbed-sshhost-docker`` (``.ci/ssh-setup.sh``: sshd, python3 and docker.io;
each runs its own dockerd, docker-in-docker, see ``testhosts.py``), h3 is a bare
``testbed-sshhost`` (no engine), so one lab mixes containers and processes. Locally a missing
prerequisite skips with the reason; in CI (CI=true) it fails.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from testbed import api
from testbed.errors import ProviderError
from testbed.testing.testhosts import (
    DOCKER_IMAGE, HOSTS, IMAGE, USER, SSHHosts, require, set_vars, spread_smoke,
)

pytestmark = [pytest.mark.ssh, pytest.mark.slow, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
DOCKER_HOSTS = ("h1", "h2")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require((IMAGE, DOCKER_IMAGE))
    with SSHHosts(tmp_path_factory.mktemp("lab"), docker=DOCKER_HOSTS) as hosts:
        yield hosts


@pytest.fixture
def env(lab, tmp_path, monkeypatch):
    lab.use(monkeypatch.setenv, tmp_path)
    monkeypatch.delenv("TESTBED_ANSIBLE_IMAGE", raising=False)
    monkeypatch.delenv("TESTBED_NODE_BASE", raising=False)
    return lab


def node_images(lab: SSHHosts, host: str) -> list[str]:
    out = lab.exec(host, "docker", "images", "--filter", "label=testbed.image=node", "--format",
                   "{{.Repository}}:{{.Tag}}")
    return [ln for ln in out.splitlines() if ln.strip()]


def assert_clean(lab: SSHHosts) -> None:
    for h in HOSTS:
        assert lab.node_processes(h) == [], h
        assert "tbhost.py" not in lab.exec(h, "ps", "-eo", "args"), h
        assert lab.exec(h, "ls", f"/home/{USER}/.testbed/runs") == "", h
    for h in DOCKER_HOSTS:
        assert lab.containers_on(h) == [], h


def test_mixed_lab_runs_the_smoke_topology(env, tmp_path):
    """Containers on h1 and h2 (image saved here, copied, loaded), processes on h3; faults on all three."""
    lab = env
    topo = spread_smoke(tmp_path)
    (rd,) = api.run(str(topo), set_vars=set_vars(lab), provider="ansible", runs_dir=str(tmp_path / "runs"))
    m = rd.manifest
    plan = rd.plan()
    assert m["hosts_runtime"] == {"h1": "docker", "h2": "docker", "h3": "process"}, m["hosts_runtime"]
    assert "no usable Docker engine" in m["hosts_runtime_reason"]["h3"]
    img = m["node_image"]
    assert img["ref"].startswith("testbed-node:ctx-") and img["ref"].endswith(img["context"][:12])
    assert img["mode"] == "save" and "docker save" in img["reason"]
    assert sorted(img["shipped"] + img["present"]) == list(DOCKER_HOSTS)
    for h in DOCKER_HOSTS:  # the image stays on the host (until wipe), so the next run ships nothing
        assert img["ref"] in node_images(lab, h), h
    # the process faults hit containers on h1/h2 (docker pause / kill / start) and a process on h3
    tl = m["timeline"]
    assert tl and all(e["status"] == "done" for e in tl), tl
    by_op = {(e["op"], e["target"][0]): e for e in tl}
    assert plan.nodes["b3"].host == "h2" and ("crash", "b3") in by_op and ("restart", "b3") in by_op
    assert plan.nodes["b2"].host == "h1" and ("pause", "b2") in by_op
    assert plan.nodes["b5"].host == "h3" and ("pause", "b5") in by_op
    # every node's event log came back, the containers' output too, and the history checks pass
    assert {p.stem for p in rd.logs_dir.glob("*.jsonl")} == set(plan.nodes)
    assert (rd.logs_dir / "b3.stderr").exists() and (rd.logs_dir / "b5.stderr").exists()
    restarts = [json.loads(ln) for ln in (rd.logs_dir / "b3.jsonl").read_text().splitlines()]
    assert sum(1 for e in restarts if e["ev"] == "node_start") == 2  # the same container, started again
    checks = api.run_checks(rd)
    assert {c["name"] for c in checks} >= {"no_duplicates", "filter_match", "fifo", "completeness"}
    assert all(c["passed"] for c in checks), checks
    # the inter-host delays were emulated between containers on two hosts: STOCK quotes from h1
    # (pub-stock at b2, ny) to sub-cheap on h2 (at b4, rome) over 10 + 40 + 10 ms of broker links
    off = {h: o["offset_ns"] for h, o in m["clock_offsets"].items()}
    lat = sorted(((e["t"] - off["h2"]) - (e["pub_t"] - off["h1"])) / 1e6
                 for e in map(json.loads, (rd.logs_dir / "sub-cheap.jsonl").read_text().splitlines())
                 if e["ev"] == "deliver" and e["publisher"].startswith("pub-stock"))
    assert plan.nodes["sub-cheap"].host == "h2" and plan.nodes["pub-stock"].host == "h1"
    assert len(lat) > 100 and 50.0 <= lat[len(lat) // 2] <= 150.0, lat[len(lat) // 2]
    # host networking: the nodes in containers listen at their host's address
    dep = rd.deployment()
    for ep in dep.endpoints.values():
        assert ep.data[0] == lab.addresses[ep.host]
    assert_clean(lab)


def test_up_status_inject_down_wipe(env, tmp_path):
    """`up` in the background, status and hand-injected faults on containers, `down`, then `wipe`
    removes the containers' image too."""
    from testbed.providers.ansible.provider import AnsibleProvider

    lab = env
    had_image = {h: bool(node_images(lab, h)) for h in DOCKER_HOSTS}
    topo = spread_smoke(tmp_path)
    runs = str(tmp_path / "runs")
    rd = api.up(str(topo), set_vars=set_vars(lab), provider="ansible", runs_dir=runs, schedule=False)
    img = rd.manifest["node_image"]
    assert img["present"] == sorted(h for h, had in had_image.items() if had)
    assert img.get("shipped", []) == sorted(h for h, had in had_image.items() if not had)
    plan = rd.plan()
    on_h1 = sorted(n for n, p in plan.nodes.items() if p.host == "h1")
    names = sorted(ln.split()[0] for ln in lab.containers_on("h1"))
    assert names == sorted(f"tb-{rd.run_id}-{n}" for n in on_h1)
    assert all(" Up " in f" {ln} " for ln in lab.containers_on("h1"))
    # never root inside: the SSH user's uid (tb); the root SSH user's path (the image's user) is
    # test_docker.py::test_ansible_host_side_container_of_a_root_ssh_user_runs_as_the_image_user
    tb_uid = lab.exec("h1", "id", "-u", USER).strip()
    for name in names:
        pid = lab.exec("h1", "docker", "inspect", "-f", "{{.State.Pid}}", name).strip()
        status = dict(ln.split(":", 1) for ln in lab.exec("h1", "cat", f"/proc/{pid}/status").splitlines()
                      if ":" in ln)
        assert "testbed.nodes" in lab.exec("h1", "cat", f"/proc/{pid}/cmdline"), name
        assert status["Uid"].split() == [tb_uid] * 4 and tb_uid != "0", (name, status.get("Uid"))
    st = {n["node"]: n for n in api.status(rd.run_id, runs_dir=runs)["nodes"]}
    assert {n["state"] for n in st.values()} == {"running"}, st
    assert "container tb-" in st["b1"]["detail"] and "container" not in st["b5"]["detail"]
    api.inject("{pause: b1, for: 2s}", rd.run_id, runs_dir=runs)  # the resume comes from a detached controller
    assert {n["node"]: n["state"] for n in api.status(rd.run_id, runs_dir=runs)["nodes"]}["b1"] == "paused"
    assert any("Paused" in ln for ln in lab.containers_on("h1"))
    deadline = time.monotonic() + 30
    while any("Paused" in ln for ln in lab.containers_on("h1")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any("Paused" in ln for ln in lab.containers_on("h1"))
    api.inject("{crash: b4}", rd.run_id, runs_dir=runs)
    states = {n["node"]: n["state"] for n in api.status(rd.run_id, runs_dir=runs)["nodes"]}
    assert states["b4"] == "stopped" and states["b1"] == "running", states
    assert any(ln.startswith(f"tb-{rd.run_id}-b4 Exited") for ln in lab.containers_on("h2"))
    entries = api.inject("{restart: b4}", rd.run_id, runs_dir=runs)
    assert entries[0]["status"] == "done", entries
    assert {n["node"]: n["state"] for n in api.status(rd.run_id, runs_dir=runs)["nodes"]}["b4"] == "running"
    api.down(rd.run_id, runs_dir=runs)
    assert {p.stem for p in rd.logs_dir.glob("*.jsonl")} == set(plan.nodes)
    assert_clean(lab)
    AnsibleProvider().down(rd, lambda s: None)  # idempotent
    for h in DOCKER_HOSTS:
        assert node_images(lab, h), h  # images stay until wipe
    removed = AnsibleProvider.wipe(lambda s: None)
    assert len(removed) == len(HOSTS)
    for h in HOSTS:
        assert lab.exec(h, "ls", "-a", f"/home/{USER}").split().count(".testbed") == 0, h
    for h in DOCKER_HOSTS:
        assert node_images(lab, h) == [] and lab.containers_on(h) == [], h


def test_image_built_on_the_host(env, tmp_path, monkeypatch):
    """TESTBED_ANSIBLE_IMAGE=build: the build context goes to the host, `docker build` runs there.
    h2 has an engine but says `runtime: process`, so only h1 runs containers."""
    from testbed.providers.ansible.provider import AnsibleProvider

    lab = env
    for h in DOCKER_HOSTS:  # no node image yet (a test before may have left one until its wipe)
        for ref in node_images(lab, h):
            lab.exec(h, "docker", "rmi", "-f", ref)
    lab.load_image("h1", "testbed-base:bookworm")  # the base; a real host pulls python:3.11-slim
    monkeypatch.setenv("TESTBED_ANSIBLE_IMAGE", "build")
    monkeypatch.setenv("TESTBED_NODE_BASE", "testbed-base:bookworm")
    topo = spread_smoke(tmp_path, runtimes={"h2": "process"})
    runs = str(tmp_path / "runs")
    rd = api.up(str(topo), set_vars=set_vars(lab), provider="ansible", runs_dir=runs, schedule=False)
    m = rd.manifest
    assert m["hosts_runtime"] == {"h1": "docker", "h2": "process", "h3": "process"}
    assert m["hosts_runtime_reason"]["h2"] == "runtime: process"
    img = m["node_image"]
    assert img["mode"] == "build" and img["shipped"] == ["h1"] and img["base"] == "testbed-base:bookworm"
    assert node_images(lab, "h1") == [img["ref"]] and node_images(lab, "h2") == []
    assert lab.containers_on("h2") == [] and len(lab.node_processes("h2")) == sum(
        1 for p in rd.plan().nodes.values() if p.host == "h2")
    assert {n["state"] for n in api.status(rd.run_id, runs_dir=runs)["nodes"]} == {"running"}
    api.down(rd.run_id, runs_dir=runs)
    assert_clean(lab)
    AnsibleProvider.wipe(lambda s: None)


def test_runtime_docker_on_a_host_without_engine_fails_naming_it(env, tmp_path):
    lab = env
    topo = spread_smoke(tmp_path, runtimes={"h3": "docker"})
    with pytest.raises(ProviderError) as ei:
        api.up(str(topo), set_vars=set_vars(lab), provider="ansible", runs_dir=str(tmp_path / "runs"),
               schedule=False)
    msg = str(ei.value)
    assert "h3" in msg and "docker.io" in msg and "become: true" in msg, msg
    assert_clean(lab)


def test_hosts_command_shows_what_each_host_has_and_would_run(env, tmp_path):
    """`testbed hosts FILE`: prepares the hosts (as `up` does first), starts nothing, and says per host
    what it has and whether nodes would run as containers or processes."""
    import subprocess
    import sys

    lab = env
    cli = str(Path(sys.executable).parent / "testbed")
    topo = spread_smoke(tmp_path, runtimes={"h2": "process"})
    sets = [a for k, v in set_vars(lab).items() for a in ("--set", f"{k}={v}")]
    r = subprocess.run([cli, "hosts", str(topo), *sets, "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = {row["host"]: row for row in json.loads(r.stdout)}
    assert {h: row["runtime"] for h, row in rows.items()} == {"h1": "docker", "h2": "process", "h3": "process"}
    assert rows["h1"]["docker"] and rows["h2"]["docker"] and rows["h3"]["docker"] is None
    assert rows["h3"]["docker_error"] == "no docker command"
    assert rows["h2"]["runtime_reason"] == "runtime: process"
    assert all(row["tc"] and not row["sch_netem"] and row["python"].startswith("3.11") for row in rows.values())
    assert rows["h1"]["emulation"] == "userspace" and "no sch_netem" in rows["h1"]["emulation_reason"]
    assert rows["h1"]["image_ref"].startswith("testbed-node:ctx-")
    r = subprocess.run([cli, "hosts", str(topo), *sets], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "containers" in r.stdout and "link emulation" in r.stdout, r.stdout + r.stderr
    assert_clean(lab)  # nothing was started
