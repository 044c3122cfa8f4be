"""The echo test protocol's checks pass on a clean history and fail on a broken one."""

from testbed import registry as protocols
from testbed.protocols.echo.analysis.checks import check_fifo, check_no_phantom

from analysis_helpers import context


def send(node, dst, seq, s):
    return {"node": node, "dst": dst, "seq": seq, "size": 0, "s": s}


def recv(node, src, seq, s, kind="ping"):
    return {"node": node, "src": src, "seq": seq, "sent_t": 0, "kind": kind, "s": s}


def clean():
    return {"echo_send": [send("e1", "e2", i, i * 0.1) for i in range(1, 6)],
            "echo_recv": [recv("e2", "e1", i, i * 0.1 + 0.01) for i in range(1, 6)]
            + [recv("e1", "e2", i, i * 0.1 + 0.02, kind="pong") for i in range(1, 6)]}


def test_echo_checks_are_the_registered_ones():
    assert protocols.checks_for("echo") == [check_fifo, check_no_phantom]


def test_clean_history_passes(spark):
    ctx = context(spark, clean())
    for chk in (check_fifo, check_no_phantom):
        r = chk(ctx)
        assert r.passed and r.violations == 0, (r.name, r.examples)


def test_reordered_pings_fail_fifo(spark):
    h = clean()
    recvs = h["echo_recv"]
    recvs[2], recvs[3] = recvs[3], recvs[2]  # log order (m) is row order: seq 4 before seq 3
    r = check_fifo(context(spark, h))
    assert not r.passed and r.violations == 1
    assert (r.examples[0]["node"], r.examples[0]["prev_seq"], r.examples[0]["seq"]) == ("e2", 4, 3)


def test_a_ping_never_sent_fails_no_phantom(spark):
    h = clean()
    h["echo_recv"].append(recv("e2", "e1", 99, 0.9))
    r = check_no_phantom(context(spark, h))
    assert not r.passed and r.violations == 1 and r.examples[0]["seq"] == 99
