"""tc command generation for kernel link emulation (pure)."""

from __future__ import annotations

import pytest

from testbed.links import netem
from testbed.links.detect import PROBE, kernel_has_netem
from testbed.topology.plan import LinkSpec


def test_netem_options_delay_only():
    assert netem.netem_options(LinkSpec(delay_ms=10)) == ["delay", "10ms"]


def test_netem_options_jitter_distribution_loss():
    s = LinkSpec(delay_ms=25.5, jitter_ms=3, distribution="paretonormal", loss=0.015)
    assert netem.netem_options(s) == ["delay", "25.5ms", "3ms", "distribution", "paretonormal", "loss", "1.5%"]


def test_uniform_and_no_jitter_omit_distribution():
    assert netem.netem_options(LinkSpec(delay_ms=5, jitter_ms=1, distribution="uniform")) == ["delay", "5ms", "1ms"]
    assert netem.netem_options(LinkSpec(delay_ms=5, distribution="pareto")) == ["delay", "5ms"]


@pytest.mark.parametrize("spec", [LinkSpec(distribution="gauss", jitter_ms=1), LinkSpec(loss=1.5),
                                  LinkSpec(delay_ms=-1)])
def test_bad_specs_are_refused(spec):
    with pytest.raises(ValueError):
        netem.netem_options(spec)


def test_full_tree_expected_commands():
    links = {
        "172.18.0.3": LinkSpec(delay_ms=10, jitter_ms=2, loss=0.01, rate_bps=1_000_000),
        "172.18.0.2": LinkSpec(delay_ms=5),
        "172.18.0.4": LinkSpec(),  # no-op: no slice
    }
    cmds = netem.egress_commands(links, device="eth0")
    assert cmds.remove == (("tc", "qdisc", "del", "dev", "eth0", "root"),)
    assert [list(c) for c in cmds.add] == [
        ["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb"],
        ["tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit"],
        ["tc", "qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "a:", "netem", "delay", "5ms"],
        ["tc", "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
         "match", "ip", "dst", "172.18.0.2/32", "flowid", "1:1"],
        ["tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:2", "htb", "rate", "1000000bit"],
        ["tc", "qdisc", "add", "dev", "eth0", "parent", "1:2", "handle", "b:", "netem", "delay", "10ms", "2ms",
         "distribution", "normal", "loss", "1%"],
        ["tc", "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
         "match", "ip", "dst", "172.18.0.3/32", "flowid", "1:2"],
    ]
    assert cmds.all()[0] == ["tc", "qdisc", "del", "dev", "eth0", "root"]


def test_destinations_sorted_numerically_and_ids_in_hex():
    links = {f"10.0.0.{i}": LinkSpec(delay_ms=1) for i in range(2, 14)}
    add = netem.add_commands(links)
    filters = [c for c in add if c[1] == "filter"]
    assert [c[c.index("dst") + 1] for c in filters] == [f"10.0.0.{i}/32" for i in range(2, 14)]
    classes = [c[c.index("classid") + 1] for c in add if c[1] == "class"]
    assert classes == [f"1:{i:x}" for i in range(1, 13)]
    assert len(set(classes)) == 12


def test_ipv6_destination():
    add = netem.add_commands({"fd00::2": LinkSpec(delay_ms=1)})
    assert add[-1][7:16] == ["protocol", "ipv6", "prio", "2", "u32", "match", "ip6", "dst", "fd00::2/128"]


def test_all_noop_means_remove_only():
    cmds = netem.egress_commands({"10.0.0.2": LinkSpec(), "10.0.0.3": LinkSpec(up=False)})
    assert cmds.add == ()
    assert len(cmds.remove) == 1


def test_not_an_address_is_refused():
    with pytest.raises(ValueError):
        netem.add_commands({"b1; rm -rf /": LinkSpec(delay_ms=1)})


def test_rate_must_be_positive():
    with pytest.raises(ValueError):
        netem.add_commands({"10.0.0.2": LinkSpec(rate_bps=0)})


def test_by_address_rekeys_and_detects_conflicts():
    eg = {"b2": LinkSpec(delay_ms=1), "c1": LinkSpec(delay_ms=2)}
    assert netem.by_address(eg, {"b2": "10.0.0.2", "c1": "10.0.0.3"}) == {
        "10.0.0.2": LinkSpec(delay_ms=1), "10.0.0.3": LinkSpec(delay_ms=2)}
    with pytest.raises(ValueError, match="share address"):
        netem.by_address(eg, {"b2": "10.0.0.2", "c1": "10.0.0.2"})


def test_batch_lines():
    cmds = netem.add_commands({"10.0.0.2": LinkSpec(delay_ms=1)})
    text = netem.batch_lines(cmds)
    assert text.splitlines()[0] == "qdisc add dev eth0 root handle 1: htb"
    assert len(text.splitlines()) == 4
    with pytest.raises(ValueError):
        netem.batch_lines([["tc", "qdisc", "add dev x"]])


def test_kernel_has_netem_uses_probe(tmp_path, monkeypatch):
    calls = []
    missing = tmp_path / "no-module"
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    assert kernel_has_netem(lambda argv: calls.append(argv) or 0, missing) is True
    assert kernel_has_netem(lambda argv: 2, missing) is False
    assert calls == [PROBE]
    loaded = tmp_path / "sch_netem"
    loaded.mkdir()
    assert kernel_has_netem(lambda argv: 2, loaded) is True
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert kernel_has_netem(lambda argv: 0, missing) is False
