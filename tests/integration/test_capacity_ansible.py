"""Hosts with a given capacity, ansible provider: real node processes in real cgroups on SSH hosts.

Marker ``ssh``: real SSH, real Ansible. h1 is a container of ``testbed-sshhost-docker`` (a
private cgroup namespace, its cgroup v1 hierarchies remounted writable: see ``testhosts.py``),
where root delegates a ``testbed`` parent in the cpu and memory hierarchies to the SSH user
``tb`` (the one-time set-up docs/ansible.md gives for a user that is not root); its nodes run as
processes (``runtime: process``). h2 is a bare ``testbed-sshhost`` (read-only cgroups, not
root): a limit there is refused naming the key. The last two tests run h1's nodes as containers of
its own engine instead (``runtime: docker``). Each test brings its own runs down; none calls
``wipe``. Run under the shared lock with the other provider tests
(``flock /tmp/tb/provider-tests.lock``).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from testbed import api
from testbed.errors import ProviderError
from testbed.testing.testhosts import DOCKER_IMAGE, IMAGE, USER, SSHHosts, require

from test_capacity_local import OOM_SIZE, throttle_shows, within_share
from test_capacity_local import topology as local_topology

pytestmark = [pytest.mark.ssh, pytest.mark.slow, pytest.mark.timeout(1200)]

CGROUP_TREES = ("/sys/fs/cgroup/cpu/testbed", "/sys/fs/cgroup/memory/testbed")

HOSTS = """\
  s2: {{}}
hosts:
  h1: {{address: "{{{{ h1_addr }}}}", user: {user}, key: "{{{{ key }}}}", site: s1, runtime: {h1_runtime}}}
  h2: {{address: "{{{{ h2_addr }}}}", user: {user}, key: "{{{{ key }}}}", site: s2, runtime: process}}
"""


# the throttle at 5 s, as test_capacity_local's (why: there)
def topology(tmp_path: Path, name: str, *, duration: str = "16s", rate: int = 3000, b1_host: str = "h1",
             faults: str = "  - {at: 5s, throttle: b1, cpu: 0.02, for: 7s}", memory: str = "",
             h1_runtime: str = "process", size: str = "100B") -> Path:
    """test_capacity_local's topology (b1 with cpu: 0.2, b2, publishers at b1) on two SSH hosts:
    b1 and the publishers on ``b1_host``, b2 and the subscriber on h2."""
    p = local_topology(tmp_path, name, duration=duration, rate=rate, faults=faults, memory=memory, size=size)
    text = p.read_text()
    for old, new in (("  s1: {}\n", "  s1: {}\n" + HOSTS.format(user=USER, h1_runtime=h1_runtime)),
                     ("site: s1, cpu: 0.2", f"site: s1, host: {b1_host}, cpu: 0.2"),
                     ("b2: {role: broker, site: s1,", "b2: {role: broker, site: s2,")):
        if old not in text:
            raise RuntimeError("test_capacity_local's topology changed: update this test's topology")
        text = text.replace(old, new, 1)
    p.write_text(text)
    return p


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require((IMAGE, DOCKER_IMAGE))
    with SSHHosts(tmp_path_factory.mktemp("caplab"), names=("h1", "h2"), docker=("h1",)) as hosts:
        # root's one-time delegation on h1: a testbed parent per controller, owned by the SSH user
        out = hosts.exec("h1", "sh", "-c", "mkdir -p " + " ".join(CGROUP_TREES) + " && chown -R "
                         f"{USER}:{USER} " + " ".join(CGROUP_TREES) + " && echo ok")
        assert out == "ok", out
        yield hosts


@pytest.fixture
def env(lab, tmp_path, monkeypatch):
    lab.use(monkeypatch.setenv, tmp_path)
    monkeypatch.delenv("TESTBED_ANSIBLE_IMAGE", raising=False)
    monkeypatch.delenv("TESTBED_NODE_BASE", raising=False)
    return lab


def set_vars(lab: SSHHosts) -> dict[str, str]:
    return {"h1_addr": lab.addresses["h1"], "h2_addr": lab.addresses["h2"], "key": str(lab.key)}


def host_cgroups(lab: SSHHosts, host: str) -> list[str]:
    """Every cgroup below the testbed parents of a host (the parents themselves stay)."""
    out = lab.exec(host, "find", *CGROUP_TREES, "-mindepth", "1", "-type", "d")
    return [ln for ln in out.splitlines() if ln.strip()]


def test_cpu_limit_and_throttle_on_a_process_host(env, tmp_path):
    """b1 (cpu: 0.2) on h1 runs in its own cgroup there, a throttle to 0.02 core on schedule goes
    through the host's agent, the kernel's counts come back at down, the cpu_share check passes on
    b1's own cpu lines, and down leaves no cgroup on h1."""
    lab = env
    (rd,) = api.run(str(topology(tmp_path, "limit")), set_vars=set_vars(lab), provider="ansible",
                    runs_dir=str(tmp_path / "runs"), analyze=True)
    m = rd.manifest
    assert m["hosts_runtime"] == {"h1": "process", "h2": "process"}
    tl = [(e["op"], e["target"], e["cpu"], e["status"]) for e in m["timeline"]]
    assert tl == [("throttle", ["b1"], 0.02, "done"), ("unthrottle", ["b1"], 0.2, "done")], m["timeline"]
    assert all(abs(e["actual_s"] - e["planned_s"]) < 0.5 for e in m["timeline"])
    # the kernel on h1 throttled b1: its cgroup's counts, collected at down
    st = m["cgroup_stats"]
    assert st["b1"]["nr_throttled"] > 0 and st["b1"]["nr_periods"] > 0, st
    assert set(st) == {n for n, p in rd.plan().nodes.items() if p.host == "h1"}, st  # h2 has no limit: no cgroup
    # measured on b1's own cpu lines: within its share (+ the sampling error), 0.02 core in the throttle
    series, changes = within_share(rd, "b1", 0.2)
    # the throttle shows in b1's CPU lines (a broker starved to 0.02 core samples its CPU late: one
    # interval may span the window)
    throttle_shows(series, changes, 0.02)
    checks = {c["name"]: c for c in json.loads((rd.path / "analysis" / "checks.json").read_text())["checks"]}
    assert checks["cpu_share"]["passed"] and checks["cpu_share"]["details"]["limited_nodes"] == ["b1"]
    assert (rd.path / "analysis" / "figures" / "cpu.png").stat().st_size > 10_000
    assert host_cgroups(lab, "h1") == []
    assert lab.node_processes("h1") == [] and lab.node_processes("h2") == []


def test_killed_controller_then_down_leaves_no_cgroup(env, tmp_path):
    """`up` (background controller), b1 running in its cgroup on h1, and again after an injected
    crash and restart; kill -9 the controllers; `down` removes the run's cgroups on h1 with its
    processes."""
    lab = env
    runs = str(tmp_path / "runs")
    rd = api.up(str(topology(tmp_path, "ctl", duration="60s", rate=500, faults="")), set_vars=set_vars(lab),
                provider="ansible", runs_dir=runs)
    try:
        pid = rd.state["pids"]["b1"]
        cpu, mem = CGROUP_TREES  # b1's process is in its own cpu cgroup, the local layout (no memory limit: none)
        procs = lab.exec("h1", "cat", f"{cpu}/{rd.run_id}/h1/b1/cgroup.procs").split()
        assert str(pid) in procs, procs
        assert lab.exec("h1", "cat", f"{cpu}/{rd.run_id}/h1/b1/cpu.cfs_quota_us") == "20000"
        assert lab.exec("h1", "find", mem, "-mindepth", "1", "-type", "d") == ""
        assert host_cgroups(lab, "h2") == []
        # a crash and its restart (injected): the new process joins the same cgroup
        for fault in ("{crash: b1}", "{restart: b1}"):
            entries = api.inject(fault, rd.run_id, runs_dir=runs)
            assert [e["status"] for e in entries] == ["done"], entries
        new = rd.state["pids"]["b1"]
        assert new != pid and lab.exec("h1", "cat", f"{cpu}/{rd.run_id}/h1/b1/cgroup.procs").split() == [str(new)]
        controllers = rd.state.get("controllers") or []
        assert controllers, rd.state
        for c in controllers:
            os.kill(int(c), signal.SIGKILL)
        time.sleep(0.5)
    finally:
        api.down(rd.run_id, runs_dir=runs)
    assert host_cgroups(lab, "h1") == []
    assert lab.node_processes("h1") == [] and lab.node_processes("h2") == []
    assert lab.exec("h1", "ls", f"/home/{USER}/.testbed/runs") == ""


def test_a_host_that_cannot_make_cgroups_is_refused_naming_the_key(env, tmp_path):
    """b1 (cpu: 0.2) on h2, whose cgroups are read-only to a user that is not root: refused before
    any node starts, one line naming the key and the host's reason."""
    lab = env
    runs = tmp_path / "runs"
    with pytest.raises(ProviderError) as ei:
        api.run(str(topology(tmp_path, "refused", b1_host="h2")), set_vars=set_vars(lab), provider="ansible",
                runs_dir=str(runs), analyze=False)
    msg = str(ei.value)
    assert msg.splitlines() == [msg], msg
    assert msg.startswith("nodes.b1.cpu: the ansible provider limits cpu with cgroups on host h2, and this user "
                          "(uid "), msg
    assert "not root, and no testbed parent delegated to it" in msg, msg
    assert lab.node_processes("h1") == [] and lab.node_processes("h2") == []
    api.down(runs_dir=str(runs), all_runs=True)  # nothing was started; down is quiet about it


def container_limits(lab: SSHHosts, name: str) -> tuple[int, int, int]:
    out = lab.exec("h1", "docker", "inspect", "--format",
                   "{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}} {{.HostConfig.MemorySwap}}", name)
    a, b, c = out.split()
    return int(a), int(b), int(c)


def test_container_host_gets_cpus_memory_and_the_throttle(env, tmp_path):
    """h1 runs its nodes as containers of its own engine: b1's container has NanoCpus 0.2 core and
    Memory = MemorySwap = 96M, a throttle injected by hand is `docker update --cpus` through h1's
    agent and its end restores the share; down leaves no container."""
    lab = env
    runs = str(tmp_path / "runs")
    rd = api.up(str(topology(tmp_path, "dockhost", duration="60s", rate=500, faults="", memory="96M",
                             h1_runtime="docker")), set_vars=set_vars(lab), provider="ansible", runs_dir=runs)
    try:
        assert rd.manifest["hosts_runtime"] == {"h1": "docker", "h2": "process"}
        name = f"tb-{rd.run_id}-b1"
        assert container_limits(lab, name) == (200_000_000, 96 * 2 ** 20, 96 * 2 ** 20)
        pub = next(n for n, p in rd.plan().nodes.items() if p.host == "h1" and n != "b1")
        assert container_limits(lab, f"tb-{rd.run_id}-{pub}")[:2] == (0, 0)  # no limit of its own
        entries = api.inject("{throttle: b1, cpu: 0.05, for: 2s}", rd.run_id, runs_dir=runs)
        assert entries[0]["status"] == "done", entries
        assert container_limits(lab, name)[0] == 50_000_000
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and container_limits(lab, name)[0] != 200_000_000:
            time.sleep(0.2)
        assert container_limits(lab, name)[0] == 200_000_000
    finally:
        api.down(rd.run_id, runs_dir=runs)
    assert lab.containers_on("h1") == []
    assert rd.manifest["cgroup_stats"]["b1"] == {"oom_kill": 0}, rd.manifest.get("cgroup_stats")


@pytest.mark.parametrize("runtime", ["process", "docker"])
def test_oom_kill_on_a_host_is_a_crash_in_the_timeline(env, tmp_path, runtime):
    """As the local and docker providers' tests: b1 (48M; a process in its memory cgroup on h1, or a
    container of h1's engine) stalled under load holds every message until the kernel's OOM killer
    ends it; the count comes back with the logs and the run records a crash of b1."""
    lab = env
    # a 20 s stall: under the whole suite's load the publishers on h1 may be starved, so b1 can take
    # longer than 10 s to pass 48M (fresh-clone run, 2026-11-28, load 11: the docker case's b1 was
    # not killed within a 10 s stall); the kill must still fall inside the stall
    (rd,) = api.run(str(topology(tmp_path, "oom", duration="24s", rate=4000, memory="48M", h1_runtime=runtime,
                                 size=OOM_SIZE, faults="  - {at: 1s, stall: b1, for: 20s}")),
                    set_vars=set_vars(lab), provider="ansible", runs_dir=str(tmp_path / "runs"), analyze=False)
    m = rd.manifest
    assert m["cgroup_stats"]["b1"]["oom_kill"] >= 1, m.get("cgroup_stats")
    oom = [e for e in m["timeline"] if e.get("oom")]
    assert [(e["op"], e["target"], e["status"]) for e in oom] == [("crash", ["b1"], "done")], m["timeline"]
    assert 1.0 <= oom[0]["actual_s"] <= 22.0 and "OOM kill under the memory limit 48M" in oom[0]["source"]
    assert lab.containers_on("h1") == [] and host_cgroups(lab, "h1") == []
