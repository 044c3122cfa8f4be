"""The host-side helper of the ansible provider (shipped to every host; stdlib only).

This is the entry point of the ``hostside`` folder, shipped whole beside it: ``procs.py`` (the /proc
table), ``cgroups.py`` (a cgroup per node: CPU/memory limits, the throttle), ``engine.py`` (the
Docker CLI and Engine API), ``host.py`` (the root, runs, nodes as processes or
containers), ``probe.py`` (host facts, check, prepare), ``images.py`` (image load/build) and
``agent.py`` (the process-fault loop). They import each other by plain module name (this
script's directory is on ``sys.path``).

Run as ``<venv>/bin/python <code>/tbhost.py COMMAND ...`` (argument lists only, never a shell).
Layout under ``--root`` (default ``~/.testbed``)::

    venv/                         python3 -m venv --system-site-packages (made by prepare)
    code/<digest>/                testbed/__init__.py, testbed/nodes/**, testbed/protocols/<p>/nodes/**, vendor/msgpack (pure Python,
                                  on PYTHONPATH only where msgpack is missing), tbhost.py
    runs/<run id>/configs/<node>.json, logs/<node>.jsonl|.stderr, state/<node>/, pids/<node>.pid,
                  runtime.json (only when the run's nodes are containers: image, docker command),
                  limits.json (only when the host's nodes have CPU/memory limits: the plan's name of
                  this host, the limits, each process's cgroup.procs files; the cgroups themselves
                  are under /sys/fs/cgroup/.../testbed/<run id>/<host>/, see cgroups.py)
    docker.json                   the docker command that works for this user (["docker"] or
                                  ["sudo", "-n", "docker"]), written by prepare when the host has an engine

Nodes run as processes in the virtualenv, or -- when ``start`` gets ``--image`` -- as one
container per node on the host's own Docker engine (``docker run --network host``: the node
listens on the host's address and ports like a process; the run's directory is bind-mounted at
the same path, so config, logs and state are where a process would have them; ``--user`` is the
SSH user's uid:gid, so everything stays removable without root). Containers are named
``tb-<run>-<node>`` and labeled ``testbed.ansible=1``, ``testbed.root=<root>``,
``testbed.run=<run>``, ``testbed.node=<node>``. Process faults map to the engine: KILL ->
``docker kill`` (waits until it is gone), STOP -> ``docker pause``, CONT -> ``docker unpause``,
spawn -> ``docker start`` of the same container (same config, log appended).

Commands (each prints one JSON object on stdout):

    prepare [--ports N] [--digest D] [--image REF]
                         the root's directories (0700), the virtualenv (--system-site-packages,
                         --without-pip), docker.json, then what ``probe`` says
    probe [--ports N] [--route-to ADDR]... [--image REF]
                         host facts: python, uid, msgpack, tc, docker (cli, engine, whether it
                         answers this user and how, its version, whether it has image REF),
                         sch_netem, clock, N free TCP ports, the egress device towards each ADDR
    check [--emulation auto|kernel|userspace] [--runtime auto|docker|process]
                         what ``prepare`` needs and this host lacks, as Debian package names
                         (``missing``), whether it runs apt (``apt``) and its ``uid``; tc is needed
                         for ``kernel``, and for ``auto`` when the kernel has sch_netem; docker.io
                         for runtime ``docker`` when there is no docker command
    image-load TAR --ref REF
                         ``docker load`` an image saved on the controller, delete TAR, check REF
    image-build TAR --ref REF --base BASE
                         ``docker build`` the node image from a build context TAR on the host
    start RUN [--configs TAR] [--image REF] [--limits FILE] NODE...
                         unpack the node configs (plain file names only), take the run's CPU/memory
                         limits (FILE: {"host", "spec"}; processes: one cgroup each, made now, see
                         cgroups.py; containers: --cpus/--memory), start each node detached (own
                         session, in its cgroups; or a container of REF), write its pid file;
                         {node: pid}
    stop RUN             SIGCONT+SIGTERM, then SIGKILL, every process of the run; remove nothing
    remove RUN           stop, remove the run's cgroups, then delete runs/<run id>
    pack RUN             tar.gz the run's logs to runs/<run id>/logs.tgz; its path, and the kernel's
                         counts of the run's limited nodes (``limits``: as the agent's ``stats``)
    wipe                 stop every run, remove every run's cgroups, delete the whole root
    agent RUN            a request loop on stdin/stdout (one JSON object a line) for process faults:
                         {"op": "signal", "node", "sig": "KILL|STOP|CONT|TERM"}, {"op": "spawn", "node"},
                         {"op": "status"}, {"op": "tail", "node"} (last stderr lines), {"op": "ping"},
                         {"op": "throttle", "node", "cpu": cores|null} (its cgroup's quota, or
                         docker update --cpus), {"op": "stats"} (the kernel's counts per node: cgroup
                         throttling and oom_kill, or a container's OOMKilled); replies {"ok": bool, ...}.
                         Exits on EOF.
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile

import cgroups
from agent import agent
from engine import docker_of
from host import Host, out, safe, unpack_configs, write_json
from images import image_build, image_load
from probe import check, prepare, probe


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="tbhost")
    ap.add_argument("--root", default="~/.testbed")
    ap.add_argument("--code", default=None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe")
    p.add_argument("--ports", type=int, default=0)
    p.add_argument("--route-to", action="append", default=[])
    p.add_argument("--image", default=None)
    p = sub.add_parser("prepare")
    p.add_argument("--ports", type=int, default=0)
    p.add_argument("--digest", default=None)
    p.add_argument("--route-to", action="append", default=[])
    p.add_argument("--image", default=None)
    p = sub.add_parser("check")
    p.add_argument("--emulation", choices=("auto", "kernel", "userspace"), default="auto")
    p.add_argument("--runtime", choices=("auto", "docker", "process"), default="auto")
    p = sub.add_parser("image-load")
    p.add_argument("tar")
    p.add_argument("--ref", required=True)
    p = sub.add_parser("image-build")
    p.add_argument("tar")
    p.add_argument("--ref", required=True)
    p.add_argument("--base", required=True)
    p = sub.add_parser("start")
    p.add_argument("run")
    p.add_argument("--configs", default=None)
    p.add_argument("--image", default=None)
    p.add_argument("--limits", default=None)
    p.add_argument("nodes", nargs="*")
    for c in ("stop", "remove", "pack", "agent"):
        sub.add_parser(c).add_argument("run")
    sub.add_parser("wipe")
    a = ap.parse_args(argv)
    host = Host(a.root, a.code)
    if a.cmd == "probe":
        out(probe(a.ports, a.route_to, a.image))
    elif a.cmd == "prepare":
        out(prepare(host, a.ports, a.digest, a.route_to, a.image))
    elif a.cmd == "check":
        out(check(host, a.emulation, a.runtime))
    elif a.cmd == "image-load":
        out(image_load(host, a.tar, a.ref))
    elif a.cmd == "image-build":
        out(image_build(host, a.tar, a.ref, a.base))
    elif a.cmd == "start":
        if a.configs:
            unpack_configs(host, a.run, a.configs)
        if a.image:
            d = docker_of(host.root)
            if d is None:
                raise RuntimeError("no usable Docker engine on this host (prepare found none)")
            if not d.has_image(a.image):
                raise RuntimeError(f"the host has no image {a.image} (deploy did not ship it)")
            write_json(os.path.join(host.run_dir(a.run), "runtime.json"), {"image": a.image, "docker": d.cmd})
        if a.limits:
            host.set_limits(a.run, a.limits)
        names = [safe(n) for n in a.nodes]
        if a.image and len(names) > 1:  # `docker run` takes ~0.5 s each: start the containers together
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
                pids = list(pool.map(lambda n: host.spawn(a.run, n), names))
            out(dict(zip(names, pids)))
        else:
            out({n: host.spawn(a.run, n) for n in names})
    elif a.cmd == "stop":
        out({"stopped": host.stop(a.run)})
    elif a.cmd == "remove":
        stopped = host.stop(a.run)
        groups = cgroups.remove_run(safe(a.run))  # found by the run id: also after a killed up
        shutil.rmtree(host.run_dir(a.run), ignore_errors=True)
        out({"stopped": stopped, "removed": host.run_dir(a.run), "cgroups": groups})
    elif a.cmd == "pack":
        rd = host.run_dir(a.run)
        if host.runtime(a.run) is not None:
            host.dump_container_logs(a.run)
        dest = os.path.join(rd, "logs.tgz")
        with tarfile.open(dest + ".tmp", "w:gz") as tf:
            if os.path.isdir(os.path.join(rd, "logs")):
                tf.add(os.path.join(rd, "logs"), arcname="logs")
        os.replace(dest + ".tmp", dest)
        out({"path": dest, "limits": host.limit_stats(a.run)})
    elif a.cmd == "agent":
        agent(host, a.run)
    elif a.cmd == "wipe":
        stopped = host.stop(None)
        groups = cgroups.remove_all()
        images = []
        d = docker_of(host.root)
        if d is not None:  # the node images testbed shipped or built here
            images = d.run("images", "-q", "--filter", "label=testbed.image=node", check=False).stdout.split()
            if images:
                d.run("rmi", "-f", *sorted(set(images)), check=False)
        shutil.rmtree(host.root, ignore_errors=True)
        out({"stopped": stopped, "removed": host.root, "images": sorted(set(images)), "cgroups": groups})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ValueError, cgroups.Refused, cgroups.CgroupError) as e:
        print(f"tbhost: {e}", file=sys.stderr)
        sys.exit(2)
