"""The docker provider against a real Docker engine (marker ``docker``).

Locally a missing engine skips with the reason; in CI (CI=true) it fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.errors import ProviderError
from testbed.nodes.runtime.control_client import ControlClient
from testbed.providers.image import NODE_UID
from testbed.runs.rundir import RunDir
from testbed.topology.plan import Action, HostPlan, LinkSpec, NodePlan, Plan

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client(engine):  # the shared engine fixture (tests/integration/conftest.py)
    return engine


@pytest.fixture(scope="module")
def image(client):
    from testbed.providers.image import DEFAULT_TAG, ensure_image

    return ensure_image(client, DEFAULT_TAG, print, offline_base=True)


def control_call(run, addr: tuple[str, int], op: str, timeout: float = 2.0, **args) -> dict:
    from testbed.providers.control import run_secret

    with ControlClient(addr[0], addr[1], timeout=timeout, secret=run_secret(run)) as c:
        return c.call(op, **args)


def wait_ping(run, addr: tuple[str, int], timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            return control_call(run, addr, "ping", timeout=1.0)
        except (OSError, ConnectionError) as e:
            last = e
            time.sleep(0.1)
    raise AssertionError(f"no ping reply from {addr}: {last}")


def echo_plan(n: int, name: str = "dk") -> Plan:
    names = [f"b{i}" for i in range(1, n + 1)]
    nodes = {
        x: NodePlan(x, "node", "broker", "s1", "h1", neighbors=tuple(y for y in names if y != x))
        for x in names
    }
    links = {f"{a}->{b}": LinkSpec(delay_ms=2.0, jitter_ms=0.5) for a in names for b in names if a != b}
    return Plan(name=name, protocol="echo", provider="docker", duration_s=5.0, seed=7, sites=("s1",),
                hosts={"h1": HostPlan("h1")}, nodes=nodes, links=links, actions=(),
                params={"echo": True, "rate_per_s": 50})


def new_run(tmp_path: Path, plan: Plan, run_id: str) -> RunDir:
    run = RunDir.create(tmp_path, run_id)
    run.write("plan.json", plan.to_dict())
    return run


def labeled(client, label: str) -> dict[str, list]:
    f = {"label": label}
    return {
        "containers": client.api.containers(all=True, filters=f),
        "networks": client.api.networks(filters=f),
        "volumes": (client.api.volumes(filters=f) or {}).get("Volumes") or [],
    }


def act(op: str, node: str) -> Action:
    return Action(at_s=0.0, op=op, fault=0, target=(node,))


def node_process_ids(client, cid: str) -> tuple[list[int], int]:
    """(real, effective, saved, fs uids) and the effective capability mask of a container's node
    process, from /proc/<pid>/status on this machine (the engine's)."""
    pid = client.api.inspect_container(cid)["State"]["Pid"]
    for _ in range(100):  # a container just started may still be runc's init, before its exec
        if b"runc" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            break
        time.sleep(0.05)
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
    assert "testbed.nodes" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    return [int(x) for x in fields["Uid"].split()], int(fields["CapEff"].strip(), 16)


def states(provider, run) -> dict[str, str]:
    return {s.node: s.state for s in provider.status(run)}


# -- image -------------------------------------------------------------------------------
def test_node_image_holds_only_node_dependencies(client, image):
    from testbed.providers.image import image_status

    assert image_status(client, image) == "current"
    script = ("import msgpack, testbed.nodes, testbed.nodes.runtime.node_main, sys, importlib.util as u;"
              "bad=[m for m in ('docker','pandas','pyspark','ansible_runner','pydantic','paramiko')"
              " if u.find_spec(m)];"
              "import os;"
              "extra=[p for p in os.listdir('/opt/testbed/testbed') if p not in ('__init__.py','nodes','protocols')]"
              "+[q+'/'+p for q in os.listdir('/opt/testbed/testbed/protocols') if q!='__init__.py'"
              " for p in os.listdir('/opt/testbed/testbed/protocols/'+q) if p not in ('__init__.py','nodes')];"
              "print(sys.version_info[:2], bad, extra)")
    out = client.containers.run(image, entrypoint=["python3", "-c", script], remove=True).decode()
    assert out.strip() == "(3, 11) [] []"
    tc = client.containers.run(image, entrypoint=["tc", "-V"], remove=True).decode()
    assert "iproute2" in tc


def test_build_image_on_offline_base(client, image):
    from testbed.providers.image import OFFLINE_BASE, build_image

    tag = "testbed-node:itest-build"
    lines: list[str] = []
    try:
        assert build_image(offline_base=True, tag=tag, progress=lines.append, client=client) == tag
        img = client.images.get(tag)
        labels = img.attrs["Config"]["Labels"]
        assert labels["testbed.base"] == OFFLINE_BASE
        assert img.attrs["Config"]["Entrypoint"] == ["python3", "-m", "testbed.nodes"]
        assert any("building" in x for x in lines)
    finally:
        try:
            client.images.remove(tag)
        except Exception:
            pass


def test_unavailable_base_is_one_clear_error(client):
    from testbed.providers.image import build_image

    with pytest.raises(ProviderError) as e:
        build_image(base="testbed-no-such-base:none", tag="testbed-node:never", client=client)
    msg = str(e.value)
    assert "testbed-no-such-base:none" in msg and "--offline-base" in msg and "\n" not in msg


# -- lifecycle -------------------------------------------------------------------------
def test_up_faults_down(client, image, tmp_path):
    from testbed.links.detect import kernel_has_netem
    from testbed.providers.docker.provider import DockerProvider

    plan = echo_plan(4)
    run = new_run(tmp_path, plan, f"dk-life-{os.getpid()}")
    p = DockerProvider(image)
    steps: list[str] = []
    try:
        dep = p.up(plan, run, steps.append)
        # the emulation mode follows the kernel (this build machine has no sch_netem)
        assert dep.emulation == ("kernel" if kernel_has_netem() else "userspace")
        st = run.state
        assert set(st["containers"]) == set(plan.nodes)
        for n, ep in dep.endpoints.items():
            assert control_call(run, tuple(ep.control), "ping")["node"] == n
            c = client.api.inspect_container(st["containers"][n]["id"])
            assert c["Name"] == f"/tb-{run.run_id}-{n}"
            assert c["Config"]["Labels"]["testbed.run"] == run.run_id
            assert c["Config"]["Labels"]["testbed.managed"] == "1"
            assert c["HostConfig"]["CapAdd"] == ["NET_ADMIN"]
            assert c["HostConfig"]["Privileged"] is False
            # never root: the controller's own uid, or (a root controller) the image's user
            uids, cap_eff = node_process_ids(client, c["Id"])
            want = NODE_UID if os.getuid() == 0 else os.getuid()
            assert uids == [want] * 4 and 0 not in uids, (n, uids)
            assert cap_eff == 0, (n, hex(cap_eff))  # NET_ADMIN is not the node's (tc runs as exec --user 0)
            cfg = json.loads((run.configs_dir / f"{n}.json").read_text())
            assert cfg["emulation"] == dep.emulation and cfg["log_path"] == f"/run/logs/{n}.jsonl"
        assert states(p, run) == {n: "running" for n in plan.nodes}

        # traffic flows between containers by network alias
        b1 = tuple(dep.endpoints["b1"].control)
        r = control_call(run, b1, "send", dst="b2", n=5)
        assert r.get("ok") is not False, r
        deadline = time.monotonic() + 10
        got: dict = {}
        while time.monotonic() < deadline:
            got = control_call(run, tuple(dep.endpoints["b2"].control), "received")
            if got.get("recv", {}).get("b1/ping", 0) >= 5:
                break
            time.sleep(0.1)
        assert got.get("recv", {}).get("b1/ping") == 5, got
        assert got.get("fifo_violations") == 0

        # crash: SIGKILL; the log written so far survives in the run directory
        log = run.logs_dir / "b3.jsonl"
        time.sleep(0.3)  # past one flush interval
        p.process_action(run, act("crash", "b3"))
        assert states(p, run)["b3"] == "crashed"
        assert log.exists() and log.stat().st_size > 0
        first = json.loads(log.read_text().splitlines()[0])
        assert first["node"] == "b3"
        with pytest.raises(ProviderError):
            p.process_action(run, act("pause", "b3"))

        # restart: the same container starts again, at the same address, and answers
        before = dep.endpoints["b3"]
        p.process_action(run, act("restart", "b3"))
        dep = run.deployment()
        assert (dep.endpoints["b3"].data, dep.endpoints["b3"].control) == (before.data, before.control)
        assert wait_ping(run, tuple(dep.endpoints["b3"].control))["node"] == "b3"
        assert states(p, run)["b3"] == "running"
        with pytest.raises(ProviderError, match="still running"):
            p.process_action(run, act("restart", "b3"))

        # pause / resume
        b2 = tuple(dep.endpoints["b2"].control)
        p.process_action(run, act("pause", "b2"))
        assert states(p, run)["b2"] == "paused"
        with pytest.raises(OSError):
            control_call(run, b2, "ping", timeout=0.5)
        p.process_action(run, act("resume", "b2"))
        assert states(p, run)["b2"] == "running"
        assert control_call(run, b2, "ping")["node"] == "b2"

        with pytest.raises(ProviderError):
            p.process_action(run, act("explode", "b2"))
        p.collect(run, steps.append)  # local engine: nothing to fetch
    finally:
        p.down(run, steps.append)
    left = labeled(client, f"testbed.run={run.run_id}")
    assert left == {"containers": [], "networks": [], "volumes": []}
    # the logs stay, with a clean stop for the nodes that were up at down()
    for n in plan.nodes:
        assert (run.logs_dir / f"{n}.jsonl").stat().st_size > 0
    p.down(run, steps.append)  # idempotent


def test_remote_mode_paths_on_local_engine(client, image, tmp_path):
    """The remote-engine code paths (config copied in, nothing published, logs collected)."""
    from testbed.providers.docker.provider import DockerProvider

    plan = echo_plan(3)
    run = new_run(tmp_path, plan, f"dk-remote-{os.getpid()}")
    p = DockerProvider(image, remote_mode=True)
    try:
        dep = p.up(plan, run, lambda m: None)
        for n, ep in dep.endpoints.items():
            # no port published: the control port is the container's own (no SSH here: no tunnel)
            assert ep.control == (ep.data[0], 7001) and ep.tunnel is None
            assert not client.api.inspect_container(run.state["containers"][n]["id"])["HostConfig"]["PortBindings"]
            assert control_call(run, tuple(ep.control), "ping")["node"] == n
            # a remote engine's containers run as the image's user (no bind mounts to own)
            assert node_process_ids(client, run.state["containers"][n]["id"])[0] == [NODE_UID] * 4
        assert not (run.logs_dir / "b1.jsonl").exists()  # nothing bind-mounted
        time.sleep(0.3)
        p.collect(run, lambda m: None)
        assert json.loads((run.logs_dir / "b1.jsonl").read_text().splitlines()[0])["node"] == "b1"
    finally:
        p.down(run, lambda m: None)
    assert labeled(client, f"testbed.run={run.run_id}")["containers"] == []


def test_container_exit_during_up_is_reported(client, image, tmp_path, monkeypatch):
    from testbed.providers.docker.provider import DockerProvider
    from testbed.render import node_config

    plan = echo_plan(2)
    # a node class the image does not have: each node exits at start (the registry refuses an
    # unknown protocol before any container starts, so the class is what is made wrong here)
    monkeypatch.setattr(node_config, "node_class_path", lambda *a: "testbed.nodes.no_such_module:Node")
    run = new_run(tmp_path, plan, f"dk-bad-{os.getpid()}")
    p = DockerProvider(image, start_timeout=30)
    try:
        with pytest.raises(ProviderError, match="exited"):
            p.up(plan, run, lambda m: None)
    finally:
        p.down(run, lambda m: None)
    assert labeled(client, f"testbed.run={run.run_id}")["containers"] == []


_UP_SCRIPT = """
import sys
from testbed.providers.docker.provider import DockerProvider
from testbed.runs.rundir import RunDir
run = RunDir(sys.argv[1])
DockerProvider(sys.argv[2]).up(run.plan(), run, lambda m: print(m, flush=True))
"""


@pytest.mark.serial  # wipes every testbed container on the engine: runs alone, after the parallel pass
def test_wipe_after_controller_killed_mid_up(client, image, tmp_path):
    from testbed.providers.docker.provider import DockerProvider

    plan = echo_plan(8)
    run = new_run(tmp_path, plan, f"dk-wipe-{os.getpid()}")
    proc = subprocess.Popen([sys.executable, "-c", _UP_SCRIPT, str(run.path), image], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if labeled(client, f"testbed.run={run.run_id}")["containers"]:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the controller never created a container")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    before = labeled(client, f"testbed.run={run.run_id}")
    assert before["networks"] and before["containers"]
    # make state.json as incomplete as a kill can leave it: wipe must rely on labels alone
    run.save_state({"provider": "docker", "run_id": run.run_id})
    # an old node image left untagged by a rebuild: wipe prunes it; the current image stays
    import io

    old, _ = client.images.build(fileobj=io.BytesIO(
        f"FROM {image}\nLABEL testbed.image=node testbed.test-old={run.run_id}\n".encode()), rm=True)
    assert not old.tags
    removed = DockerProvider.wipe(lambda m: None)
    assert any(r.startswith("network tb-") for r in removed)
    assert labeled(client, "testbed.managed=1") == {"containers": [], "networks": [], "volumes": []}
    assert f"image {old.id.split(':')[-1][:12]}" in removed
    assert not client.images.list(filters={"label": f"testbed.test-old={run.run_id}"})
    assert client.images.get(image).tags  # the current node image stays


def test_down_with_incomplete_state_removes_everything(client, image, tmp_path):
    from testbed.providers.docker.provider import DockerProvider

    plan = echo_plan(2)
    run = new_run(tmp_path, plan, f"dk-down-{os.getpid()}")
    p = DockerProvider(image)
    p.up(plan, run, lambda m: None)
    client.volumes.create(f"tb-{run.run_id}-vol", labels={"testbed.run": run.run_id, "testbed.managed": "1"})
    st = run.state
    st["containers"] = {}
    run.save_state(st)
    p.down(run, lambda m: None)
    assert labeled(client, f"testbed.run={run.run_id}") == {"containers": [], "networks": [], "volumes": []}


def test_kernel_emulation_applies_tc_inside_containers(client, image, tmp_path):
    """Forced kernel mode: the tc commands run in each container with docker exec. Without
    sch_netem (this build machine) that must fail loudly at the netem qdisc, never silently."""
    from testbed.links.detect import kernel_has_netem
    from testbed.providers.docker.provider import DockerProvider

    plan = echo_plan(2)
    run = new_run(tmp_path, plan, f"dk-kernel-{os.getpid()}")
    p = DockerProvider(image, emulation="kernel")
    try:
        if kernel_has_netem():
            dep = p.up(plan, run, lambda m: None)
            assert dep.emulation == "kernel"
            cid = run.state["containers"]["b1"]["id"]
            out = client.containers.get(cid).exec_run(["tc", "qdisc", "show", "dev", "eth0"], user="0").output
            assert b"netem" in out and b"delay 2ms" in out
        else:
            with pytest.raises(ProviderError, match="netem"):
                p.up(plan, run, lambda m: None)
            # the commands before netem (root htb, class) ran inside the container
            cid = run.state["containers"]["b1"]["id"]
            out = client.containers.get(cid).exec_run(["tc", "class", "show", "dev", "eth0"], user="0").output
            assert b"htb 1:1" in out
    finally:
        p.down(run, lambda m: None)
    assert labeled(client, f"testbed.run={run.run_id}")["containers"] == []


def test_ansible_host_side_container_of_a_root_ssh_user_runs_as_the_image_user(client, image, tmp_path):
    """The ansible provider's container runtime (hostside/host.py) on this machine's engine, as
    the root SSH user would run it: the node runs as the image's unprivileged user, reads its
    0600 config, writes its log into the run directory on the host, where root reads it."""
    if os.getuid() != 0:
        pytest.skip("the root SSH user's path needs root (the test hosts' user `tb` covers the other)")
    import socket
    import sys as _sys

    from testbed.providers.ansible.bundle import tar_files
    from testbed.providers.ansible.provider import CONTAINER_RUN_DIR
    from testbed.providers.control import run_secret
    from testbed.render.node_config import render_node_config

    hostside = str(REPO / "testbed" / "providers" / "hostside")
    _sys.path.insert(0, hostside)
    try:
        import host as hostmod
    finally:
        _sys.path.remove(hostside)
    assert hostmod.IN_RUN == CONTAINER_RUN_DIR and hostmod.NODE_UID == NODE_UID

    plan = echo_plan(1)
    run = new_run(tmp_path, plan, f"dk-ansroot-{os.getpid()}")
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    cfg = render_node_config(plan, run.run_id, "b1", listen=("127.0.0.1", ports[0]), control=("127.0.0.1", ports[1]),
                             peers={"b1": ("127.0.0.1", ports[0])}, emulation="userspace",
                             log_path=f"{CONTAINER_RUN_DIR}/logs/b1.jsonl", state_dir=f"{CONTAINER_RUN_DIR}/state/b1",
                             secret=run_secret(run, create=True))
    h = hostmod.Host(str(tmp_path / "root"))
    tar = tar_files(tmp_path / "configs.tar", {"b1.json": json.dumps(cfg).encode()})
    hostmod.unpack_configs(h, run.run_id, str(tar))
    hostmod.write_json(os.path.join(h.run_dir(run.run_id), "runtime.json"), {"image": image, "docker": ["docker"]})
    try:
        h.spawn(run.run_id, "b1")
        name = hostmod.container_name(run.run_id, "b1")
        uids, cap_eff = node_process_ids(client, name)
        assert uids == [NODE_UID] * 4 and cap_eff == 0
        assert wait_ping(run, ("127.0.0.1", ports[1]))["node"] == "b1"
        time.sleep(0.3)
        log = Path(h.run_dir(run.run_id)) / "logs" / "b1.jsonl"
        assert log.stat().st_uid == NODE_UID
        assert json.loads(log.read_text().splitlines()[0])["node"] == "b1"
    finally:
        h.stop(run.run_id)
    assert client.api.containers(all=True, filters={"label": f"testbed.run={run.run_id}"}) == []
