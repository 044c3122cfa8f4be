"""Kernel link emulation for the ansible provider: the choice, and the ``links`` playbook's
variables. Pure: plan + host facts in, per-host argument lists out.

The nodes of one host are processes sharing that host's address, so a ``tc`` u32 filter
(which matches destination addresses) can only shape traffic per destination *host*:

* one HTB slice per (host, other host) pair, whose netem options are the plan's link
  between the nodes of the two hosts -- every node pair between them must have the same
  tc-relevant spec (delay, jitter, distribution, loss, rate), else kernel emulation is
  impossible for this plan (auto mode falls back to userspace, a forced ``kernel`` fails);
* node pairs on the same host talk over loopback to the host's own address: no tc slice
  is made for them (shaping ``lo`` or the host's own address would hit every same-host
  pair alike, and the controller's control traffic too), and in kernel mode the node
  runtime applies no delay/loss either, so same-host pairs run unemulated.

The egress device towards each other host is the one ``ip route get`` named on the host
(``prepare`` reports it); one HTB tree per device. Commands come from
:mod:`testbed.links.netem`; the playbook runs them as argument lists (``command: argv``):
``tb_tc_remove`` (failures ignored), then ``tb_tc_add``. Teardown passes removes only.
"""

from __future__ import annotations

from typing import Any, Mapping

from testbed.errors import ProviderError
from testbed.links.netem import egress_commands, remove_commands
from testbed.topology.plan import LinkSpec, Plan

EMULATION_ENV = "TESTBED_ANSIBLE_EMULATION"  # "kernel" | "userspace": override the automatic choice
TC_FIELDS = ("delay_ms", "jitter_ms", "distribution", "loss", "rate_bps")


def _tc_key(spec: LinkSpec) -> tuple[Any, ...]:
    return tuple(getattr(spec, f) for f in TC_FIELDS)


def host_pair_links(plan: Plan, node_hosts: Mapping[str, str]) -> dict[str, dict[str, LinkSpec]]:
    """``{src host: {dst host: LinkSpec}}`` for every pair of distinct hosts with links.

    Raises ValueError naming the two node pairs when pairs between one host pair disagree
    on a tc-relevant field (tc cannot tell them apart).
    """
    out: dict[str, dict[str, LinkSpec]] = {}
    owner: dict[tuple[str, str], str] = {}
    for src in plan.nodes:
        hs = node_hosts[src]
        for dst, spec in sorted(plan.egress(src).items()):
            hd = node_hosts.get(dst)
            if hd is None or hd == hs:
                continue
            have = out.setdefault(hs, {}).get(hd)
            if have is None:
                out[hs][hd] = spec
                owner[(hs, hd)] = f"{src}->{dst}"
            elif _tc_key(have) != _tc_key(spec):
                raise ValueError(f"links {owner[(hs, hd)]} and {src}->{dst} both go from host {hs} to host {hd} "
                                 "with different delay/jitter/loss/rate (tc shapes per destination host)")
    return out


def tc_vars(plan: Plan, node_hosts: Mapping[str, str], addresses: Mapping[str, str],
            devices: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, list[list[str]]]]:
    """Per host: ``tb_tc_remove`` / ``tb_tc_add`` argument lists for the ``links`` playbook.

    ``addresses``: host -> address; ``devices``: host -> {destination address: egress device}.
    Every host gets its devices' remove commands (idempotent apply); hosts without links
    get nothing to add. Raises ProviderError when a host has no route to another host.
    """
    pairs = host_pair_links(plan, node_hosts)
    out: dict[str, dict[str, list[list[str]]]] = {}
    for h in sorted(addresses):
        per_dev: dict[str, dict[str, LinkSpec]] = {}
        for hd, spec in sorted(pairs.get(h, {}).items()):
            addr = addresses[hd]
            dev = devices.get(h, {}).get(addr)
            if not dev:
                raise ProviderError(f"no route (egress device) to host {hd} at {addr}", host=h)
            per_dev.setdefault(dev, {})[addr] = spec
        remove: list[list[str]] = []
        add: list[list[str]] = []
        for dev in sorted(per_dev):
            cmds = egress_commands(per_dev[dev], device=dev)
            remove += [list(c) for c in cmds.remove]
            add += [list(c) for c in cmds.add]
        out[h] = {"tb_tc_remove": remove, "tb_tc_add": add}
    return out


def teardown_vars(devices_used: Mapping[str, list[str]]) -> dict[str, dict[str, list[list[str]]]]:
    """Per host: remove the root qdisc of every device the run shaped; add nothing."""
    return {h: {"tb_tc_remove": [c for d in sorted(devs) for c in remove_commands(d)], "tb_tc_add": []}
            for h, devs in devices_used.items()}


def devices_used(tc: Mapping[str, Mapping[str, list[list[str]]]]) -> dict[str, list[str]]:
    """The devices each host's ``tb_tc_add`` shapes (``tc ... dev <d> ...``)."""
    out: dict[str, list[str]] = {}
    for h, v in tc.items():
        devs = {c[c.index("dev") + 1] for c in v["tb_tc_add"] if "dev" in c}
        out[h] = sorted(devs)
    return out


def choose_emulation(plan: Plan, node_hosts: Mapping[str, str], facts: Mapping[str, Mapping[str, Any]],
                     become: Mapping[str, bool], override: str | None) -> tuple[str, str]:
    """``(emulation, reason)``: ``kernel`` only when every host has sch_netem and tc, may run
    tc as root (its user is root, or the topology sets ``become: true``), and the plan's
    links are expressible per destination host; else ``userspace``.

    ``override`` (``$TESTBED_ANSIBLE_EMULATION``) forces a mode: ``userspace`` always works;
    a forced ``kernel`` skips the sch_netem check (for a kernel whose netem module is not
    loaded yet) but still needs tc, root and expressible links, else ProviderError.
    """
    if override not in (None, "", "kernel", "userspace"):
        raise ProviderError(f"{EMULATION_ENV}={override!r}: choose kernel or userspace")
    if override == "userspace":
        return "userspace", f"forced by {EMULATION_ENV}=userspace"
    forced = override == "kernel"
    problems: list[str] = []
    for h in sorted(facts):
        f = facts[h]
        if not forced and not f.get("sch_netem"):
            problems.append(f"host {h}: no sch_netem")
        if not f.get("tc"):
            problems.append(f"host {h}: no tc")
        if f.get("uid") != 0 and not become.get(h):
            problems.append(f"host {h}: tc needs root (the user is not root and the host has no become: true)")
    try:
        host_pair_links(plan, node_hosts)
    except ValueError as e:
        problems.append(str(e))
    if not problems:
        return "kernel", ("forced by " + EMULATION_ENV + "=kernel" if forced else
                          "every host has sch_netem, tc and root")
    if forced:
        raise ProviderError(f"{EMULATION_ENV}=kernel: " + "; ".join(problems))
    return "userspace", "kernel tc netem not possible: " + "; ".join(problems)
