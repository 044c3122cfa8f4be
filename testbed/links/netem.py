"""LinkSpecs -> ``tc`` argument lists (kernel link emulation). Pure: values in, commands out.

One sender's egress is shaped on one device with an HTB tree, one slice per distinct
destination address (the shape of EnOSlib's NetemHTB)::

    tc qdisc add dev eth0 root handle 1: htb
    tc class add dev eth0 parent 1: classid 1:<i> htb rate <rate>            # per destination
    tc qdisc add dev eth0 parent 1:<i> handle <i+10>: netem delay .. loss .. # per destination
    tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst <ip>/32 flowid 1:<i>

Traffic to destinations without a slice is not classified and leaves unshaped.
Applying is idempotent as "remove, then add": :func:`remove_commands` deletes the root
qdisc (its failure when there is none is expected and ignored by the executor), then
:func:`add_commands` builds the tree anew.

Not expressed in tc: ``up`` (link cuts) and stall stay in the node runtime's userspace
egress even in kernel mode; ``reorder`` needs no tc option because node traffic is TCP
(the stream is delivered in order whatever netem does to segments).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Mapping

from testbed.topology.plan import LINK_DISTRIBUTIONS, LinkSpec

DEFAULT_RATE = "10gbit"  # the class rate of a slice whose link has no rate limit
FIRST_CLASS = 1
HANDLE_OFFSET = 10  # netem child of class 1:<i> gets handle <i + 10>:
MAX_SLICES = 0xFFFF - HANDLE_OFFSET


@dataclass(frozen=True)
class TcCommands:
    """The commands for one device: run ``remove`` (failures ignored), then ``add`` (must succeed)."""

    device: str
    remove: tuple[tuple[str, ...], ...]
    add: tuple[tuple[str, ...], ...]

    def all(self) -> list[list[str]]:
        return [list(c) for c in (*self.remove, *self.add)]


def is_noop(spec: LinkSpec) -> bool:
    """True when the spec asks tc for nothing (no delay, jitter, loss or rate)."""
    return spec.delay_ms <= 0 and spec.jitter_ms <= 0 and spec.loss <= 0 and spec.rate_bps is None


def _ms(v: float) -> str:
    # tc accepts fractional ms ("0.5ms"); keep integers clean ("10ms").
    return f"{int(v)}ms" if float(v).is_integer() else f"{v:g}ms"


def _pct(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def rate_arg(rate_bps: int | None) -> str:
    return DEFAULT_RATE if rate_bps is None else f"{int(rate_bps)}bit"


def netem_options(spec: LinkSpec) -> list[str]:
    """The netem part of a slice: ``delay D [J [distribution X]] [loss P%]``.

    ``uniform`` is netem's behaviour when no distribution is named, so it is omitted;
    a distribution without jitter means nothing to netem and is omitted too.
    """
    if spec.distribution not in LINK_DISTRIBUTIONS:
        raise ValueError(f"unknown delay distribution {spec.distribution!r} (one of {', '.join(LINK_DISTRIBUTIONS)})")
    if spec.delay_ms < 0 or spec.jitter_ms < 0:
        raise ValueError("delay and jitter must be >= 0")
    if not 0 <= spec.loss <= 1:
        raise ValueError(f"loss {spec.loss} is not a fraction in [0, 1]")
    opts = ["delay", _ms(spec.delay_ms)]
    if spec.jitter_ms > 0:
        opts.append(_ms(spec.jitter_ms))
        if spec.distribution != "uniform":
            opts += ["distribution", spec.distribution]
    if spec.loss > 0:
        opts += ["loss", _pct(spec.loss)]
    return opts


def _match(ip: str) -> list[str]:
    addr = ipaddress.ip_address(ip)  # ValueError for anything that is not an address
    if addr.version == 4:
        return ["protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", f"{addr}/32"]
    return ["protocol", "ipv6", "prio", "2", "u32", "match", "ip6", "dst", f"{addr}/128"]


def remove_commands(device: str = "eth0") -> list[list[str]]:
    """Delete whatever root qdisc the device has (fails harmlessly when there is none)."""
    return [["tc", "qdisc", "del", "dev", device, "root"]]


def slice_commands(device: str, index: int, ip: str, spec: LinkSpec) -> list[list[str]]:
    """class + netem child + filter for one destination (``index`` from 0)."""
    if spec.rate_bps is not None and spec.rate_bps <= 0:
        raise ValueError(f"rate {spec.rate_bps} must be > 0 bit/s")
    cls = f"1:{FIRST_CLASS + index:x}"
    handle = f"{HANDLE_OFFSET + index:x}:"
    return [
        ["tc", "class", "add", "dev", device, "parent", "1:", "classid", cls, "htb", "rate", rate_arg(spec.rate_bps)],
        ["tc", "qdisc", "add", "dev", device, "parent", cls, "handle", handle, "netem", *netem_options(spec)],
        ["tc", "filter", "add", "dev", device, "parent", "1:", *_match(ip), "flowid", cls],
    ]


def add_commands(links: Mapping[str, LinkSpec], device: str = "eth0") -> list[list[str]]:
    """The whole HTB tree for one sender; ``links`` maps destination IP -> LinkSpec.

    Destinations are ordered by address so the output is deterministic; no-op specs get
    no slice; when every spec is a no-op there is nothing to add (the device stays bare).
    """
    shaped = sorted(((ipaddress.ip_address(ip), ip, s) for ip, s in links.items() if not is_noop(s)),
                    key=lambda t: (t[0].version, t[0]))
    if not shaped:
        return []
    if len(shaped) > MAX_SLICES:
        raise ValueError(f"{len(shaped)} destinations exceed the {MAX_SLICES} slices of one HTB tree")
    cmds = [["tc", "qdisc", "add", "dev", device, "root", "handle", "1:", "htb"]]
    for i, (_, ip, spec) in enumerate(shaped):
        cmds += slice_commands(device, i, ip, spec)
    return cmds


def egress_commands(links: Mapping[str, LinkSpec], device: str = "eth0") -> TcCommands:
    """Remove-then-add commands that make ``device``'s egress match ``links`` exactly."""
    return TcCommands(device, tuple(map(tuple, remove_commands(device))),
                      tuple(map(tuple, add_commands(links, device))))


def by_address(egress: Mapping[str, LinkSpec], addresses: Mapping[str, str]) -> dict[str, LinkSpec]:
    """Re-key one node's egress (destination node -> spec) by destination address.

    Two destination nodes behind one address (e.g. same host) cannot be told apart by a
    u32 dst match: that is an error unless their specs are equal.
    """
    out: dict[str, LinkSpec] = {}
    owner: dict[str, str] = {}
    for dst, spec in egress.items():
        ip = addresses[dst]
        if ip in out and out[ip] != spec:
            raise ValueError(f"{dst} and {owner[ip]} share address {ip} but have different links")
        out[ip] = spec
        owner.setdefault(ip, dst)
    return out


def batch_lines(commands: list[list[str]]) -> str:
    """The commands as a ``tc -batch`` file (each line without the leading ``tc``)."""
    lines = []
    for c in commands:
        if not c or c[0] != "tc":
            raise ValueError(f"not a tc command: {c!r}")
        if any(not a or any(ch.isspace() or ch in "\"'\\#" for ch in a) for a in c):
            raise ValueError(f"unsafe argument in {c!r}")
        lines.append(" ".join(c[1:]))
    return "".join(line + "\n" for line in lines)
