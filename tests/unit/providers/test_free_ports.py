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


# -- the record is private: nothing planted in /tmp is written through (issue #32) --------------
def test_a_symlink_planted_at_the_old_path_changes_nothing(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(local.tempfile, "gettempdir", lambda: str(tmp_path))
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for old in (f"testbed-ports-{os.getuid()}.json", f"testbed-ports-{os.getuid()}.lock",
                f"testbed-ports-{os.getuid()}.{os.getpid()}.tmp"):
        (tmp_path / old).symlink_to(victim)
    local.free_ports(3)
    assert victim.read_text() == "precious"
    d = tmp_path / f"testbed-{os.getuid()}"
    assert os.stat(d).st_mode & 0o777 == 0o700
    rec = d / "ports.json"
    assert os.stat(rec).st_mode & 0o777 == 0o600 and len(json.loads(rec.read_text())) == 3
    # a symlink planted inside the private directory (by this user: nobody else can) is not followed
    rec.unlink()
    rec.symlink_to(victim)
    (d / "ports.lock").unlink()
    (d / "ports.lock").symlink_to(victim)
    with pytest.raises(OSError):  # the lock is opened O_NOFOLLOW
        local.free_ports(1)
    (d / "ports.lock").unlink()
    local.free_ports(1)
    assert victim.read_text() == "precious" and not rec.is_symlink()  # replaced, not written through


def test_a_private_directory_that_is_not_private_is_refused(tmp_path, monkeypatch):
    import os

    from testbed.errors import ProviderError

    monkeypatch.setattr(local.tempfile, "gettempdir", lambda: str(tmp_path))
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    d = tmp_path / f"testbed-{os.getuid()}"
    d.symlink_to(theirs)
    with pytest.raises(ProviderError, match="not a private directory of this user"):
        local.free_ports(1)
    d.unlink()
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    with pytest.raises(ProviderError, match="mode 755"):
        local.free_ports(1)
    assert not list(theirs.iterdir())


def test_run_directories_are_private(tmp_path):
    import os

    from testbed.runs.rundir import RunDir

    old = os.umask(0o022)
    try:
        rd = RunDir.create(tmp_path / "runs", "r1")
    finally:
        os.umask(old)
    assert os.stat(rd.path).st_mode & 0o777 == 0o700


def test_remote_configs_are_unpacked_0600(tmp_path, monkeypatch):
    import importlib
    import io
    import os
    import sys
    import tarfile
    from pathlib import Path

    import testbed.providers.hostside as hostside

    monkeypatch.syspath_prepend(str(Path(hostside.__file__).parent))  # as on a host: beside tbhost.py
    monkeypatch.delitem(sys.modules, "host", raising=False)
    host = importlib.import_module("host")

    tar = tmp_path / "c.tar"
    with tarfile.open(tar, "w") as tf:
        data = b'{"secret": "00"}'
        ti = tarfile.TarInfo("b1.json")
        ti.size = len(data)
        ti.mode = 0o644
        tf.addfile(ti, io.BytesIO(data))
    h = host.Host(str(tmp_path / "root"))
    old = os.umask(0o022)
    try:
        host.unpack_configs(h, "run-1", str(tar))
    finally:
        os.umask(old)
    cfg = os.path.join(h.run_dir("run-1"), "configs", "b1.json")
    assert os.stat(cfg).st_mode & 0o777 == 0o600
