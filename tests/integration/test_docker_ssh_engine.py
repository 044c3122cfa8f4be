"""A Docker engine reached over real SSH (ssh://), with known_hosts verification.

An sshd of this test's own on a loopback port, with host and client keys made for
the test, in front of this machine's engine: the same path a remote `docker:
ssh://user@host` takes. Markers ``docker`` and ``ssh``: in CI a skip fails.
"""

from __future__ import annotations

import os
import shutil
import socket

import pytest

from testbed.errors import ProviderError
from testbed.testing import loopsshd

pytestmark = [pytest.mark.docker, pytest.mark.ssh, pytest.mark.timeout(300)]

SSHD = loopsshd.SSHD


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _need(ok: bool, why: str) -> None:
    if not ok:
        if _ci():
            pytest.fail(f"CI needs this: {why}")
        pytest.skip(why)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    _need(os.path.exists(SSHD), "sshd is not installed (apt-get install openssh-server)")
    _need(os.geteuid() == 0, "the test sshd must run as root to log in as root")
    _need(shutil.which("docker") is not None, "the docker CLI is needed on the engine's host")
    d = tmp_path_factory.mktemp("sshd")
    proc, port = loopsshd.start(d, keys=("host", "client", "other"))
    other_key = loopsshd.public_key(d / "other.pub")
    (d / "wrong_known_hosts").write_text(f"[127.0.0.1]:{port} {other_key}\n")
    yield {"url": f"ssh://root@127.0.0.1:{port}", "key": str(d / "client"), "dir": d}
    proc.terminate()
    proc.wait(timeout=10)


def _connect(sshd, monkeypatch, known_hosts: str, accept: bool | None = None):
    from testbed.providers import engine

    monkeypatch.setenv("HOME", str(sshd["dir"]))  # no ~/.ssh/known_hosts of the machine's
    monkeypatch.setenv(engine.KNOWN_HOSTS_ENV, str(sshd["dir"] / known_hosts))
    monkeypatch.delenv(engine.ACCEPT_ENV, raising=False)
    return engine.connect(sshd["url"], key_filename=sshd["key"], accept_unknown=accept, timeout=60)


def test_engine_over_ssh_with_a_known_host_key(sshd, monkeypatch):
    client = _connect(sshd, monkeypatch, "known_hosts")
    assert client.ping()
    assert client.version()["Version"]


def test_unknown_host_key_is_refused_unless_opted_in(sshd, monkeypatch, tmp_path):
    (sshd["dir"] / "empty_known_hosts").write_text("")
    with pytest.raises(ProviderError, match="not found in known_hosts.*--accept-unknown-host-keys"):
        _connect(sshd, monkeypatch, "empty_known_hosts")
    assert _connect(sshd, monkeypatch, "empty_known_hosts", accept=True).ping()
    assert (sshd["dir"] / "empty_known_hosts").read_text() == ""  # an accepted key is not written


def test_a_changed_host_key_is_refused_even_when_opted_in(sshd, monkeypatch):
    with pytest.raises(ProviderError):
        _connect(sshd, monkeypatch, "wrong_known_hosts", accept=True)


def test_a_run_on_a_remote_engine_over_ssh(sshd, monkeypatch, tmp_path):
    """`docker: ssh://...` on a host: containers on that engine, faults, logs back, checks, cleanup.

    The test sshd keeps sshd's default MaxSessions (10): the provider must stay under it.
    """
    from testbed import api
    from testbed.providers import engine

    monkeypatch.setenv(engine.KNOWN_HOSTS_ENV, str(sshd["dir"] / "known_hosts"))
    topo = tmp_path / "remote.yaml"
    topo.write_text(f"""
version: 1
name: remote-docker
protocol: pubsub
provider: docker
duration: 8s
sites:
  a: {{}}
hosts:
  h1: {{docker: "{sshd['url']}", key: {sshd['key']}, site: a}}
nodes:
  b1: {{role: broker, site: a, host: h1}}
  b2: {{role: broker, site: a, host: h1, neighbors: [b1]}}
clients:
  pubs: {{role: publisher, count: 2, attach: b1, rate: 20/s, size: 50B, host: h1}}
  subs: {{role: subscriber, count: 2, attach: b2, filter: "[class,eq,'STOCK']", host: h1}}
faults:
  - {{at: 3s, crash: b2}}
  - {{at: 4s, restart: b2}}
  - {{at: 5s, cut: [b1, b2], for: 1s}}
""")
    events = []
    published = []

    def on_event(e):  # while the run is up: the engine publishes no port of the run's containers
        events.append(e)
        if e.get("kind") == "restarted":
            for c in engine.connect().api.containers(filters={"label": "testbed.run"}):
                if c["Labels"].get("testbed.run", "").startswith("remote-docker"):
                    published.extend(p for p in c.get("Ports") or [] if p.get("PublicPort"))

    (rd,) = api.run(str(topo), runs_dir=str(tmp_path / "runs"), on_event=on_event)
    m = rd.manifest
    assert all(e["status"] == "done" for e in m["timeline"]), m["timeline"]
    # crash, restart and cut went through the control forwards over the engine's SSH connection:
    # the control ports are the containers' own (7001), published nowhere
    dep = rd.deployment()
    for ep in dep.endpoints.values():
        assert ep.control == (ep.data[0], 7001) and ep.tunnel["address"] == "127.0.0.1", ep
        assert ep.tunnel["port"] == int(sshd["url"].rsplit(":", 1)[1]), ep
    assert any(e.get("kind") == "restarted" and e["node"] == "b2" for e in events), events
    assert published == []
    assert not [e for e in events if e.get("kind") == "error"], events
    assert {p.stem for p in rd.logs_dir.glob("*.jsonl")} == {"b1", "b2", "pubs", "subs"}
    checks = api.run_checks(rd)
    assert checks and all(c["passed"] for c in checks), checks
    client = engine.connect()
    assert client.containers.list(all=True, filters={"label": f"testbed.run={rd.run_id}"}) == []


def test_control_forward_through_the_ssh_connection(sshd, monkeypatch):
    """The controller's connector: a direct-tcpip channel of one SSH connection per target; a
    destination nothing listens on is a ConnectionError naming it; an unknown host key is refused."""
    import threading

    from testbed.providers import engine
    from testbed.providers.tunnel import SSHTunnels

    monkeypatch.setenv("HOME", str(sshd["dir"]))
    monkeypatch.setenv(engine.KNOWN_HOSTS_ENV, str(sshd["dir"] / "known_hosts"))
    monkeypatch.delenv(engine.ACCEPT_ENV, raising=False)
    port = int(sshd["url"].rsplit(":", 1)[1])
    target = {"kind": "docker", "address": "127.0.0.1", "port": port, "user": "root", "key": sshd["key"]}
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def echo():
        c, _ = srv.accept()
        with c:
            c.sendall(c.recv(100).upper())

    threading.Thread(target=echo, daemon=True).start()
    tunnels = SSHTunnels()
    try:
        ch = tunnels.open(target, srv.getsockname(), 5.0)
        ch.sendall(b"hello")
        ch.settimeout(5.0)
        assert ch.recv(100) == b"HELLO"
        ch.close()
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            closed = free.getsockname()[1]
        with pytest.raises(ConnectionError, match=f"127.0.0.1:{closed} through ssh://root@127.0.0.1:{port}"):
            tunnels.open(target, ("127.0.0.1", closed), 5.0)
        assert len(tunnels._clients) == 1  # one SSH connection carried both channels
    finally:
        tunnels.close()
        srv.close()
    (sshd["dir"] / "empty_known_hosts").write_text("")
    monkeypatch.setenv(engine.KNOWN_HOSTS_ENV, str(sshd["dir"] / "empty_known_hosts"))
    with pytest.raises(ConnectionError, match="not found in known_hosts"):
        SSHTunnels().open(target, ("127.0.0.1", 1), 5.0)


_PROBE = ("import socket, sys\n"
          "try:\n"
          "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close(); print('open')\n"
          "except OSError as e: print(type(e).__name__)\n")


def test_control_ports_on_a_remote_engine_are_reached_only_through_ssh(sshd, monkeypatch, tmp_path):
    """A container on another network of the engine (here the default bridge) cannot connect to
    a node's control port; a container of the run's own network can (the data path); the
    controller drives the nodes through the engine's SSH connection (status, a stall)."""
    from testbed import api
    from testbed.providers import engine
    from testbed.providers.image import DEFAULT_TAG

    monkeypatch.setenv(engine.KNOWN_HOSTS_ENV, str(sshd["dir"] / "known_hosts"))
    topo = tmp_path / "remote-probe.yaml"
    topo.write_text(f"""
version: 1
name: remote-probe
protocol: pubsub
provider: docker
duration: 30s
sites:
  a: {{}}
hosts:
  h1: {{docker: "{sshd['url']}", key: {sshd['key']}, site: a}}
nodes:
  b1: {{role: broker, site: a, host: h1}}
  b2: {{role: broker, site: a, host: h1, neighbors: [b1]}}
""")
    runs = str(tmp_path / "runs")
    rd = api.up(str(topo), runs_dir=runs, schedule=False)
    client = engine.connect()
    try:
        ep = rd.deployment().endpoints["b1"]
        assert ep.tunnel and ep.control == (ep.data[0], 7001)
        other = client.containers.run(DEFAULT_TAG, entrypoint=["python3", "-c", _PROBE, ep.control[0], "7001"],
                                      remove=True, labels={"testbed.managed": "1"}).decode().strip()
        own = client.containers.run(DEFAULT_TAG, entrypoint=["python3", "-c", _PROBE, ep.control[0], "7001"],
                                    remove=True, network=rd.state["network"],
                                    labels={"testbed.run": rd.run_id, "testbed.managed": "1"}).decode().strip()
        assert (other, own) == ("TimeoutError", "open"), (other, own)
        assert {n["node"]: n["state"] for n in api.status(rd.run_id, runs_dir=runs)["nodes"]} == {
            "b1": "running", "b2": "running"}
        entries = api.inject("{stall: b1, for: 1s}", rd.run_id, runs_dir=runs)
        assert entries[0]["status"] == "done", entries
    finally:
        api.down(rd.run_id, runs_dir=runs)
    assert client.containers.list(all=True, filters={"label": f"testbed.run={rd.run_id}"}) == []
