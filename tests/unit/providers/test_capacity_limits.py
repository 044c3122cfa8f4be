"""The providers' CPU/memory limits without running anything: the local provider's cgroup layout
and values on a fake cgroup tree (v1 and v2), and the refusals that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import ProviderError
from testbed.providers.ansible.provider import check_capacity as ansible_check
from testbed.providers.docker.provider import check_capacity
from testbed.providers.local import cgroups
from testbed.runs.oom import oom_timeline_entries
from testbed.topology.plan import Action, HostPlan, NodePlan, Plan

M = 1024 * 1024


def plan(host_cpu=None, host_mem=None, b1_cpu=None, b1_mem=None, throttle=False) -> Plan:
    hosts = {"h1": HostPlan("h1", cpu=host_cpu, memory_bytes=host_mem)}
    nodes = {"b1": NodePlan("b1", "node", "broker", "s1", "h1", cpu=b1_cpu, memory_bytes=b1_mem),
             "b2": NodePlan("b2", "node", "broker", "s1", "h1", cpu=host_cpu, memory_bytes=host_mem)}
    actions = (Action(1.0, "throttle", 0, target=("b2",), cpu=0.1),) if throttle else ()
    return Plan("t", "pubsub", "local", 10.0, 0, ("s1",), hosts, nodes, {}, actions)


def fake_v1(root: Path) -> None:
    for ctl, f in (("cpu", "cpu.cfs_quota_us"), ("memory", "memory.limit_in_bytes")):
        (root / ctl).mkdir(parents=True)
        (root / ctl / f).write_text("-1\n")


def test_v1_layout_and_values(tmp_path, monkeypatch) -> None:
    fake_v1(tmp_path)
    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path))
    groups = cgroups.setup(plan(host_cpu=1.0, host_mem=512 * M, b1_cpu=0.2, b1_mem=64 * M), "run-1")
    cpu, mem = tmp_path / "cpu" / "testbed" / "run-1", tmp_path / "memory" / "testbed" / "run-1"
    assert groups["b1"] == [str(cpu / "h1" / "b1" / "cgroup.procs"), str(mem / "h1" / "b1" / "cgroup.procs")]
    assert (cpu / "h1" / "cpu.cfs_quota_us").read_text() == "100000"  # the host: 1 core, shared
    assert (cpu / "h1" / "b1" / "cpu.cfs_quota_us").read_text() == "20000"  # 0.2 core per 100 ms
    assert (cpu / "h1" / "b1" / "cpu.cfs_period_us").read_text() == "100000"
    assert (mem / "h1" / "memory.limit_in_bytes").read_text() == str(512 * M)
    assert (mem / "h1" / "b1" / "memory.limit_in_bytes").read_text() == str(64 * M)
    cgroups.set_cpu("run-1", "h1", "b1", 0.05)
    assert (cpu / "h1" / "b1" / "cpu.cfs_quota_us").read_text() == "5000"
    cgroups.set_cpu("run-1", "h1", "b1", None)
    assert (cpu / "h1" / "b1" / "cpu.cfs_quota_us").read_text() == "-1"
    with pytest.raises(ProviderError, match="no cpu cgroup"):
        cgroups.set_cpu("run-1", "h1", "nope", 0.1)


def test_v2_layout_and_values(tmp_path, monkeypatch) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path))
    groups = cgroups.setup(plan(b1_cpu=0.25, b1_mem=64 * M), "run-2")
    d = tmp_path / "testbed" / "run-2"
    assert groups["b1"] == [str(d / "h1" / "b1" / "cgroup.procs")]  # one tree: joined once
    assert (d / "h1" / "b1" / "cpu.max").read_text() == "25000 100000"
    assert (d / "h1" / "b1" / "memory.max").read_text() == str(64 * M)
    assert (d / "h1" / "b2" / "cpu.max").read_text() == "max"
    for p in (tmp_path, tmp_path / "testbed", d, d / "h1"):  # enabled for the children all the way down
        assert (p / "cgroup.subtree_control").read_text() == "+cpu +memory"


def test_no_limit_makes_no_cgroup(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path))
    assert cgroups.setup(plan(), "run-3") == {}
    assert list(tmp_path.iterdir()) == []
    assert cgroups.wrap(["python", "-m", "x"], []) == ["python", "-m", "x"]
    argv = cgroups.wrap(["python", "-m", "x"], ["/a/cgroup.procs"])
    assert argv[1:3] == ["-S", "-c"] and argv[-5:] == ["/a/cgroup.procs", "--", "python", "-m", "x"]


@pytest.mark.parametrize("kw,key", [
    ({"b1_cpu": 0.2}, "nodes.b1.cpu"),
    ({"host_mem": 64 * M}, "hosts.h1.memory"),
    ({"throttle": True}, "faults[0].throttle"),
])
def test_local_refuses_without_controllers_naming_the_key(tmp_path, monkeypatch, kw, key) -> None:
    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path))
    with pytest.raises(ProviderError) as ei:
        cgroups.setup(plan(**kw), "run-4")
    assert str(ei.value).startswith(f"{key}: the local provider limits ")
    assert "\n" not in str(ei.value)


def test_local_refuses_when_not_writable(tmp_path, monkeypatch) -> None:
    """Not root: the kernel answers EACCES to a mkdir in the cgroup tree (simulated: this suite
    runs as root, who may write anywhere)."""
    fake_v1(tmp_path)
    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path))

    def denied(self, *a, **kw):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", denied)
    with pytest.raises(ProviderError) as ei:
        cgroups.setup(plan(b1_cpu=0.2), "run-5")
    assert str(ei.value).startswith("nodes.b1.cpu: the local provider limits cpu with cgroups, and this user "
                                    "may not create cgroups (not root, and no testbed parent delegated to it)")


def test_docker_refuses_a_host_limit_over_several_containers() -> None:
    check_capacity(plan(b1_cpu=0.2, b1_mem=64 * M))  # per node: fine
    with pytest.raises(ProviderError, match=r"^hosts\.h1\.cpu: the docker provider limits each container"):
        check_capacity(plan(host_cpu=1.0))


def test_ansible_refuses_limits_a_host_cannot_enforce_naming_the_key() -> None:
    """Process hosts: cgroups where the host's facts say it can make them, else refused naming the
    key and the host's reason; container hosts: per node, a joint host limit over several refused."""
    can = {"h1": {"cgroups": {"version": 1, "cpu": True, "memory": True, "why": {}}}}
    cannot = {"h1": {"cgroups": {"version": 1, "cpu": False, "memory": False,
                                 "why": {"cpu": "WHY-CPU", "memory": "WHY-MEM"}}}}
    for kw in ({}, {"b1_cpu": 0.2}, {"host_mem": 64 * M}, {"throttle": True}, {"host_cpu": 1.0, "b1_mem": 9 * M}):
        ansible_check(plan(**kw), {"h1": "process"}, can)
    ansible_check(plan(), {"h1": "process"}, cannot)  # no limit: nothing asked of the host
    for kw, key, why in (({"b1_cpu": 0.2}, "nodes.b1.cpu", "WHY-CPU"), ({"host_mem": 64 * M}, "hosts.h1.memory", "WHY-MEM"),
                         ({"throttle": True}, "faults[0].throttle", "WHY-CPU")):
        with pytest.raises(ProviderError) as ei:
            ansible_check(plan(**kw), {"h1": "process"}, cannot)
        what = key.split(".")[-1] if "faults" not in key else "cpu"
        assert str(ei.value).startswith(f"{key}: the ansible provider limits {what} with cgroups on host h1, "
                                        f"and {why}; "), str(ei.value)
        assert "\n" not in str(ei.value)
    with pytest.raises(ProviderError, match="host reported no cgroup facts"):  # an older host helper
        ansible_check(plan(b1_cpu=0.2), {"h1": "process"}, {"h1": {}})
    ansible_check(plan(b1_cpu=0.2, b1_mem=64 * M, throttle=True), {"h1": "docker"}, cannot)  # per container
    with pytest.raises(ProviderError, match=r"^hosts\.h1\.cpu: the ansible provider, on a host that runs "
                                            r"containers, limits each container"):
        ansible_check(plan(host_cpu=1.0), {"h1": "docker"}, can)


def test_oom_entries_are_crashes() -> None:
    e = oom_timeline_entries({"b1": {"oom_kill": 1}, "b2": {"oom_kill": 0}}, {"b1": 4.5}, {"b1": 48 * M}, 12.0)
    assert [(x["op"], x["target"], x["actual_s"], x["window"], x["fault"]) for x in e] == \
        [("crash", ["b1"], 4.5, [4.5, 12.0], 2000)]
    assert e[0]["source"].startswith("OOM kill under the memory limit 48M")


def test_parents_weigh_as_many_tasks_as_they_hold(tmp_path, monkeypatch) -> None:
    """Each testbed cgroup above the processes competes with the weight of its processes (not of
    one task): v1 cpu.shares 1024 per process, v2 cpu.weight 100."""
    fake_v1(tmp_path)
    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path))
    base = tmp_path / "cpu" / "testbed"
    base.mkdir()
    (base / "cpu.shares").write_text("1024")

    def made(d: Path) -> None:  # the kernel's files in a new cgroup
        (d / "cpu.shares").write_text("1024")

    orig = Path.mkdir

    def mkdir(self, *a, **kw):
        orig(self, *a, **kw)
        if "cpu" in self.parts and "testbed" in self.parts:
            made(self)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    cgroups.setup(plan(b1_cpu=0.2), "run-a")  # 2 processes on h1
    cgroups.setup(plan(b1_cpu=0.3), "run-b")
    assert (base / "cpu.shares").read_text() == str(4 * 1024)
    assert (base / "run-a" / "cpu.shares").read_text() == str(2 * 1024)
    assert (base / "run-a" / "h1" / "cpu.shares").read_text() == str(2 * 1024)
    assert (base / "run-a" / "h1" / "b1" / "cpu.shares").read_text() == "1024"


def _hostside(monkeypatch, name: str):
    """A module of the host helper imported as on a host: by plain name, beside tbhost.py."""
    import importlib
    import sys

    import testbed.providers.hostside as hostside

    monkeypatch.syspath_prepend(str(Path(hostside.__file__).parent))
    for m in ("host", "cgroups", "procs", "engine"):
        monkeypatch.delitem(sys.modules, m, raising=False)
    return importlib.import_module(name)


@pytest.mark.proc
def test_host_helper_makes_the_cgroups_joins_them_throttles_and_counts(tmp_path, monkeypatch) -> None:
    """The ansible hosts' side on a fake v1 tree: ``start --limits`` makes the local provider's
    layout (the same module), a spawned process writes its pid into its cgroups before it becomes
    the node, the agent's throttle sets the quota, and ``pack``'s counts come from the cgroups
    (removal needs the kernel's cgroupfs: the SSH hosts' test)."""
    import json
    import time

    fake_v1(tmp_path / "cg")
    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path / "cg"))
    host = _hostside(monkeypatch, "host")
    from testbed.providers.capacity import spec

    p = plan(host_cpu=1.0, b1_cpu=0.2, b1_mem=64 * M, throttle=True)
    h = host.Host(str(tmp_path / "root"))
    rd = Path(h.run_dir("run-9"))
    (rd / "configs").mkdir(parents=True)
    (rd / "configs" / "b1.json").write_text("{}")
    sent = tmp_path / "limits.json"
    sent.write_text(json.dumps({"host": "h1", "spec": spec(p, {"b1", "b2"})}))
    h.set_limits("run-9", str(sent))
    assert not sent.exists()
    cpu, mem = tmp_path / "cg" / "cpu" / "testbed" / "run-9" / "h1", tmp_path / "cg" / "memory" / "testbed" / "run-9" / "h1"
    assert (cpu / "cpu.cfs_quota_us").read_text() == "100000"
    assert (cpu / "b1" / "cpu.cfs_quota_us").read_text() == "20000"
    assert (mem / "b1" / "memory.limit_in_bytes").read_text() == str(64 * M)
    assert h.limits("run-9")["procs"]["b1"] == [str(cpu / "b1" / "cgroup.procs"), str(mem / "b1" / "cgroup.procs")]

    pid = h.spawn("run-9", "b1")  # joins, then execs the node (which fails on this empty config)
    deadline = time.monotonic() + 10
    # the joining process opens the fake file, then writes its pid: wait for the pid, not the file
    while time.monotonic() < deadline and not ((cpu / "b1" / "cgroup.procs").exists()
                                               and (cpu / "b1" / "cgroup.procs").read_text()):
        time.sleep(0.01)
    assert (cpu / "b1" / "cgroup.procs").read_text() == str(pid)
    assert (mem / "b1" / "cgroup.procs").read_text() == str(pid)

    assert h.throttle("run-9", "b2", 0.05) == {"ok": True}  # b2: no limit of its own, throttled
    assert (cpu / "b2" / "cpu.cfs_quota_us").read_text() == "5000"
    assert h.throttle("run-9", "b2", None) == {"ok": True}
    assert (cpu / "b2" / "cpu.cfs_quota_us").read_text() == "-1"
    bad = h.throttle("run-9", "nope", 0.1)
    assert not bad["ok"] and "no cpu cgroup" in bad["error"]

    (cpu / "b1" / "cpu.stat").write_text("nr_periods 50\nnr_throttled 7\nthrottled_time 2000000000\n")
    (mem / "b1" / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    st = h.limit_stats("run-9")
    assert st["b1"] == {"nr_periods": 50, "nr_throttled": 7, "throttled_s": 2.0, "oom_kill": 1}
    assert host.procs.wait_gone([pid], 10) == []  # the node exited (an empty config)


def test_host_helper_refuses_where_it_cannot_make_cgroups(tmp_path, monkeypatch) -> None:
    """No controller mounted: ``start --limits`` fails (the controller refuses earlier from the
    host's facts, which say the same: ``probe``)."""
    import json

    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path / "none"))
    host = _hostside(monkeypatch, "host")
    cg = _hostside(monkeypatch, "cgroups")
    from testbed.providers.capacity import spec

    facts = cg.probe()
    assert facts["cpu"] is False and "no cgroup 'cpu' controller is mounted" in facts["why"]["cpu"]
    h = host.Host(str(tmp_path / "root"))
    Path(h.run_dir("run-8")).mkdir(parents=True)
    sent = tmp_path / "limits.json"
    sent.write_text(json.dumps({"host": "h1", "spec": spec(plan(b1_cpu=0.2), {"b1", "b2"})}))
    with pytest.raises(Exception) as ei:
        h.set_limits("run-8", str(sent))
    assert type(ei.value).__name__ == "Refused" and ei.value.what == "cpu"
    fake_v1(tmp_path / "cg")
    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path / "cg"))
    assert cg.probe()["cpu"] is True  # root here; a user needs a delegated testbed parent


def test_host_facts_say_a_user_cannot_move_processes_on_cgroup_v2(tmp_path, monkeypatch) -> None:
    """v2: a delegated testbed parent is not enough for a user that is not root (moving a process
    needs the root's cgroup.procs); v1: it is. Simulated uid and access (this suite runs as root)."""
    cg = _hostside(monkeypatch, "cgroups")
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "v2" / "testbed").mkdir()
    fake_v1(tmp_path / "v1")
    (tmp_path / "v1" / "cpu" / "testbed").mkdir()
    monkeypatch.setattr(cg.os, "getuid", lambda: 1000)
    monkeypatch.setattr(cg.os, "access", lambda p, mode: str(p).endswith("testbed"))  # the delegated parent only
    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path / "v2"))
    f = cg.probe()
    assert f["version"] == 2 and f["cpu"] is False and "cgroup v2 needs root" in f["why"]["cpu"]
    monkeypatch.setenv("TESTBED_CGROUP_ROOT", str(tmp_path / "v1"))
    f = cg.probe()
    assert f["version"] == 1 and f["cpu"] is True
    assert f["memory"] is False and "(uid 1000) may not create cgroups under" in f["why"]["memory"]
