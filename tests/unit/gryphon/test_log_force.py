"""The PHB's log force delay (params.log_force; Sec 4.1's ~100 ms GD - best-effort gap)."""

import pytest

from testbed.protocols.gryphon.nodes.pubend import LOG_FORCE_S, Pubend, PubendLog

from .harness import Sim, make_configs

T0 = 3.0


def _median_latency(tmp_path, **params):
    nodes = {"p1": {"neighbors": []}, "s1": {"neighbors": ["p1"]}}
    clients = {"pubs": {"role": "publisher", "count": 2, "attach": ["p1"], "rate_per_s": 50.0,
                        "extra": {"attr_space": 10}},
               "subs": {"role": "subscriber", "count": 2, "attach": ["s1"]}}
    sim = Sim(make_configs(nodes, clients, params={"gct": 0.2, "nrt": 0.6, **params},
                           state_root=str(tmp_path)))
    sim.start()
    sim.run_until(T0)
    sim.workload(2.0)
    sim.run_until(T0 + 4.0)
    lat = sorted((e["t"] - e["pub_t"]) / 1e9 for e in sim.ev("g_deliver"))
    assert len(lat) == 2 * 2 * 100
    return lat[len(lat) // 2]


def test_gd_latency_gap_is_the_log_force(tmp_path):
    assert LOG_FORCE_S == 0.1  # Sec 4.1: "This latency difference of about 100ms"
    gd = _median_latency(tmp_path / "a", log_force=0.1)
    bare = _median_latency(tmp_path / "b", log_force=0.0)
    be = _median_latency(tmp_path / "c", mode="best-effort")
    assert 0.09 < gd - be < 0.12, (gd, be)
    assert bare - be < 0.02, (bare, be)


def test_partial_stable_keeps_later_messages_pending():
    p = Pubend("p1/x")
    for t in (10, 20, 30):
        p.assign(t, {"seq": t})
    f, d = p.stable(2)
    assert [t for t, _ in d] == [10, 20] and [t for t, _ in p.pending] == [30]
    f, d = p.stable()
    assert [t for t, _ in d] == [30] and f == [(21, 30)] and not p.pending


def test_negative_force_is_refused(tmp_path):
    with pytest.raises(ValueError):
        PubendLog(str(tmp_path / "l"), -1)
