"""Provider ``docker``: one container per plan process on one Docker engine.

* One user-defined bridge network per run (``tb-<run id>``); every node is reachable
  by its network alias ``<node>`` on port 7000 (data) and 7001 (control).
* Containers ``tb-<run id>-<node>`` from the node image, ``cap_add=[NET_ADMIN]`` only
  (never privileged), never as root (:func:`container_user`): as the controller's uid:gid when
  the controller is not root (files in the run directory stay the user's), else as the image's
  unprivileged user (``NODE_UID``, 10001), to which ``up`` gives the node's bind mounts (its
  config, its state directory, the logs directory; the run directory itself stays root's,
  0700). ``tc`` runs through ``docker exec --user 0``: CAP_NET_ADMIN is in the container's
  bounding set, effective for root only, so the node process itself cannot use it.
* Every container, network and volume is labeled ``testbed.run=<run id>`` and
  ``testbed.managed=1``: ``down`` finds a run's resources by label, ``wipe`` finds
  everything testbed ever made, whatever ``state.json`` says.
* Local engine: the run directory is bind-mounted -- ``<run>/logs`` at ``/run/logs``,
  ``<run>/state/<node>`` at ``/run/state/<node>``, ``<run>/configs/<node>.json`` read-only
  at ``/config/node.json`` -- so logs are in place (and survive a killed container) and
  ``collect`` has nothing to do. The controller reaches the control port at the
  container's address on the bridge.
* Remote engine (``docker: ssh://user@host`` on the plan host): the config is copied
  into the container before it starts (owned by the image's user, 0400), logs are fetched by
  ``collect`` from the containers. No port is published on the engine host: the controller
  reaches each control port at the container's address through a ``direct-tcpip`` channel of
  its SSH connection to the engine host (:mod:`testbed.providers.tunnel`; the endpoint's
  ``tunnel``), so only the engine host and the run's own containers can connect to it.
* Link emulation: ``kernel`` when the engine's kernel has sch_netem (tc commands from
  :mod:`testbed.links.netem` run inside each container with ``docker exec``), else
  ``userspace`` (the node runtime emulates links itself).
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from testbed.errors import ProviderError
from testbed.providers.control import shutdown_nodes
from testbed.providers.base import NodeStatus, Progress, Provider
from testbed.providers.capacity import refuse_joint_limits
from testbed.render.node_config import render_node_config
from testbed.runs.deployment import Deployment, Endpoint
from testbed.runs.oom import record_stats
from testbed.runs.rundir import RunDir
from testbed.topology.plan import Action, Plan

DATA_PORT = 7000
CONTROL_PORT = 7001
LABEL_RUN = "testbed.run"
LABEL_MANAGED = "testbed.managed"
LABEL_NODE = "testbed.node"
START_TIMEOUT_S = 90.0
WORKERS = 16
EMULATION_ENV = "TESTBED_EMULATION"  # force "userspace" or "kernel"
IN_LOGS = "/run/logs"
IN_STATE = "/run/state"
IN_CONFIG = "/config/node.json"

_NAME_BAD = re.compile(r"[^a-zA-Z0-9_.-]")


def container_name(run_id: str, node: str) -> str:
    return _NAME_BAD.sub("_", f"tb-{run_id}-{node}")


def network_name(run_id: str) -> str:
    return _NAME_BAD.sub("_", f"tb-{run_id}")


def run_labels(run_id: str, **extra: str) -> dict[str, str]:
    return {LABEL_RUN: run_id, LABEL_MANAGED: "1", **extra}


def engine_url(plan: Plan) -> str | None:
    """The one engine a plan runs on: None = local; a host's ``docker:``; else ssh to its address."""
    urls: dict[str | None, list[str]] = {}
    used = {n.host for n in plan.nodes.values()}
    for h in sorted(used):
        hp = plan.hosts.get(h)
        url = None
        if hp is not None:
            if hp.docker:
                url = hp.docker
            elif hp.address and hp.address not in ("localhost", "127.0.0.1", "::1"):
                user = f"{hp.user}@" if hp.user else ""
                port = f":{hp.port}" if hp.port and hp.port != 22 else ""
                url = f"ssh://{user}{hp.address}{port}"
        urls.setdefault(url, []).append(h)
    if len(urls) > 1:
        desc = "; ".join(f"{u or 'local engine'}: {', '.join(hs)}" for u, hs in urls.items())
        raise ProviderError(f"the docker provider runs a plan on one engine, this plan spans {len(urls)} "
                            f"({desc}); use --provider ansible for many hosts")
    return next(iter(urls)) if urls else None


def _key_for(plan: Plan, url: str | None) -> tuple[str | None, str | None]:
    for hp in plan.hosts.values():
        if url and (hp.docker == url or (hp.address and hp.address in url)):
            return hp.key, hp.name
    return None, None


def ssh_tunnel(url: str | None, key: str | None) -> dict[str, Any] | None:
    """The SSH target through which the controller reaches control ports on an ``ssh://`` engine
    (:mod:`testbed.providers.tunnel`), or None (this machine's engine: the container's address)."""
    if not url or not url.startswith("ssh://"):
        return None
    from testbed.providers.engine import parse_ssh_url

    t = parse_ssh_url(url)
    return {"kind": "docker", "address": t.hostname, "port": t.port or 22, "user": t.username, "key": key}


def container_user(remote: bool, uid: int | None = None, gid: int | None = None) -> str:
    """The ``uid:gid`` a node container runs as: never root. The controller's own when it is not
    root and the engine is this machine's (the bind-mounted files stay the user's); else the
    image's unprivileged user (a remote engine's containers have no bind mounts; a root
    controller gives that user the node's bind mounts, :func:`give_to_node_user`)."""
    from testbed.providers.image import NODE_USER

    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    return NODE_USER if remote or uid == 0 else f"{uid}:{gid}"


def give_to_node_user(*paths) -> None:
    """chown the node's bind mounts to the image's user (a root controller's run on the local
    engine): the node writes its log and state and reads its config (0600) as that user."""
    from testbed.providers.image import NODE_GID, NODE_UID

    for p in paths:
        os.chown(p, NODE_UID, NODE_GID, follow_symlinks=False)


def _tar_one(name: str, data: bytes) -> bytes:
    from testbed.providers.image import NODE_GID, NODE_UID

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o400  # the node config holds the run secret: the node's user's alone
        info.uid, info.gid = NODE_UID, NODE_GID
        info.mtime = int(time.time())
        tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _untar_one(chunks) -> bytes:
    buf = io.BytesIO(b"".join(chunks))
    with tarfile.open(fileobj=buf) as tf:
        for m in tf.getmembers():
            if m.isfile():
                f = tf.extractfile(m)
                return f.read() if f else b""
    return b""


class DockerProvider(Provider):
    name = "docker"

    def __init__(self, image: str | None = None, *, emulation: str | None = None,
                 remote_mode: bool | None = None, client_factory: Callable[..., Any] | None = None,
                 start_timeout: float = START_TIMEOUT_S):
        """``emulation`` forces userspace/kernel; ``remote_mode`` forces the remote-engine paths
        (config copied in, published control port, logs collected) even on the local engine."""
        from testbed.providers.image import DEFAULT_TAG

        self.image = image or os.environ.get("TESTBED_NODE_IMAGE") or DEFAULT_TAG
        self.emulation_override = emulation or os.environ.get(EMULATION_ENV) or None
        if self.emulation_override not in (None, "userspace", "kernel"):
            raise ProviderError(f"{EMULATION_ENV}={self.emulation_override!r}: choose userspace or kernel")
        self.remote_mode = remote_mode
        self.client_factory = client_factory
        self.start_timeout = start_timeout
        self._clients: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    # -- engine --------------------------------------------------------------------
    def _client(self, url: str | None, key: str | None = None, host: str | None = None):
        with self._lock:
            c = self._clients.get(url)
            if c is None:
                if self.client_factory is not None:
                    c = self.client_factory(url)
                else:
                    from testbed.providers.engine import connect

                    c = connect(url, key_filename=key, host=host)
                self._clients[url] = c
            return c

    def _run_client(self, run: RunDir):
        st = run.state
        return self._client(st.get("engine"), st.get("engine_key"), st.get("engine_host"))

    def _is_remote(self, url: str | None) -> bool:
        return bool(url) if self.remote_mode is None else self.remote_mode

    def _emulation(self, client: Any, url: str | None) -> str:
        if self.emulation_override:
            return self.emulation_override
        if not url:
            from testbed.links.detect import kernel_has_netem

            return "kernel" if kernel_has_netem() else "userspace"
        return "kernel" if engine_has_netem(client, self.image) else "userspace"

    # -- up ----------------------------------------------------------------------------
    def up(self, plan: Plan, run: RunDir, progress: Progress) -> Deployment:
        from testbed.providers.image import ensure_image

        url = engine_url(plan)
        if url and url.startswith(("tcp://", "http://", "https://")):
            raise ProviderError(f"docker engine {url}: a remote engine is reached with ssh://user@host (the "
                                "controller reaches the nodes' control ports through that SSH connection)")
        key, host = _key_for(plan, url)
        client = self._client(url, key, host)
        remote = self._is_remote(url)
        names = list(plan.nodes)
        check_capacity(plan)
        netname = network_name(run.run_id)
        state: dict[str, Any] = {
            "provider": self.name, "run_id": run.run_id, "engine": url, "engine_key": key,
            "engine_host": host, "remote": remote, "image": self.image, "network": netname,
            "network_id": None, "containers": {},
        }
        run.save_state(state)  # before any side effect
        ensure_image(client, self.image, progress)
        emulation = self._emulation(client, url)
        progress(f"docker engine {url or 'local'}: link emulation {emulation}")

        net = create_network(client, netname, run_labels(run.run_id))
        state["network_id"] = net.id
        run.save_state(state)
        # Fixed addresses: peers are known before anything starts, and a restarted container
        # keeps its address (docker would otherwise hand it whatever is free).
        addresses = assign_addresses(client.api.inspect_network(net.id), names)
        state["addresses"] = addresses
        run.save_state(state)

        from testbed.providers.control import run_secret, write_private_json

        secret = run_secret(run, create=True)
        as_node_user = not remote and container_user(remote) != f"{os.getuid()}:{os.getgid()}"
        if as_node_user:
            give_to_node_user(run.logs_dir)
        for n in names:
            run.node_state_dir(n).mkdir(parents=True, exist_ok=True)
            cfg = render_node_config(
                plan, run.run_id, n, listen=("0.0.0.0", DATA_PORT), control=("0.0.0.0", CONTROL_PORT),
                peers={m: (addresses[m], DATA_PORT) for m in names}, emulation=emulation,
                log_path=f"{IN_LOGS}/{n}.jsonl", state_dir=f"{IN_STATE}/{n}", secret=secret,
            )
            write_private_json(run.configs_dir / f"{n}.json", cfg)
            if as_node_user:
                give_to_node_user(run.node_state_dir(n), run.configs_dir / f"{n}.json")

        progress(f"creating and starting {len(names)} containers")
        ids: dict[str, str] = {}
        errors: dict[str, str] = {}
        ids_lock = threading.Lock()

        def create_start(n: str) -> None:
            try:
                cid = self._create(client, run, plan, n, netname, remote, addresses[n])
                with ids_lock:
                    ids[n] = cid
                client.api.start(cid)
            except Exception as e:  # reported together below
                with ids_lock:
                    errors[n] = _err(e)

        with ThreadPoolExecutor(max_workers=min(WORKERS, max(1, len(names)))) as pool:
            list(pool.map(create_start, names))
        state["containers"] = {n: {"id": ids[n], "name": container_name(run.run_id, n)} for n in ids}
        run.save_state(state)  # container ids recorded before waiting for them
        if errors:
            n, e = sorted(errors.items())[0]
            raise ProviderError(f"could not start container ({len(errors)} failed): {e}", node=n)

        endpoints = self._endpoints(client, run, plan, ids, netname, remote, url)
        deployment = Deployment(run.run_id, self.name, emulation, endpoints,
                                extra={"engine": url or "local", "image": self.image, "network": netname})
        run.write("deployment.json", deployment.to_dict())
        if emulation == "kernel":
            progress("applying tc netem inside the containers")
            self._apply_kernel_links(client, run, plan, ids, endpoints, names)

        from testbed.providers.control import Controls

        snapshot: dict[str, Any] = {"t": 0.0, "states": {}}

        def dead(node: str) -> str | None:
            if time.monotonic() - snapshot["t"] > 1.0:
                snapshot["states"] = self._container_states(client, run.run_id)
                snapshot["t"] = time.monotonic()
            st = snapshot["states"].get(node)
            if st and st["state"] in ("exited", "dead"):
                return f"container exited with code {st['exit_code']}: {self._log_tail(client, st['id'])}"
            return None

        controls = Controls(deployment, secret=secret)
        try:
            controls.wait_ready(names, self.start_timeout, alive=dead)
        finally:
            controls.close()
        progress(f"{len(names)} containers answer on their control channels")
        return deployment

    def _create(self, client: Any, run: RunDir, plan: Plan, n: str, netname: str, remote: bool,
                address: str) -> str:
        api = client.api
        binds: dict[str, dict[str, str]] = {}
        if not remote:
            binds = {
                str(run.logs_dir): {"bind": IN_LOGS, "mode": "rw"},
                str(run.node_state_dir(n)): {"bind": f"{IN_STATE}/{n}", "mode": "rw"},
                str(run.configs_dir / f"{n}.json"): {"bind": IN_CONFIG, "mode": "ro"},
            }
        # nothing is published, on any engine: the controller reaches the control port at the
        # container's address (through the engine's SSH connection on a remote engine)
        node = plan.nodes[n]
        limits: dict[str, Any] = {}
        if node.cpu is not None:  # docs/topology.md, Capacity: the container's NanoCpus
            limits["nano_cpus"] = int(round(node.cpu * 1e9))
        if node.memory_bytes is not None:  # Memory, and MemorySwap equal to it: no swap
            limits["mem_limit"] = node.memory_bytes
            limits["memswap_limit"] = node.memory_bytes
        host_config = api.create_host_config(
            binds=binds or None, cap_add=["NET_ADMIN"], network_mode=netname, **limits,
        )
        netcfg = api.create_networking_config({netname: api.create_endpoint_config(aliases=[n], ipv4_address=address)})
        user = container_user(remote)
        c = api.create_container(
            self.image, command=[IN_CONFIG], name=container_name(run.run_id, n), user=user,
            labels=run_labels(run.run_id, **{LABEL_NODE: n}), host_config=host_config,
            networking_config=netcfg, hostname=_NAME_BAD.sub("-", n)[:63] or "node",
        )
        cid = c["Id"]
        if remote:
            data = (run.configs_dir / f"{n}.json").read_bytes()
            api.put_archive(cid, "/", _tar_one(IN_CONFIG.lstrip("/"), data))
        return cid

    def _endpoints(self, client: Any, run: RunDir, plan: Plan, ids: dict[str, str], netname: str,
                   remote: bool, url: str | None) -> dict[str, Endpoint]:
        tunnel = ssh_tunnel(url, run.state.get("engine_key"))

        def one(n: str) -> Endpoint:
            attrs = client.api.inspect_container(ids[n])
            ip = attrs["NetworkSettings"]["Networks"][netname]["IPAddress"]
            return Endpoint(n, plan.nodes[n].host, (ip, DATA_PORT), (ip, CONTROL_PORT), ids[n], tunnel)

        with ThreadPoolExecutor(max_workers=min(WORKERS, max(1, len(ids)))) as pool:
            return dict(zip(ids, pool.map(one, list(ids))))

    # -- kernel link emulation -------------------------------------------------------
    def _apply_kernel_links(self, client: Any, run: RunDir, plan: Plan, ids: dict[str, str],
                            endpoints: dict[str, Endpoint], nodes: list[str]) -> None:
        from testbed.links.netem import by_address, egress_commands

        addresses = {m: ep.data[0] for m, ep in endpoints.items()}

        def one(n: str) -> None:
            cmds = egress_commands(by_address(plan.egress(n), addresses), device="eth0")
            for c in cmds.remove:
                self._exec(client, ids[n], list(c), check=False)
            for c in cmds.add:
                self._exec(client, ids[n], list(c), check=True, node=n)

        with ThreadPoolExecutor(max_workers=min(WORKERS, max(1, len(nodes)))) as pool:
            list(pool.map(one, nodes))

    @staticmethod
    def _exec(client: Any, cid: str, cmd: list[str], *, check: bool, node: str | None = None) -> int:
        ex = client.api.exec_create(cid, cmd, user="0", stdout=True, stderr=True)
        out = client.api.exec_start(ex["Id"])
        rc = client.api.exec_inspect(ex["Id"]).get("ExitCode")
        if check and rc != 0:
            text = out.decode(errors="replace").strip() if isinstance(out, bytes) else str(out)
            raise ProviderError(f"{' '.join(cmd)}: exit {rc}: {text}", node=node)
        return rc or 0

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def _container_states(client: Any, run_id: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for c in client.api.containers(all=True, filters={"label": f"{LABEL_RUN}={run_id}"}):
            node = (c.get("Labels") or {}).get(LABEL_NODE)
            if node:
                out[node] = {"id": c["Id"], "state": c.get("State", "unknown"), "status": c.get("Status", "")}
        for node, st in out.items():
            if st["state"] in ("exited", "dead"):
                st["exit_code"] = client.api.inspect_container(st["id"])["State"].get("ExitCode")
        return out

    @staticmethod
    def _log_tail(client: Any, cid: str) -> str:
        try:
            lines = [x for x in client.api.logs(cid, tail=5).decode(errors="replace").splitlines() if x.strip()]
            return lines[-1] if lines else "no output"
        except Exception as e:
            return _err(e)

    def _container_id(self, run: RunDir, node: str) -> str:
        c = run.state.get("containers", {}).get(node)
        if c:
            return c["id"]
        raise ProviderError("no container recorded for this node", node=node)

    # -- process faults ----------------------------------------------------------------
    def process_action(self, run: RunDir, action: Action) -> None:
        import docker.errors

        node = action.target[0]
        client = self._run_client(run)
        cid = self._container_id(run, node)
        try:
            if action.op == "crash":
                client.api.kill(cid, signal="SIGKILL")
            elif action.op == "restart":
                st = client.api.inspect_container(cid)["State"]
                if st.get("Running"):
                    raise ProviderError("restart: the node is still running", node=node)
                client.api.start(cid)
                self._after_restart(client, run, node, cid)
            elif action.op == "pause":
                client.api.pause(cid)
            elif action.op == "resume":
                client.api.unpause(cid)
            elif action.op in ("throttle", "unthrottle"):
                set_nano_cpus(client, cid, action.cpu)
            else:
                raise self.unsupported(action.op)
        except docker.errors.APIError as e:
            raise ProviderError(f"{action.op}: {e.explanation or e}", node=node) from None

    def _after_restart(self, client: Any, run: RunDir, node: str, cid: str) -> None:
        """A restarted container may get a new address and always gets a fresh network namespace."""
        with run.locked():  # deployment.json read-modify-write; other nodes' faults run concurrently
            self._after_restart_locked(client, run, node, cid)

    def _after_restart_locked(self, client: Any, run: RunDir, node: str, cid: str) -> None:
        try:
            dep = run.deployment()
        except Exception:
            return
        st = run.state
        attrs = client.api.inspect_container(cid)
        ip = attrs["NetworkSettings"]["Networks"][st["network"]]["IPAddress"]
        ep = dep.endpoints[node]
        changed = ep.data[0] != ip
        if changed:
            ep.data = (ip, DATA_PORT)
            ep.control = (ip, CONTROL_PORT)
            run.write("deployment.json", dep.to_dict())
        if dep.emulation == "kernel":
            ids = {n: c["id"] for n, c in st.get("containers", {}).items()}
            plan = run.plan()
            # the node's own egress always; everyone's filters when its address moved
            targets = list(ids) if changed else [node]
            running = self._container_states(client, run.run_id)
            targets = [n for n in targets if running.get(n, {}).get("state") == "running"]
            self._apply_kernel_links(client, run, plan, ids, dep.endpoints, targets)

    # -- status / logs ---------------------------------------------------------------
    def status(self, run: RunDir) -> list[NodeStatus]:
        client = self._run_client(run)
        states = self._container_states(client, run.run_id)
        out = []
        for node in run.plan().nodes:
            st = states.get(node)
            if st is None:
                out.append(NodeStatus(node, "unknown", "no container"))
                continue
            s = st["state"]
            detail = f"container {st['id'][:12]} {st['status']}"
            if s == "running":
                out.append(NodeStatus(node, "running", detail))
            elif s == "paused":
                out.append(NodeStatus(node, "paused", detail))
            elif s in ("exited", "dead"):
                code = st.get("exit_code")
                out.append(NodeStatus(node, "stopped" if code == 0 else "crashed", detail))
            elif s == "created":
                out.append(NodeStatus(node, "stopped", detail))
            else:
                out.append(NodeStatus(node, "unknown", detail))
        return out

    def collect(self, run: RunDir, progress: Progress) -> None:
        st = run.state
        if not st.get("remote"):
            progress("logs are written in the run directory already")
            return
        import docker.errors

        client = self._run_client(run)
        got = 0
        for node, c in st.get("containers", {}).items():
            try:
                chunks, _ = client.api.get_archive(c["id"], f"{IN_LOGS}/{node}.jsonl")
                (run.logs_dir / f"{node}.jsonl").write_bytes(_untar_one(chunks))
                got += 1
            except docker.errors.NotFound:
                progress(f"{node}: no log in its container")
        progress(f"collected {got} logs from the engine")

    # -- down / wipe ---------------------------------------------------------------------
    def down(self, run: RunDir, progress: Progress) -> None:
        st = run.state
        if not st:
            progress("no docker state for this run")
            return
        client = self._run_client(run)
        record_oom(client, run, st)
        states = self._container_states(client, run.run_id)
        for node, s in states.items():
            if s["state"] == "paused":
                _quiet(client.api.unpause, s["id"])
        live = [n for n, s in states.items() if s["state"] in ("running", "paused")]
        if live:
            shutdown_nodes(run, live)
            self._wait_exit(client, run.run_id, 3.0)
        if st.get("remote"):
            try:
                self.collect(run, progress)
            except Exception as e:  # never block cleanup
                progress(f"collect failed: {_err(e)}")
        removed = remove_labeled(client, {LABEL_RUN: run.run_id}, settle_s=0.2)
        progress(f"removed {len(removed)} docker resources of {run.run_id}")

    @staticmethod
    def _wait_exit(client: Any, run_id: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not client.api.containers(filters={"label": f"{LABEL_RUN}={run_id}", "status": "running"}):
                return
            time.sleep(0.1)

    @classmethod
    def wipe(cls, progress: Progress) -> list[str]:
        from testbed.providers.engine import connect

        try:
            client = connect()
        except ProviderError as e:
            progress(f"docker: nothing wiped ({e})")
            return []
        removed = remove_labeled(client, {LABEL_MANAGED: "1"})
        removed += prune_node_images(client)
        progress(f"docker: removed {len(removed)} resources")
        return removed


def check_capacity(plan: Plan) -> None:
    """A limited host with more than one container is refused (each container is limited on its
    own: :func:`testbed.providers.capacity.refuse_joint_limits`)."""
    refuse_joint_limits(plan, None, "the docker provider")


def set_nano_cpus(client: Any, cid: str, cores: float | None) -> None:
    """Change a running (or stopped) container's CPU share: ``POST /containers/{id}/update``
    with NanoCpus (the SDK's update_container has no nano_cpus). No limit = the engine's CPUs
    (the API ignores 0 in an update)."""
    if cores is None:
        cores = float(client.api.info().get("NCPU") or os.cpu_count() or 1)
    api = client.api
    res = api._post_json(api._url("/containers/{0}/update", cid), data={"NanoCpus": int(round(cores * 1e9))})
    api._raise_for_status(res)


def record_oom(client: Any, run: RunDir, st: dict[str, Any]) -> None:
    """Whether the kernel's OOM killer ended each container (State.OOMKilled) into the manifest's
    ``cgroup_stats`` (``{"oom_kill": 0 or 1}``), and a kill as a crash in the timeline (``fault``
    from 2000, at its last log line; see docs/topology.md, Capacity): :func:`runs.oom.record_stats`,
    as the local and ansible providers do."""
    import docker.errors

    counts: dict[str, dict[str, float]] = {}
    for node, c in (st.get("containers") or {}).items():
        try:
            counts[node] = {"oom_kill": int(bool(client.api.inspect_container(c["id"])["State"].get("OOMKilled")))}
        except (docker.errors.APIError, KeyError):
            continue
    if not counts:
        return
    try:
        plan = run.plan()
    except Exception:  # noqa: BLE001 - no plan written: nothing to attribute
        return
    record_stats(run, plan, counts)


def prune_node_images(client: Any) -> list[str]:
    """Untagged node images (each rebuild after a code change leaves the old one behind); the
    current ones keep their tags and stay."""
    import docker.errors

    try:
        res = client.images.prune(filters={"dangling": True, "label": "testbed.image=node"})
    except docker.errors.APIError:
        return []
    return [f"image {d['Deleted'].split(':')[-1][:12]}" for d in (res.get("ImagesDeleted") or [])
            if d.get("Deleted")]


def remove_labeled(client: Any, labels: dict[str, str], *, settle_s: float = 0.5,
                   timeout_s: float = 120.0) -> list[str]:
    """Force-remove every container, then network, then volume carrying all ``labels``.

    Repeats until a pass finds nothing and a second look ``settle_s`` later finds nothing
    either: a controller killed mid-``up`` leaves create requests in flight at the engine,
    which still completes them after the client is gone. A pass that removed nothing new (every
    container it saw already being removed by the engine, a network still holding one) waits
    ``settle_s`` before looking again: on a slow storage driver a removal takes seconds. Gives up
    only after ``timeout_s`` without an empty look, naming what is left.
    """
    removed: list[str] = []
    quiet = 0
    deadline = time.monotonic() + timeout_s
    while True:
        before = len(removed)
        found = _remove_pass(client, labels, removed)
        quiet = 0 if found else quiet + 1
        if quiet >= 2:
            return removed
        if time.monotonic() >= deadline:
            break
        if not found or len(removed) == before:
            time.sleep(settle_s)
    left = _labeled_names(client, labels)
    if left:
        raise ProviderError(f"docker resources labeled {labels} still there after {timeout_s:.0f} s "
                            f"({', '.join(left[:5])}{' ...' if len(left) > 5 else ''}); "
                            "is a controller still running?")
    return removed


def _labeled_names(client: Any, labels: dict[str, str]) -> list[str]:
    filt = {"label": [f"{k}={v}" for k, v in labels.items()]}
    conts = client.api.containers(all=True, filters=filt)
    nets = client.api.networks(filters=filt)
    vols = (client.api.volumes(filters=filt) or {}).get("Volumes") or []
    return ([f"container {(c.get('Names') or [c['Id'][:12]])[0].lstrip('/')} ({c.get('State', '?')})" for c in conts]
            + [f"network {n['Name']}" for n in nets] + [f"volume {v['Name']}" for v in vols])


def _remove_pass(client: Any, labels: dict[str, str], removed: list[str]) -> int:
    """One removal pass; returns how many labeled resources it saw."""
    import docker.errors

    filt = {"label": [f"{k}={v}" for k, v in labels.items()]}
    conts = client.api.containers(all=True, filters=filt)

    def rm(c: dict) -> str | None:
        try:
            client.api.remove_container(c["Id"], force=True, v=True)
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as e:
            if e.status_code == 409:  # removal already in progress
                return None
            raise
        return "container " + (c.get("Names") or [c["Id"][:12]])[0].lstrip("/")

    if conts:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            removed += [r for r in pool.map(rm, conts) if r]
    nets = client.api.networks(filters=filt)
    for n in nets:
        try:
            client.api.remove_network(n["Id"])
            removed.append("network " + n["Name"])
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if "active endpoints" not in str(e.explanation or e):
                raise
            # a container being created joined it after our listing: next pass
    vols = (client.api.volumes(filters=filt) or {}).get("Volumes") or []
    for v in vols:
        try:
            client.api.remove_volume(v["Name"], force=True)
            removed.append("volume " + v["Name"])
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if e.status_code != 409:  # in use by a container created after our listing
                raise
    return len(conts) + len(nets) + len(vols)


def create_network(client: Any, name: str, labels: dict[str, str], attempts: int = 5) -> Any:
    """A bridge network with an explicit subnet (docker allows fixed container addresses only then).

    The engine picks a free subnet from its own pools for a first network, which is removed and
    created again with that subnet written out; a concurrent taker makes the engine refuse
    ("overlaps"), and we try again.
    """
    import docker.errors
    from docker.types import IPAMConfig, IPAMPool

    last = ""
    for _ in range(attempts):
        probe = client.networks.create(name, driver="bridge", labels=labels, check_duplicate=True)
        cfgs = (client.api.inspect_network(probe.id).get("IPAM") or {}).get("Config") or []
        probe.remove()
        cfg = next((c for c in cfgs if c.get("Subnet") and ":" not in c["Subnet"]), None)
        if cfg is None:
            raise ProviderError(f"network {name}: the engine assigned no IPv4 subnet")
        ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=cfg["Subnet"], gateway=cfg.get("Gateway"))])
        try:
            return client.networks.create(name, driver="bridge", labels=labels, ipam=ipam,
                                          check_duplicate=True)
        except docker.errors.APIError as e:
            last = str(e.explanation or e)
            if "overlap" not in last.lower():
                raise ProviderError(f"network {name}: {last}") from None
    raise ProviderError(f"network {name}: no free subnet after {attempts} attempts ({last})")


def assign_addresses(network: dict[str, Any], names: list[str]) -> dict[str, str]:
    """One fixed IPv4 address per node from the network's subnet (skipping its gateway)."""
    import ipaddress

    cfgs = (network.get("IPAM") or {}).get("Config") or []
    cfg = next((c for c in cfgs if c.get("Subnet") and ":" not in c["Subnet"]), None)
    if cfg is None:
        raise ProviderError(f"network {network.get('Name')}: no IPv4 subnet to assign addresses from")
    subnet = ipaddress.ip_network(cfg["Subnet"])
    gateway = cfg.get("Gateway", "").split("/")[0]
    pool = (str(h) for h in subnet.hosts() if str(h) != gateway)
    out = {}
    for n in names:
        try:
            out[n] = next(pool)
        except StopIteration:
            raise ProviderError(f"network subnet {subnet} is too small for {len(names)} containers") from None
    return out


def engine_has_netem(client: Any, image: str) -> bool:
    """Probe an engine's kernel: can a throwaway NET_ADMIN container attach netem to lo?"""
    import docker.errors

    try:
        client.containers.run(image, entrypoint=["tc", "qdisc", "add", "dev", "lo", "root", "netem",
                                                 "delay", "1ms"],
                              command=[], cap_add=["NET_ADMIN"], remove=True, network_mode="none", user="0",
                              labels={LABEL_MANAGED: "1", "testbed.probe": "netem"})
        return True
    except docker.errors.ContainerError:
        return False


def _quiet(fn: Callable[..., Any], *a: Any) -> None:
    try:
        fn(*a)
    except Exception:
        pass


def _err(e: BaseException) -> str:
    expl = getattr(e, "explanation", None)
    s = str(expl or e).strip().splitlines()
    return s[0] if s else type(e).__name__
