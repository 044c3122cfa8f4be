"""CPU and memory limits of node processes: one cgroup per process (stdlib only).

The one cgroup module of the testbed: the local provider uses it on this machine
(``testbed.providers.local.cgroups`` adds what needs the plan: the keys in its errors, the
manifest), and the ansible provider ships it beside ``tbhost.py`` to every host, whose agent
uses it for the nodes that run there as processes.

Layout, under a parent the testbed owns (``testbed``) in each hierarchy used::

    <root>/testbed/<run-id>/<host>/<process>     v2: <root> is the unified hierarchy
    <root>/cpu/testbed/<run-id>/<host>/<process>     v1: one tree per controller
    <root>/memory/testbed/<run-id>/<host>/<process>

The host's cgroup carries the host's limit (``hosts.<h>.cpu``/``memory``: every process on it
together), the process's cgroup its own effective limit (``NodePlan.cpu``/``memory_bytes``). A
process is put into its cgroups before it runs a line of the node: it is started through a tiny
``python -S -c`` that writes its own pid into each ``cgroup.procs`` and then ``exec``s the node
(no shell; the paths come from the run id and validated names).

Every path is derived from the run id, so removing a run's cgroups needs no record (a killed
``up``/``run``/controller leaves nothing that cannot be found): :func:`remove_run` kills whatever
is still in them (only that run's processes can be there), then removes them, deepest first;
:func:`remove_all` does the same for every run. Creating cgroups needs root, or (cgroup v1) a
``testbed`` parent delegated to the user (made and ``chown``-ed to it by root: the kernel then lets
the owner make and configure cgroups below it and move its own processes into them); where
neither holds, :func:`make` raises :class:`Refused` (and :func:`probe` says so beforehand), and
the providers refuse the plan naming its key, never run without the limit.

``TESTBED_CGROUP_ROOT`` moves ``<root>`` (default ``/sys/fs/cgroup``; tests point it at an
empty directory to see the refusal).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

try:  # on the controller
    from testbed.providers.hostside import procs
except ImportError:  # on a host: shipped beside tbhost.py, imported by plain name
    import procs  # type: ignore[no-redef]

PARENT = "testbed"
PERIOD_US = 100_000  # the CFS period: a share of 0.2 core is 20 ms of CPU per 100 ms

#: What a process runs first: join the cgroups named before ``--``, then become the node.
ENTER = ("import os,sys\n"
         "i=sys.argv.index('--')\n"
         "for p in sys.argv[1:i]:\n"
         "    f=open(p,'w'); f.write(str(os.getpid())); f.close()\n"
         "os.execv(sys.argv[i+1],sys.argv[i+1:])\n")


def root() -> Path:
    return Path(os.environ.get("TESTBED_CGROUP_ROOT", "/sys/fs/cgroup"))


@dataclass(frozen=True)
class Hierarchy:
    """Where the cpu and memory controllers are: one v2 tree, or the two v1 trees."""

    version: int
    cpu: Path | None  # the tree holding the cpu controller
    memory: Path | None

    def trees(self) -> list[Path]:
        return sorted({p for p in (self.cpu, self.memory) if p is not None})


def detect() -> Hierarchy:
    """The cgroup hierarchy of this machine: v2 where the unified tree has cpu/memory, else v1."""
    r = root()
    ctl = r / "cgroup.controllers"
    if ctl.exists():
        have = set(ctl.read_text().split())
        return Hierarchy(2, r if "cpu" in have else None, r if "memory" in have else None)
    cpu = r / "cpu" if (r / "cpu" / "cpu.cfs_quota_us").exists() else None
    mem = r / "memory" if (r / "memory" / "memory.limit_in_bytes").exists() else None
    return Hierarchy(1, cpu, mem)


class Refused(Exception):
    """A limit cannot be enforced here: ``what`` (cpu|memory) and why, in words."""

    def __init__(self, what: str, why: str):
        super().__init__(f"{what}: {why}")
        self.what = what
        self.why = why


class CgroupError(Exception):
    """A cgroup operation on a running node failed (no cgroup, a write refused...)."""


def run_dirs(h: Hierarchy, run_id: str) -> list[Path]:
    return [t / PARENT / run_id for t in h.trees()]


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _cpu_value(h: Hierarchy, cores: float | None) -> tuple[str, str]:
    """(file, value) that sets a cpu limit (None: none)."""
    if h.version == 2:
        return "cpu.max", ("max" if cores is None else f"{max(1000, round(cores * PERIOD_US))} {PERIOD_US}")
    return "cpu.cfs_quota_us", ("-1" if cores is None else str(max(1000, round(cores * PERIOD_US))))


def _set_cpu(h: Hierarchy, d: Path, cores: float | None) -> None:
    if h.version == 1 and cores is not None:
        _write(d / "cpu.cfs_period_us", str(PERIOD_US))
    name, value = _cpu_value(h, cores)
    _write(d / name, value)


def _weigh(h: Hierarchy, tree: Path) -> None:
    """Give every testbed cgroup above the processes the CPU weight of the processes below it.

    Under CFS group scheduling a cgroup competes with its siblings as one entity of its weight
    (v1 ``cpu.shares`` 1024, v2 ``cpu.weight`` 100: one task's): left alone, the ``testbed``
    parent would get one task's part of a busy machine for all the nodes of every run. Weighted
    by their process counts, limited nodes compete like the unlimited processes they would be."""
    base = tree / PARENT
    if not base.is_dir():
        return
    name, unit, top = ("cpu.weight", 100, 10_000) if h.version == 2 else ("cpu.shares", 1024, 262_144)

    total = 0
    for run in (p for p in base.iterdir() if p.is_dir()):
        n_run = 0
        for host in (p for p in run.iterdir() if p.is_dir()):
            n = sum(1 for p in host.iterdir() if p.is_dir())
            n_run += n
            if (host / name).exists() and n:
                _write(host / name, str(min(top, unit * n)))
        if (run / name).exists() and n_run:
            _write(run / name, str(min(top, unit * n_run)))
        total += n_run
    if (base / name).exists():
        _write(base / name, str(min(top, unit * max(1, total))))


def _set_memory(h: Hierarchy, d: Path, nbytes: int | None) -> None:
    if h.version == 2:
        _write(d / "memory.max", "max" if nbytes is None else str(nbytes))
        if nbytes is not None and (d / "memory.swap.max").exists():
            _write(d / "memory.swap.max", "0")
        return
    _write(d / "memory.limit_in_bytes", "-1" if nbytes is None else str(nbytes))
    if nbytes is not None and (d / "memory.memsw.limit_in_bytes").exists():  # swap accounting on
        try:
            _write(d / "memory.memsw.limit_in_bytes", str(nbytes))
        except OSError:
            pass
    if nbytes is not None and (d / "memory.swappiness").exists():
        try:
            _write(d / "memory.swappiness", "0")
        except OSError:
            pass


def _mkdir(h: Hierarchy, d: Path) -> None:
    d.mkdir(parents=False, exist_ok=True)


def _enable_v2(h: Hierarchy, chain: list[Path], cpu: bool, mem: bool) -> None:
    """v2: a controller works in a cgroup only when every ancestor enables it for its children."""
    want = " ".join(x for x, on in (("+cpu", cpu), ("+memory", mem)) if on)
    for d in chain:
        _write(d / "cgroup.subtree_control", want)


def make(run_id: str, hosts: dict[str, Sequence], nodes: dict[str, Sequence], need_cpu: bool,
         need_mem: bool) -> dict[str, list[str]]:
    """Create a run's cgroups with their limits. -> {process: [cgroup.procs files to join]}.

    ``hosts``: host -> [cores, bytes] of the host's joint limit (None: none); ``nodes``: process ->
    [host, cores, bytes] (as :func:`testbed.providers.capacity.spec` gives them); ``need_cpu``/``need_mem``: which controllers the run uses (a throttle
    fault needs cpu without any cpu limit at the start). Raises :class:`Refused` when a controller
    is not mounted or cgroups cannot be made here (what was made is removed again)."""
    h = detect()
    for what, need, tree in (("cpu", need_cpu, h.cpu), ("memory", need_mem, h.memory)):
        if need and tree is None:
            raise Refused(what, f"no cgroup '{what}' controller is mounted under {root()}")
    trees: dict[str, Path] = {}
    if need_cpu:
        trees["cpu"] = h.cpu  # type: ignore[assignment]
    if need_mem:
        trees["memory"] = h.memory  # type: ignore[assignment]
    out: dict[str, list[str]] = {n: [] for n in nodes}
    what = "cpu" if need_cpu else "memory"
    try:
        for what, tree in trees.items():
            base = tree / PARENT
            chain = [tree, base, base / run_id]
            for d in chain[1:]:
                _mkdir(h, d)
            if h.version == 2:
                _enable_v2(h, chain, need_cpu, need_mem)
            for host in sorted({n[0] for n in nodes.values()}):
                hd = base / run_id / host
                _mkdir(h, hd)
                if h.version == 2:
                    _enable_v2(h, [hd], need_cpu, need_mem)
                hcpu, hmem = hosts.get(host, (None, None))
                if what == "cpu":
                    _set_cpu(h, hd, hcpu)
                else:
                    _set_memory(h, hd, hmem)
            for name, (host, cpu, mem) in nodes.items():
                nd = base / run_id / host / name
                _mkdir(h, nd)
                if what == "cpu":
                    _set_cpu(h, nd, cpu)
                else:
                    _set_memory(h, nd, mem)
                procs_file = str(nd / "cgroup.procs")
                if procs_file not in out[name]:
                    out[name].append(procs_file)
            if what == "cpu":
                _weigh(h, tree)
    except OSError as e:
        try:
            remove_run(run_id)
        except CgroupError:
            pass
        why = ("this user may not create cgroups (not root, and no testbed parent delegated to it)"
               if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
               else f"a cgroup could not be made: {e}")
        raise Refused(what, why) from None
    return out


def probe() -> dict:
    """What a host can enforce, for its facts: ``{"version", "cpu", "memory", "why"}`` where
    ``cpu``/``memory`` say whether this user can make cgroups of that controller here (root, or
    the ``testbed`` parent delegated to it); ``why`` says why not, per controller."""
    h = detect()
    out: dict = {"version": h.version, "cpu": False, "memory": False, "why": {}}
    for what, tree in (("cpu", h.cpu), ("memory", h.memory)):
        if tree is None:
            out["why"][what] = f"no cgroup '{what}' controller is mounted under {root()}"
            continue
        base = tree / PARENT
        where = base if base.is_dir() else tree
        if not os.access(where, os.W_OK | os.X_OK):
            out["why"][what] = (f"this user (uid {os.getuid()}) may not create cgroups under {where} "
                                "(not root, and no testbed parent delegated to it)")
        elif h.version == 2 and os.getuid() != 0 and not os.access(tree / "cgroup.procs", os.W_OK):
            # v2 moves a process only for a writer of the common ancestor's cgroup.procs (here the
            # root: a node starts in the SSH session's cgroup), whoever owns the testbed parent
            out["why"][what] = (f"this user (uid {os.getuid()}) may not move processes into cgroups under {tree} "
                                "(cgroup v2 needs root, or write access to its cgroup.procs)")
        else:
            out[what] = True
    return out


def wrap(argv: list[str], procs_files: list[str]) -> list[str]:
    """The command that starts ``argv`` inside the given cgroups (``argv`` unchanged if none)."""
    if not procs_files:
        return argv
    return [sys.executable, "-S", "-c", ENTER, *procs_files, "--", *argv]


def node_dirs(run_id: str, host: str, node: str) -> dict[str, Path]:
    """{controller: the process's cgroup dir} for the controllers that have one."""
    h = detect()
    out = {}
    for what, tree in (("cpu", h.cpu), ("memory", h.memory)):
        if tree is not None and (d := tree / PARENT / run_id / host / node).is_dir():
            out[what] = d
    return out


def set_cpu(run_id: str, host: str, node: str, cores: float | None) -> None:
    """Change a process's CPU share now (the throttle fault). CgroupError if it has no cgroup."""
    d = node_dirs(run_id, host, node).get("cpu")
    if d is None:
        raise CgroupError("throttle: the node has no cpu cgroup (the run was brought up without one)")
    try:
        _set_cpu(detect(), d, cores)
    except OSError as e:
        raise CgroupError(f"throttle: could not set the cpu limit: {e}") from None


def oom_kills(run_id: str, host: str, node: str) -> int:
    """How many processes the kernel's OOM killer killed in this process's memory cgroup."""
    d = node_dirs(run_id, host, node).get("memory")
    if d is None:
        return 0
    for name in ("memory.events", "memory.oom_control"):  # v2, v1 (kernel >= 4.13)
        p = d / name
        if p.exists():
            for line in p.read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == "oom_kill":
                    return int(v)
    return 0


def _tree_pids(d: Path) -> list[int]:
    pids: list[int] = []
    for p in d.rglob("cgroup.procs"):
        try:
            pids += [int(x) for x in p.read_text().split()]
        except OSError:
            pass
    return pids


def _remove_tree(d: Path, deadline: float) -> None:
    """Kill what is left in ``d`` (a run's or every run's cgroups: only testbed processes are
    there), then remove it, deepest first."""
    if not d.is_dir():
        return
    pids = _tree_pids(d)
    for pid in pids:
        procs.kill(pid, signal.SIGCONT)
        procs.kill(pid, signal.SIGKILL)
    procs.wait_gone(pids, 3.0)
    subdirs = sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
    for p in subdirs + [d]:
        while True:
            try:
                p.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as e:
                # EBUSY: a killed process is still being torn down by the kernel
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise CgroupError(f"could not remove cgroup {p}: {e}") from None
                time.sleep(0.05)


def remove_run(run_id: str) -> list[str]:
    """Remove a run's cgroups (and kill anything still in them). -> the removed paths."""
    removed = []
    deadline = time.monotonic() + 10.0
    h = detect()
    for d in run_dirs(h, run_id):
        if d.is_dir():
            _remove_tree(d, deadline)
            removed.append(str(d))
    if removed and h.cpu is not None:
        try:
            _weigh(h, h.cpu)
        except OSError:
            pass  # another run's cgroups changed meanwhile: its own setup weighs again
    return removed


def remove_all() -> list[str]:
    """Every run's cgroups (``testbed wipe``). The ``testbed`` parents stay (empty)."""
    removed = []
    deadline = time.monotonic() + 10.0
    for t in detect().trees():
        base = t / PARENT
        if base.is_dir():
            for d in sorted(p for p in base.iterdir() if p.is_dir()):
                _remove_tree(d, deadline)
                removed.append(str(d))
    return removed


def stats(run_id: str, nodes: dict[str, str]) -> dict[str, dict[str, float]]:
    """{process: {nr_periods, nr_throttled, throttled_s, oom_kill}} from the run's cgroups (the
    kernel's own counts: whether a limit bound, and how often), for the processes that have one.
    ``nodes``: process -> host."""
    out: dict[str, dict[str, float]] = {}
    for node, host in nodes.items():
        dirs = node_dirs(run_id, host, node)
        if not dirs:
            continue
        d: dict[str, float] = {}
        if "cpu" in dirs and (dirs["cpu"] / "cpu.stat").exists():
            for line in (dirs["cpu"] / "cpu.stat").read_text().splitlines():
                k, _, v = line.partition(" ")
                if k in ("nr_periods", "nr_throttled"):
                    d[k] = int(v)
                elif k == "throttled_time":  # v1: ns
                    d["throttled_s"] = int(v) / 1e9
                elif k == "throttled_usec":  # v2
                    d["throttled_s"] = int(v) / 1e6
        if "memory" in dirs:
            d["oom_kill"] = oom_kills(run_id, host, node)
        out[node] = d
    return out
