"""Provider ``ansible``: a topology's processes across many real hosts over SSH.

Every plan host that runs processes needs ``address`` (and usually ``user`` and ``key``).
``up`` runs the playbooks in ``testbed/providers/ansible/playbooks/`` through :func:`~.runner.run_playbook`:

1. ``prepare``  -- installs what is missing with apt (python3; python3-venv; iproute2 when kernel
   link emulation may be used; docker.io for ``runtime: docker``) when the user is root or the
   host has ``become: true``, else fails naming the host and the packages; checks python3 >=
   3.11; creates ``~/.testbed`` and a virtualenv (``--system-site-packages``); ships the host
   helper ``tbhost.py``; reports host facts (python, uid, msgpack, tc, the Docker engine and
   whether it has the node image, sch_netem, egress devices, free TCP ports). The runtime per
   host follows (:func:`.images.choose_runtimes`). Then ``links`` (kernel emulation only)
   applies tc on every host.
2. ``deploy``   -- ships the node bundle once per code version (``~/.testbed/code/<digest>``),
   and the node image to container hosts that lack it (:mod:`.images`: docker save/copy/load,
   or a build on the host).
3. ``start``    -- the node configs rendered from the plan (listening on the host's ports,
   peers at the other hosts' addresses), one detached process per node in the virtualenv, or
   one container per node (``--network host``) on a container host.

Nodes run as containers on hosts whose Docker engine answers the SSH user (``runtime: auto``,
or forced with ``runtime: docker``), else as processes (``runtime: process`` forces it).
``check_hosts`` (``testbed hosts``) runs step 1 alone and reports. Link emulation (:mod:`.links`): kernel ``tc netem`` on each host's
egress, one slice per destination *host* (``links`` playbook, before the nodes start;
removed at ``down``), when every host has sch_netem, tc and root (or ``become: true``) and
the plan's links are expressible per host pair; else the node runtime's userspace
emulation per destination node. ``$TESTBED_ANSIBLE_EMULATION`` forces either. The choice
and its reason are in the deployment and the manifest.

CPU/memory limits and the throttle fault (docs/topology.md, Capacity; docs/ansible.md): a cgroup
per node on process hosts (the local provider's module, run by the host helper: ``start --limits``,
the agent's ``throttle``, the counts returned by ``pack``, removal by ``remove``/``wipe``),
``--cpus``/``--memory`` and ``docker update`` on container hosts; refused at ``up`` naming the key
where a host cannot enforce them (:func:`check_capacity`, from the host's facts).

Control ports listen on each host's loopback (``127.0.0.1``; the data ports on every interface,
where the peers reach them): the controller reaches them through ``direct-tcpip`` channels of an
SSH connection per host (:mod:`testbed.providers.tunnel`, the endpoint's ``tunnel``), so no other
machine can connect to them. Process faults go through one persistent SSH connection per host carrying four sessions to
``tbhost.py agent`` (which signals processes, or drives the host's Docker engine for
containers), opened during ``up`` (and by :meth:`AnsibleProvider.warm_up` in a fresh controller
process) so no connection is set up on the schedule's critical path. Link faults use the nodes'
control channels like every provider.

``collect`` packs the logs on each host, fetches and unpacks them into ``<run>/logs`` and
writes each host's facts to ``<run>/hosts/<host>.json``. ``down`` asks the nodes to shut
down, collects, then stops whatever is left and deletes the run's directory on each host.
``wipe`` removes the tc qdiscs runs shaped, every testbed container and node image, and
``~/.testbed`` from every host any run ever used (a registry of host records -- address, port,
user, key *path*, shaped devices, nothing secret -- kept outside run directories).

Security: SSH host keys are verified against ``~/.ssh/known_hosts`` and the files in
``TESTBED_KNOWN_HOSTS`` (StrictHostKeyChecking=yes for Ansible, RejectPolicy for the agent
sessions); playbooks pass argument lists (``command: argv``), the agent command line is
``shlex.join``-ed; private keys are referenced by path, never copied anywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.errors import ProviderError
from testbed.providers.ansible.bundle import build_bundle, hostside_files, tar_files
from testbed.providers.ansible.images import (
    IMAGE_MODE_ENV, build_base, build_context, choose_mode, choose_runtimes, image_ref, saved_image,
)
from testbed.providers.ansible.inventory import (
    host_record, layout, nodes_by_host, plan_hosts, render_inventory, render_inventory_hosts,
)
from testbed.providers.ansible.links import (
    EMULATION_ENV, choose_emulation, devices_used, tc_vars, teardown_vars,
)
from testbed.providers.ansible.runner import known_hosts_files, run_playbook, ssh_common_args
from testbed.providers.control import shutdown_nodes
from testbed.providers.base import NodeStatus, Progress, Provider, process_status
from testbed.providers.capacity import key_of, limited, needs, refuse_joint_limits, spec
from testbed.render.node_config import render_node_config
from testbed.runs.deployment import Deployment
from testbed.runs.oom import record_stats
from testbed.runs import scratch
from testbed.runs.rundir import RunDir, write_json_atomic
from testbed.topology.plan import Action, Plan

START_TIMEOUT_S = 60.0
REGISTRY_ENV = "TESTBED_ANSIBLE_REGISTRY"
CACHE_ENV = "TESTBED_CACHE"
SIGNAL_OF = {"crash": "KILL", "pause": "STOP", "resume": "CONT"}
LOOPBACK = "127.0.0.1"  # where a node's control port listens on its host
CONTAINER_RUN_DIR = "/run/testbed"  # hostside/host.py's IN_RUN: the run's files inside a node container


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or os.path.expanduser("~/.cache/testbed")) / "ansible"


def registry_path() -> Path:
    return Path(os.environ.get(REGISTRY_ENV) or (cache_dir() / "hosts.json"))


def _register(records: list[dict[str, Any]], tc_devices: dict[str, list[str]] | None = None) -> None:
    """Remember every host ever used, for ``wipe`` (address/port/user/key path only, and the
    devices a run shaped with tc there, so ``wipe`` can remove qdiscs a killed run left)."""
    p = registry_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        known = json.loads(p.read_text())
    except (OSError, ValueError):
        known = []
    by_key = {(h["address"], h.get("port"), h.get("user")): h for h in known}
    for r in records:
        key = (r["address"], r.get("port"), r.get("user"))
        if key not in by_key:
            by_key[key] = dict(r)
            known.append(by_key[key])
        devs = (tc_devices or {}).get(r["name"])
        if devs:
            rec = by_key[key]
            rec["tc_devices"] = sorted(set(rec.get("tc_devices", [])) | set(devs))
            rec["become"] = bool(rec.get("become") or r.get("become"))
    write_json_atomic(p, known)


def _emulation_override() -> str | None:
    """``$TESTBED_ANSIBLE_EMULATION``: None (choose), ``kernel`` or ``userspace``."""
    override = os.environ.get(EMULATION_ENV) or None
    if override not in (None, "kernel", "userspace"):
        raise ProviderError(f"{EMULATION_ENV}={override!r}: choose kernel or userspace")
    return override


def ssh_tunnel(hp: Any) -> dict[str, Any]:
    """The SSH target through which the controller reaches a host's control ports (bound to its
    loopback): :mod:`testbed.providers.tunnel`, known_hosts verified like the provider's sessions."""
    return {"kind": "ansible", "address": hp.address, "port": int(hp.port or 22), "user": hp.user,
            "key": hp.key}


@dataclass(frozen=True)
class Prepared:
    """What ``prepare`` found: facts per host, the runtime per host and why, the node image ref."""

    facts: dict[str, dict[str, Any]]
    runtimes: dict[str, str]
    runtime_why: dict[str, str]
    ref: str | None
    context: str | None


def check_capacity(plan: Plan, runtimes: dict[str, str], facts: dict[str, dict[str, Any]]) -> None:
    """CPU/memory limits and the throttle fault on remote hosts (docs/topology.md, Capacity), as the
    local provider (processes: a cgroup each, made by the host's ``tbhost.py``) or docker
    (containers: ``--cpus``/``--memory``) enforce them. Refused before anything starts, naming the
    key, where a process host cannot make cgroups (its facts say why: no controller, not root and
    no delegated ``testbed`` parent) and where a container host has a joint limit over several
    processes; never run without the limit."""
    by_host = nodes_by_host(plan)
    refuse_joint_limits(plan, {h for h, r in runtimes.items() if r == "docker"},
                        "the ansible provider, on a host that runs containers,")
    for h, r in sorted(runtimes.items()):
        nodes = set(by_host.get(h, []))
        if r == "docker" or not nodes:
            continue
        cg = facts.get(h, {}).get("cgroups") or {}
        for what, need in zip(("cpu", "memory"), needs(plan, nodes)):
            if need and not cg.get(what):
                why = (cg.get("why") or {}).get(what) or "the host reported no cgroup facts"
                raise ProviderError(f"{key_of(plan, what, nodes)}: the ansible provider limits {what} with cgroups "
                                    f"on host {h}, and {why}; remove the key, or make cgroups writable there "
                                    "(as root, or a testbed parent delegated to the user: docs/ansible.md)")


class AnsibleProvider(Provider):
    name = "ansible"

    def __init__(self) -> None:
        self._agents: dict[tuple[str, str], Any] = {}  # (run id, host) -> HostAgent
        self._agent_lock = threading.Lock()

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def _ssh_args() -> str:
        return ssh_common_args(known_hosts_files())

    @staticmethod
    def _inventory(run_id: str, state: dict[str, Any]) -> str:
        """The inventory of a run's hosts from state.json, with each host's testbed root."""
        roots = state.get("roots", {})
        return render_inventory_hosts(state.get("hosts", []), run_id, AnsibleProvider._ssh_args(),
                                      {h: {"tb_root": r} for h, r in roots.items()})

    # -- prepare (up's first step, and `testbed hosts`) ----------------------------------
    def _prepare(self, plan: Plan, run_id: str, override: str | None, bundle: Path, digest: str,
                 progress: Progress) -> "Prepared":
        """Run ``prepare.yml`` on the plan's hosts; their facts and the runtime chosen for each."""
        hosts = plan_hosts(plan)
        wanted = {h: hp.runtime for h, hp in hosts.items()}
        ref = context = None
        if any(w != "process" for w in wanted.values()):
            try:
                ref, context = image_ref()
            except ProviderError as e:  # no node Dockerfile (not a source checkout): processes only
                if any(w == "docker" for w in wanted.values()):
                    raise
                progress(f"containers not possible ({e}); nodes run as processes")
                wanted = {h: "process" for h in wanted}
        progress(f"prepare {len(hosts)} hosts")
        inv = render_inventory(plan, run_id, self._ssh_args(), {h: {"tb_runtime": w} for h, w in wanted.items()})
        routes = [f"--route-to={hp.address}" for hp in hosts.values()]
        image_args = ["--image", ref] if ref else []
        res = run_playbook("prepare", inv, {"tb_hostside": [str(p) for p in hostside_files()],
                                            "tb_digest": digest,
                                            "tb_emulation": override or "auto",
                                            "tb_prepare_args": routes + image_args}, progress)
        facts: dict[str, dict[str, Any]] = {}
        for h in hosts:
            probe = res.reports.get(h, {}).get("report prepare", {}).get("json")
            if not isinstance(probe, dict):
                raise ProviderError("prepare reported no host facts", host=h)
            facts[h] = probe
        runtimes, runtime_why = choose_runtimes(wanted, facts)
        return Prepared(facts, runtimes, runtime_why, ref, context)

    def check_hosts(self, plan: Plan, progress: Progress) -> list[dict[str, Any]]:
        """``testbed hosts``: prepare every host of the plan (what ``up`` does first) and say, per
        host, what it has and what a run would use there. Starts nothing."""
        hosts = plan_hosts(plan)
        override = _emulation_override()
        _register([host_record(hp) for hp in hosts.values()])
        bundle, digest = build_bundle(cache_dir())
        prep = self._prepare(plan, "hosts-check", override, bundle, digest, progress)
        node_hosts = {n: p.host for n, p in plan.nodes.items()}
        emulation, reason = choose_emulation(plan, node_hosts, prep.facts, {h: hp.become for h, hp in hosts.items()},
                                             override)
        by_host = nodes_by_host(plan)
        out = []
        for h, hp in hosts.items():
            f = prep.facts[h]
            d = f.get("docker") or {}
            out.append({
                "host": h, "address": hp.address, "user": hp.user, "nodes": len(by_host.get(h, [])),
                "python": f.get("python"), "kernel": f.get("kernel"), "uid": f.get("uid"), "become": hp.become,
                "docker": d.get("version") and (d["version"] + (" (sudo)" if (d.get("cmd") or [""])[0] == "sudo"
                                                               else "")),
                "docker_error": d.get("error"), "image": bool(d.get("image")), "image_ref": prep.ref,
                "tc": bool(f.get("tc")), "sch_netem": bool(f.get("sch_netem")),
                "runtime": prep.runtimes[h], "runtime_reason": prep.runtime_why[h],
                "emulation": emulation, "emulation_reason": reason,
            })
        return out

    # -- up ----------------------------------------------------------------------------
    def up(self, plan: Plan, run: RunDir, progress: Progress) -> Deployment:
        hosts = plan_hosts(plan)
        override = _emulation_override()
        records = [host_record(hp) for hp in hosts.values()]
        by_host = nodes_by_host(plan)
        state: dict[str, Any] = {"provider": self.name, "hosts": records, "roots": {}, "pids": {},
                                 "node_hosts": {n: p.host for n, p in plan.nodes.items()}, "timings": {}}
        run.save_state(state)
        _register(records)
        ssh_args = self._ssh_args()
        tmp = scratch.make("tb-ansible-up")
        try:
            # 1. prepare: the root, the virtualenv, facts and free ports
            t = time.monotonic()
            bundle, digest = build_bundle(cache_dir())
            state["digest"] = digest
            run.save_state(state)
            prep = self._prepare(plan, run.run_id, override, bundle, digest, progress)
            facts, runtimes, runtime_why, ref, digest_full = (prep.facts, prep.runtimes, prep.runtime_why,
                                                              prep.ref, prep.context)
            state["timings"]["prepare_s"] = time.monotonic() - t
            state["roots"] = {h: facts[h]["root"] for h in hosts}
            state["runtimes"] = runtimes
            run.save_state(state)
            check_capacity(plan, runtimes, facts)
            for h in hosts:
                progress(f"{h}: nodes run as {'containers' if runtimes[h] == 'docker' else 'processes'} "
                         f"({runtime_why[h]})")
            hostvars = {h: {"tb_root": state["roots"][h]} for h in hosts}

            # 2. configs: addresses from the plan's hosts, ports the hosts found free
            lay = layout(plan, {h: facts[h]["ports"] for h in hosts})
            for ep in lay.endpoints.values():  # control: the host's loopback, through its SSH connection
                ep.control = (LOOPBACK, ep.control[1])
                ep.tunnel = ssh_tunnel(hosts[ep.host])
            node_hosts = {n: p.host for n, p in plan.nodes.items()}
            emulation, reason = choose_emulation(plan, node_hosts, facts, {h: hp.become for h, hp in hosts.items()},
                                                 override)
            progress(f"link emulation {emulation}: {reason}")
            peers = lay.peers()
            from testbed.providers.control import run_secret, write_private_json

            secret = run_secret(run, create=True)
            per_host: dict[str, dict[str, bytes]] = {h: {} for h in hosts}
            for n, ep in lay.endpoints.items():
                # a container sees its run's files at CONTAINER_RUN_DIR (hostside/host.py, IN_RUN)
                rroot = (CONTAINER_RUN_DIR if runtimes[ep.host] == "docker"
                         else f"{state['roots'][ep.host]}/runs/{run.run_id}")
                cfg = render_node_config(
                    plan, run.run_id, n, listen=("0.0.0.0", ep.data[1]), control=(LOOPBACK, ep.control[1]),
                    peers=peers, emulation=emulation, log_path=f"{rroot}/logs/{n}.jsonl",
                    state_dir=f"{rroot}/state/{n}", secret=secret,
                )
                write_private_json(run.configs_dir / f"{n}.json", cfg)
                per_host[ep.host][f"{n}.json"] = json.dumps(cfg, indent=1).encode()
            (tmp / "configs").mkdir()
            for h, files in per_host.items():
                tar_files(tmp / "configs" / f"{h}.tar", files)
            limit_files: dict[str, str] = {}  # host -> its nodes' limits, for `tbhost.py start --limits`
            for h in hosts:
                on = set(by_host.get(h, []))
                if on and limited(plan, on):
                    f = tmp / "configs" / f"{h}.limits.json"
                    f.write_text(json.dumps({"host": h, "spec": spec(plan, on)}))
                    limit_files[h] = str(f)
            netem = {h: bool(facts[h].get("sch_netem")) for h in hosts}
            extra = {"hosts": facts, "sch_netem": netem, "emulation_reason": reason, "runtimes": runtimes,
                     "runtime_reasons": runtime_why}
            deployment = Deployment(run.run_id, self.name, emulation, lay.endpoints, extra)
            run.update_manifest(hosts_sch_netem=netem, emulation=emulation, emulation_reason=reason,
                                hosts_runtime=runtimes, hosts_runtime_reason=runtime_why, hosts_facts={
                h: {**{k: f.get(k) for k in ("hostname", "kernel", "python", "uid", "msgpack", "tc", "docker_engine")},
                    "docker_version": (f.get("docker") or {}).get("version")}
                for h, f in facts.items()})
            run.write("deployment.json", deployment.to_dict())

            # 3. kernel link emulation (tc on each host's egress, per destination host), before any node
            if emulation == "kernel":
                t = time.monotonic()
                tc = tc_vars(plan, node_hosts, {h: hp.address for h, hp in hosts.items()},
                             {h: facts[h].get("routes") or {} for h in hosts})
                state["tc_devices"] = devices_used(tc)
                run.save_state(state)
                _register(records, state["tc_devices"])  # before applying: wipe can undo a killed run
                inv = render_inventory(plan, run.run_id, ssh_args, {h: {**hostvars[h], **tc[h]} for h in hosts})
                run_playbook("links", inv, {}, progress)
                deployment.extra["tc_commands"] = {h: v["tb_tc_add"] for h, v in tc.items()}
                state["timings"]["links_s"] = time.monotonic() - t
                run.write("deployment.json", deployment.to_dict())

            # 4. deploy the node bundle (once per code version) and, to container hosts that lack
            #    it, the node image (docker save/copy/load, or a build context to docker build)
            t = time.monotonic()
            need = sorted(h for h in hosts if runtimes[h] == "docker" and not facts[h]["docker"].get("image"))
            image_vars: dict[str, Any] = {"tb_image_file": "", "tb_image_ref": ref or "", "tb_image_base": ""}
            image_info: dict[str, Any] = {}
            if ref and any(r == "docker" for r in runtimes.values()):
                image_info = {"ref": ref, "context": digest_full,
                              "present": sorted(h for h in hosts if runtimes[h] == "docker" and h not in need)}
            if need:
                mode, why = choose_mode(os.environ.get(IMAGE_MODE_ENV) or None)
                progress(f"node image {ref} to {', '.join(need)}: {mode} ({why})")
                if mode == "save":
                    image_vars["tb_image_file"] = str(saved_image(cache_dir(), ref, progress))
                else:
                    image_vars["tb_image_file"] = str(build_context(cache_dir(), ref))
                    image_vars["tb_image_base"] = build_base()
                image_info.update(mode=mode, reason=why, shipped=need, base=image_vars["tb_image_base"] or None)
            inv = render_inventory(plan, run.run_id, ssh_args, {h: {
                **hostvars[h], "tb_image_action": (image_info.get("mode", "none") if h in need else "none")}
                for h in hosts})
            run_playbook("deploy", inv, {"tb_bundle": str(bundle), "tb_digest": digest, **image_vars}, progress)
            state["timings"]["deploy_s"] = time.monotonic() - t
            if image_info:
                run.update_manifest(node_image=image_info)
                deployment.extra["node_image"] = image_info

            # 5. start one process per node
            t = time.monotonic()
            inv = render_inventory(plan, run.run_id, ssh_args, {h: {
                **hostvars[h], "tb_image_args": ["--image", ref] if runtimes[h] == "docker" else [],
                **({"tb_limits": limit_files[h]} if h in limit_files else {})} for h in hosts})
            res = run_playbook("start", inv, {"tb_configs": str(tmp / "configs"), "tb_digest": digest}, progress)
            for h in hosts:
                pids = res.reports.get(h, {}).get("report start", {}).get("json") or {}
                for n in by_host[h]:
                    if n not in pids:
                        raise ProviderError("start reported no pid", host=h, node=n)
                    state["pids"][n] = int(pids[n])
                    deployment.endpoints[n].handle = str(pids[n])
            state["timings"]["start_s"] = time.monotonic() - t
            run.save_state(state)
            run.write("deployment.json", deployment.to_dict())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

        # 6. every node answers; the agents are open before any schedule starts
        t = time.monotonic()
        from testbed.providers.control import Controls

        self.warm_up(run)
        controls = Controls(deployment, secret=run_secret(run))
        try:
            controls.wait_ready(list(plan.nodes), START_TIMEOUT_S, alive=self._dead_check(run, state))
        finally:
            controls.close()
        state["timings"]["ready_s"] = time.monotonic() - t
        run.save_state(state)
        deployment.extra["timings"] = state["timings"]
        run.write("deployment.json", deployment.to_dict())
        progress(f"{len(plan.nodes)} nodes on {len(hosts)} hosts answer on their control channels")
        return deployment

    # -- process faults ------------------------------------------------------------------
    def warm_up(self, run: RunDir) -> None:
        """Open the SSH agent session of every host of the run (before the schedule starts)."""
        state = run.state
        for rec in state.get("hosts", []):
            self._agent(run, rec["name"], state)

    def _agent(self, run: RunDir, host: str, state: dict[str, Any] | None = None, channels: int = 4):
        """The host's open agent (opened now if needed: ``channels`` sessions; 4 for faults, which
        the schedule runs concurrently; a one-off query needs 1)."""
        key = (run.run_id, host)
        with self._agent_lock:
            a = self._agents.get(key)
            if a is not None:
                return a
            from testbed.providers.ansible.agent import HostAgent

            state = state or run.state
            rec = next((h for h in state.get("hosts", []) if h["name"] == host), None)
            root = state.get("roots", {}).get(host)
            if rec is None or root is None or not state.get("digest"):
                raise ProviderError("not deployed by this run", host=host)
            code = f"{root}/code/{state['digest']}"
            argv = [f"{root}/venv/bin/python", f"{code}/tbhost.py", "--root", root, "--code", code,
                    "agent", run.run_id]
            a = HostAgent(host, rec, known_hosts_files(), argv, channels=channels)
            self._agents[key] = a
            return a

    def _dead_check(self, run: RunDir, state: dict[str, Any]):
        """``alive(node) -> reason | None`` for wait_ready: asks each host's agent at most every 0.5 s."""
        cache: dict[str, tuple[float, dict[str, Any]]] = {}

        def dead(node: str) -> str | None:
            host = state["node_hosts"][node]
            at, nodes = cache.get(host, (0.0, {}))
            if time.monotonic() - at > 0.5:
                nodes = self._agent(run, host, state).call("status").get("nodes", {})
                cache[host] = (time.monotonic(), nodes)
            info = nodes.get(node)
            if info is None or info.get("state") is not None:
                return None
            tail = self._agent(run, host, state).call("tail", node=node).get("lines") or []
            return (tail[-1] if tail else "no output") + f" (stderr on {host}: ~/.testbed/runs/{run.run_id}/logs)"

        return dead

    def close_agents(self, run_id: str | None = None) -> None:
        with self._agent_lock:
            for key in list(self._agents):
                if run_id is None or key[0] == run_id:
                    self._agents.pop(key).close()

    def process_action(self, run: RunDir, action: Action) -> None:
        node = action.target[0]
        state = run.state
        host = state.get("node_hosts", {}).get(node)
        if host is None:
            raise ProviderError(f"{action.op}: no such node in this run", node=node)
        agent = self._agent(run, host, state)
        if action.op == "restart":
            reply = agent.call("spawn", node=node)
        elif action.op in SIGNAL_OF:
            reply = agent.call("signal", node=node, sig=SIGNAL_OF[action.op])
        elif action.op in ("throttle", "unthrottle"):  # its cgroup's quota, or docker update --cpus
            reply = agent.call("throttle", node=node, cpu=action.cpu)
        else:
            raise self.unsupported(action.op)
        if not reply.get("ok"):
            raise ProviderError(f"{action.op}: {reply.get('error')}", host=host, node=node)
        if action.op == "restart":
            def save(st: dict[str, Any]) -> None:
                st.setdefault("pids", {})[node] = reply["pid"]

            with run.locked():
                st = run.state
                save(st)
                run.save_state(st)

    # -- status / logs -------------------------------------------------------------------
    def status(self, run: RunDir) -> list[NodeStatus]:
        state = run.state
        nodes = list(run.plan().nodes)
        had = set(self._agents)
        try:
            return self._status(run, state, nodes)
        finally:
            with self._agent_lock:  # sessions opened only for this call are closed again
                for key in set(self._agents) - had:
                    self._agents.pop(key).close()

    def _status(self, run: RunDir, state: dict[str, Any], nodes: list[str]) -> list[NodeStatus]:
        by_host: dict[str, dict[str, Any]] = {}
        errors: dict[str, str] = {}
        for rec in state.get("hosts", []):
            try:
                by_host[rec["name"]] = self._agent(run, rec["name"], state, channels=1).call("status").get(
                    "nodes", {})
            except ProviderError as e:
                errors[rec["name"]] = str(e)
        out = []
        for n in nodes:
            h = state.get("node_hosts", {}).get(n)
            if h in errors:
                out.append(NodeStatus(n, "unknown", errors[h]))
                continue
            info = by_host.get(h, {}).get(n)
            if info is None:
                out.append(NodeStatus(n, "unknown", "never started"))
            else:
                where = f"{h} container {info['container']}" if info.get("container") else h
                out.append(process_status(n, info.get("pid"), info.get("state"), where))
        return out

    def collect(self, run: RunDir, progress: Progress) -> None:
        state = run.state
        if not state.get("roots"):
            progress("nothing deployed: no logs to collect")
            return
        tmp = scratch.make("tb-ansible-collect")
        try:
            res = run_playbook("collect", self._inventory(run.run_id, state), {"tb_collect": str(tmp)}, progress)
            got = 0
            hosts_dir = run.path / "hosts"
            hosts_dir.mkdir(exist_ok=True)
            counts: dict[str, dict[str, float]] = {}
            for rec in state["hosts"]:
                h = rec["name"]
                got += _extract_logs(tmp / f"{h}.tgz", run.logs_dir)
                facts = res.reports.get(h, {}).get("report facts", {}).get("ansible_facts")
                if facts:
                    write_json_atomic(hosts_dir / f"{h}.json", facts)
                counts.update((res.reports.get(h, {}).get("report pack", {}).get("json") or {}).get("limits") or {})
            if counts:  # the kernel's counts of limited nodes; an OOM kill becomes a crash in the timeline
                record_stats(run, run.plan(), counts)
            progress(f"collected {got} log files from {len(state['hosts'])} hosts")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- down / wipe -----------------------------------------------------------------------
    def down(self, run: RunDir, progress: Progress) -> None:
        self.close_agents(run.run_id)
        state = run.state
        if not state.get("hosts"):
            progress("nothing was deployed")
            return
        if not state.get("roots"):
            progress("prepare did not finish: nothing was started")
            return
        if not state.get("removed"):
            shutdown_nodes(run)
            time.sleep(0.5)  # the nodes flush their logs and exit
            try:
                self.collect(run, progress)
            except ProviderError as e:
                progress(f"collect before down failed: {e}")
        if any(state.get("tc_devices", {}).values()) and not state.get("tc_removed"):
            tv = teardown_vars(state["tc_devices"])
            roots = state.get("roots", {})
            inv = render_inventory_hosts(state["hosts"], run.run_id, self._ssh_args(),
                                         {h["name"]: {"tb_root": roots.get(h["name"]), **tv.get(h["name"], {
                                             "tb_tc_remove": [], "tb_tc_add": []})} for h in state["hosts"]})
            run_playbook("links", inv, {}, progress)
            with run.locked():
                st = run.state
                st["tc_removed"] = True
                run.save_state(st)
            progress("tc qdiscs removed")
        res = run_playbook("teardown", self._inventory(run.run_id, state), {}, progress)
        with run.locked():
            st = run.state
            st["removed"] = True
            run.save_state(st)
        stopped = sum(len((r.get("report remove", {}).get("json") or {}).get("stopped", []))
                      for r in res.reports.values())
        progress(f"run removed from {len(state['hosts'])} hosts ({stopped} processes had to be stopped)")

    @classmethod
    def wipe(cls, progress: Progress) -> list[str]:
        p = registry_path()
        try:
            hosts = json.loads(p.read_text())
        except (OSError, ValueError):
            hosts = []
        if not hosts:
            progress("ansible: no host was ever used")
            return []
        shaped = {h["name"]: h["tc_devices"] for h in hosts if h.get("tc_devices")}
        if shaped:  # the root qdiscs of devices a run shaped (a killed run may have left them)
            tv = teardown_vars(shaped)
            inv = render_inventory_hosts(hosts, "wipe", cls._ssh_args(), {
                h["name"]: tv.get(h["name"], {"tb_tc_remove": [], "tb_tc_add": []}) for h in hosts})
            run_playbook("links", inv, {}, progress)
            progress(f"ansible: tc qdiscs removed on {', '.join(sorted(shaped))}")
        inv = render_inventory_hosts(hosts, "wipe", cls._ssh_args())
        res = run_playbook("wipe", inv, {}, progress)
        removed = []
        for h in hosts:
            r = (res.reports.get(h["name"], {}).get("report wipe", {}).get("json")) or {}
            removed.append(f"host {h['name']} ({h['address']}): {len(r.get('stopped', []))} processes, "
                           f"{r.get('removed', 'nothing')}")
        p.unlink(missing_ok=True)
        progress(f"ansible: wiped {len(hosts)} hosts")
        return removed


def _extract_logs(tgz: Path, dest: Path) -> int:
    """Unpack ``logs/<file>`` members (regular files, plain names only) into ``dest``."""
    if not tgz.exists():
        return 0
    n = 0
    with tarfile.open(tgz) as tf:
        for m in tf.getmembers():
            parts = m.name.split("/")
            if not m.isfile() or len(parts) != 2 or parts[0] != "logs" or parts[1] in ("", ".", ".."):
                continue
            f = tf.extractfile(m)
            if f is None:
                continue
            tmp = dest / f".{parts[1]}.part"
            tmp.write_bytes(f.read())
            os.replace(tmp, dest / parts[1])
            n += 1
    return n
