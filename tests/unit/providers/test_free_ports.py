"""free_ports(): ports for runs brought up at the same time (`testbed reproduce --jobs`)."""

import threading

from testbed.providers.local import provider as local


def test_a_port_is_not_handed_out_twice_within_the_hold():
    a = local.free_ports(40)
    b = local.free_ports(40)
    assert len(set(a)) == 40 and len(set(b)) == 40
    assert not set(a) & set(b)


def test_threads_asking_at_once_get_disjoint_ports():
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


def test_the_hold_expires(monkeypatch):
    [p] = local.free_ports(1)
    assert ("127.0.0.1", p) in local._handed
    monkeypatch.setattr(local, "PORT_HOLD_S", -1.0)
    local.free_ports(1)  # clears what is older than the hold
    assert ("127.0.0.1", p) not in local._handed
