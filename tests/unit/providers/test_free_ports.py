"""free_ports(): ports for runs brought up at the same time, in one process (`testbed reproduce
--jobs`) or in several (a test suite beside a reproduction), outside the kernel's ephemeral range."""

import json
import subprocess
import sys
import threading

import pytest

from testbed.providers.local import provider as local


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setattr(local.tempfile, "gettempdir", lambda: str(tmp_path))
    return local._registry()


def test_a_port_is_not_handed_out_twice_within_the_hold(registry):
    a = local.free_ports(40)
    b = local.free_ports(40)
    assert len(set(a)) == 40 and len(set(b)) == 40
    assert not set(a) & set(b)


def test_ports_are_outside_the_ephemeral_range(registry):
    lo, hi = local._ephemeral_range()
    ports = local.free_ports(200)
    assert local._port_pool() is not None  # this machine's range leaves room below it
    assert all(local.PORT_FLOOR <= p < lo for p in ports), (lo, hi, ports)


def test_a_port_in_use_is_not_handed_out(registry, monkeypatch):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        a, b = local.free_ports(2)
        registry.unlink()  # forget them: only the bind check is left to skip `busy`
        monkeypatch.setattr(local, "_port_pool", lambda: [busy, a, b])
        assert sorted(local.free_ports(2)) == sorted([a, b])
        with pytest.raises(local.ProviderError, match="no 1 free ports"):
            local.free_ports(1)  # the two others are held now, the first is in use


def test_threads_asking_at_once_get_disjoint_ports(registry):
    got: list[list[int]] = []
    lock = threading.Lock()

    def ask():
        ps = local.free_ports(30)
        with lock:
            got.append(ps)

    ts = [threading.Thread(target=ask) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    every = [p for ps in got for p in ps]
    assert len(every) == 240 and len(set(every)) == 240


def test_processes_asking_at_once_get_disjoint_ports(tmp_path):
    code = ("import json, sys, tempfile\n"
            "tempfile.gettempdir = lambda: sys.argv[1]\n"
            "from testbed.providers.local.provider import free_ports\n"
            "print(json.dumps([p for _ in range(20) for p in free_ports(10)]))\n")
    ps = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
          for _ in range(4)]
    outs = [json.loads(p.communicate(timeout=60)[0]) for p in ps]
    every = [p for o in outs for p in o]
    assert len(every) == 800 and len(set(every)) == 800


def test_the_hold_expires_and_a_broken_record_is_ignored(registry, monkeypatch):
    [p] = local.free_ports(1)
    assert f"127.0.0.1:{p}" in json.loads(registry.read_text())
    monkeypatch.setattr(local, "PORT_HOLD_S", -1.0)
    local.free_ports(1)  # drops what is older than the hold
    assert f"127.0.0.1:{p}" not in json.loads(registry.read_text())
    registry.write_text("{not json")
    assert len(local.free_ports(3)) == 3
