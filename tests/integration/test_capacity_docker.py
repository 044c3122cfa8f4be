"""Hosts with a given capacity, docker provider: NanoCpus/Memory on the containers, the throttle
fault through the engine's container update, measured on the nodes' own cpu lines.

No `testbed wipe` here: each test brings its own run down (other engineers' containers share
this engine)."""

from __future__ import annotations

import json

import pytest

from testbed import api
from testbed.errors import ProviderError
from testbed.providers.docker.provider import LABEL_RUN

from test_capacity_local import OOM_SIZE, throttle_shows, topology, within_share

pytestmark = pytest.mark.slow


@pytest.fixture
def runs_dir(tmp_path, engine):
    d = tmp_path / "runs"
    yield d
    api.down(runs_dir=str(d), all_runs=True)


def test_cpu_limit_and_throttle_in_containers(runs_dir, tmp_path, engine):
    topo = topology(tmp_path, "dock", memory="256M")
    (rd,) = api.run(str(topo), runs_dir=str(runs_dir), provider="docker", analyze=True)
    m = rd.manifest
    tl = [(e["op"], e["target"], e["cpu"], e["status"]) for e in m["timeline"]]
    assert tl == [("throttle", ["b1"], 0.02, "done"), ("unthrottle", ["b1"], 0.2, "done")], m["timeline"]
    series, changes = within_share(rd, "b1", 0.2)
    throttle_shows(series, changes, 0.02)
    checks = {c["name"]: c for c in json.loads((rd.path / "analysis" / "checks.json").read_text())["checks"]}
    assert checks["cpu_share"]["passed"], checks["cpu_share"]
    assert (rd.path / "analysis" / "figures" / "cpu.png").exists()
    assert not engine.containers.list(all=True, filters={"label": f"{LABEL_RUN}={rd.run_id}"})


def test_container_gets_nano_cpus_and_memory(runs_dir, tmp_path, engine):
    topo = topology(tmp_path, "dockup", duration="60s", memory="96M", faults="")
    rd = api.up(str(topo), runs_dir=str(runs_dir), provider="docker")
    cid = rd.state["containers"]["b1"]["id"]
    hc = engine.api.inspect_container(cid)["HostConfig"]
    assert (hc["NanoCpus"], hc["Memory"], hc["MemorySwap"]) == (200_000_000, 96 * 2 ** 20, 96 * 2 ** 20)
    other = engine.api.inspect_container(rd.state["containers"]["b2"]["id"])["HostConfig"]
    assert (other["NanoCpus"], other["Memory"]) == (0, 0)
    # testbed inject: a throttle changes the running container's share, and its end restores it
    api.inject("{throttle: b1, cpu: 0.05, for: 1s}", runs_dir=str(runs_dir))
    assert engine.api.inspect_container(cid)["HostConfig"]["NanoCpus"] == 50_000_000
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and engine.api.inspect_container(cid)["HostConfig"]["NanoCpus"] != 200_000_000:
        time.sleep(0.2)
    assert engine.api.inspect_container(cid)["HostConfig"]["NanoCpus"] == 200_000_000


def test_host_limit_over_several_containers_is_refused(runs_dir, tmp_path, engine):
    topo = topology(tmp_path, "dockhost", faults="")
    topo.write_text(topo.read_text().replace("nodes:\n", "hosts:\n  h1: {site: s1, cpu: 1.0}\nnodes:\n"))
    with pytest.raises(ProviderError) as ei:
        api.run(str(topo), runs_dir=str(runs_dir), provider="docker", analyze=False)
    assert str(ei.value).startswith("hosts.h1.cpu: the docker provider limits each container, not a host's 4 "
                                    "processes together"), str(ei.value)


def test_oom_killed_container_is_a_crash_in_the_timeline(runs_dir, tmp_path, engine):
    """As the local provider's test: b1 stalled under load holds every message until its 48M
    limit; the engine reports the container OOMKilled, the run records a crash of b1."""
    topo = topology(tmp_path, "dockoom", duration="12s", rate=4000, memory="48M", size=OOM_SIZE,
                    faults="  - {at: 1s, stall: b1, for: 10s}")
    (rd,) = api.run(str(topo), runs_dir=str(runs_dir), provider="docker", analyze=False)
    assert rd.manifest["cgroup_stats"]["b1"] == {"oom_kill": 1}, rd.manifest.get("cgroup_stats")
    oom = [e for e in rd.manifest["timeline"] if e.get("oom")]
    assert [(e["op"], e["target"], e["status"]) for e in oom] == [("crash", ["b1"], "done")], rd.manifest["timeline"]
    assert 1.0 <= oom[0]["actual_s"] <= 12.0 and "OOM kill under the memory limit 48M" in oom[0]["source"]
