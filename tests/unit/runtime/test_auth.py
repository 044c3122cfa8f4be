"""The handshake and request MACs, replay refusal, and the rate-limited reject log (pure)."""

import pytest

from testbed.nodes.runtime import auth, codec

S = bytes(range(32))
OTHER = bytes(range(1, 33))


def test_parse_secret():
    assert auth.parse_secret(S.hex()) == S
    for bad in (None, 3, "zz" * 16, "ab" * 8 + "a", "ab" * 15):
        with pytest.raises(ValueError) as e:
            auth.parse_secret(bad)
        assert S.hex() not in str(e.value)


def test_data_hello_accepts_the_run_and_refuses_strangers():
    n = auth.nonce()
    good = {"k": "hello", "from": "b2", "run": "r1", "nonce": auth.nonce(),
            "mac": auth.hello_mac(S, "b2", "r1", "b1", n)}
    assert auth.check_hello(S, "r1", "b1", n, good) == "b2"
    cases = {
        "other-run": {**good, "run": "r2"},
        "bad-mac": {**good, "from": "b3"},  # the MAC covers the sender's name
        "unauthenticated": {k: v for k, v in good.items() if k != "mac"},
        "not-hello": {"k": "pub"},
    }
    for reason, h in cases.items():
        with pytest.raises(auth.AuthError) as e:
            auth.check_hello(S, "r1", "b1", n, h)
        assert e.value.reason == reason
    with pytest.raises(auth.AuthError, match="bad MAC"):  # another run's secret, same run id
        auth.check_hello(S, "r1", "b1", n, {**good, "mac": auth.hello_mac(OTHER, "b2", "r1", "b1", n)})
    with pytest.raises(auth.AuthError, match="bad MAC"):  # a hello recorded on another connection
        auth.check_hello(S, "r1", "b1", auth.nonce(), good)
    with pytest.raises(auth.AuthError, match="bad MAC"):  # a hello meant for another receiver
        auth.check_hello(S, "r1", "b9", n, good)


def test_ack_proves_the_receiver():
    mine = auth.nonce()
    ack = {"k": "hello_ack", "from": "b1", "mac": auth.ack_mac(S, "b1", "r1", "b2", mine)}
    auth.check_ack(S, "r1", "b2", "b1", mine, ack)
    with pytest.raises(auth.AuthError):
        auth.check_ack(OTHER, "r1", "b2", "b1", mine, ack)
    with pytest.raises(auth.AuthError):
        auth.check_ack(S, "r1", "b2", "b1", auth.nonce(), ack)


def test_control_requests_need_the_key_and_increasing_seq():
    n = auth.nonce()
    key = auth.control_key(S, "r1", "b1", n)
    body = codec.encode({"op": "stall"})
    env1 = auth.seal_request(key, 1, body)
    assert auth.open_request(key, 0, env1) == (1, body)
    env2 = auth.seal_request(key, 2, codec.encode({"op": "unstall"}))
    assert auth.open_request(key, 1, env2)[0] == 2
    reasons = {}
    for name, (last, env) in {
        "replay": (2, env1),
        "stranger": (0, {"op": "stall"}),
        "other secret": (0, auth.seal_request(auth.control_key(OTHER, "r1", "b1", n), 1, body)),
        "other connection": (0, auth.seal_request(auth.control_key(S, "r1", "b1", auth.nonce()), 1, body)),
        "tampered": (0, {**env1, "body": codec.encode({"op": "shutdown"})}),
        "garbage": (0, {"seq": "x", "body": 1}),
    }.items():
        with pytest.raises(auth.AuthError) as e:
            auth.open_request(key, last, env)
        reasons[name] = e.value.reason
    assert reasons == {"replay": "replay", "stranger": "unauthenticated", "other secret": "bad-mac",
                       "other connection": "bad-mac", "tampered": "bad-mac", "garbage": "malformed"}


def test_reject_log_rate_limits_but_counts_exactly():
    lines = []
    now = [100.0]
    rl = auth.RejectLog(lambda ev, f: lines.append(f), per_s=3, clock=lambda: now[0])
    for i in range(50):
        rl.reject("control", f"1.2.3.4:{i}", "unauthenticated", "x")
    assert len(lines) == 3  # at most 3 lines a second for one reason
    rl.reject("data", "5.6.7.8:1", "bad-mac", "y")  # another reason has its own budget
    assert len(lines) == 4
    now[0] += 1.5
    rl.reject("control", "1.2.3.4:99", "unauthenticated", "x")  # carries the 47 suppressed
    assert lines[-1]["count"] == 48 and lines[-1]["peer"] == "1.2.3.4:99"
    for i in range(5):
        rl.reject("control", "9.9.9.9:1", "unauthenticated", "")
    rl.flush()
    assert sum(ln["count"] for ln in lines) == 57 == rl.total
    assert rl.totals == {"control:unauthenticated": 56, "data:bad-mac": 1}
