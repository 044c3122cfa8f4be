"""The contract between the node runtime and protocol code.

A protocol node is a subclass of :class:`Node`. The runtime (``runtime/``)
owns the event loop, the transport, the userspace link emulation, the control
channel and the event log; the protocol only reacts to frames and timers and
calls ``self.rt`` to act. Stdlib only.

Node config (one JSON file per process, rendered from the Plan by
``testbed.render.node_config``; keys are fixed):

    run_id       str      the run id
    node         str      this process's name
    kind         str      "node" | "clients"
    role         str      broker | tm-server | ... ; for "clients" the group's role
    protocol     str      the protocol's name (a registered protocol, built-in or external)
    node_class   str      "module:Class" of this process's Node (optional; see resolve())
    site, cell   str      (cell may be null)
    neighbors    [str]    overlay neighbours (for kind == "node")
    listen       [host, port]   data address to bind
    control      [host, port]   control-channel address to bind
    peers        {name: [host, port]}  data address of every other process
    links        {name: LinkSpec dict} egress emulation per destination
                  (keys delay_ms, jitter_ms, distribution, loss, rate_bps, reorder, up)
    emulation    "userspace" | "kernel"  (kernel: the runtime applies no delay/jitter/
                  loss/rate itself -- tc does; up/down and stall stay in userspace)
    clients      ClientGroupPlan dict or null (name, role, count, attach, rate_per_s,
                  size_bytes, filter, extra)
    directory    {name: {"kind", "role", "site", "cell", "neighbors"}} every process
    params       {..}     protocol parameters, already validated (times in seconds)
    placement    {..}
    seed         int      per-node seed
    duration_s   float    workload length
    log_path     str      where to append the JSON-lines event log
    state_dir    str      a directory that survives restarts (stable storage, e.g. Gryphon logs)
    log_flush_ms int      flush interval (<= 100)
    secret       str      the run secret, hex (made by the controller at ``up``; the config
                          file is mode 0600; see ``runtime/auth.py``)

Wire: every frame is a msgpack map with key ``"k"`` naming the message kind.
The runtime opens one outbound TCP connection per destination; the receiver
first sends a challenge nonce, the sender's first frame is
``{"k": "hello", "from": name, "run": run_id, "nonce", "mac"}`` (an HMAC with
the run secret; consumed by the runtime; the receiving runtime checks it before
any other frame and answers ``{"k": "hello_ack", "from": name, "mac"}``, and the
peer counts as up only once the sender has checked that). Frames on one link are delivered in FIFO order unless the link
says ``reorder``.

Connection semantics: messages to a destination that was never reached yet are
queued (bounded) until the first connection; after a connection is lost,
messages are dropped (logged as ``drop`` with reason ``no-connection``) until
the reconnect succeeds, when ``on_peer_up`` is called again. A down link
(cut/partition) drops at egress (reason ``link-down``), and ``on_link_up`` is
called when it comes back with the connection still up; a stall holds all
egress until unstall (a crash while stalled loses what is held).
"""

from __future__ import annotations

import asyncio
import random
from abc import ABC, abstractmethod
from typing import Any, Callable


class Runtime(ABC):
    """What a protocol node may use. Implemented by ``runtime/node_main.py``."""

    name: str
    config: dict[str, Any]
    rng: random.Random  # seeded from config["seed"]
    loop: asyncio.AbstractEventLoop

    @abstractmethod
    def send(self, dst: str, msg: dict[str, Any], lane: str | None = None) -> None:
        """Queue ``msg`` to process ``dst`` through its egress link emulation. Never blocks.

        ``lane``: send it on a TCP connection of its own to ``dst``, one per lane name (e.g. one per
        client, as Gryphon's "dedicated TCP connection" per subscriber), opened at the first send
        or by :meth:`open_lane`. A lane shares the link's emulation and faults with the main
        connection; messages of different lanes are not ordered with each other; a lane's
        connection coming and going is not a ``peer_up``/``peer_down``. The process must be
        configured for the connections (``connections`` in its config: the protocol's
        ``connections(plan)`` hook, docs/architecture.md)."""

    def open_lane(self, dst: str, lane: str) -> None:
        """Open lane ``lane`` to ``dst`` now rather than at its first send (no-op by default)."""

    @abstractmethod
    def log(self, ev: str, **fields: Any) -> None:
        """Append one event (declared in the registry) to the node's log."""

    @abstractmethod
    def wall_ns(self) -> int:
        """Wall clock, ns since the epoch (the ``t`` field of events)."""

    @abstractmethod
    def mono_ns(self) -> int:
        """Monotonic clock, ns."""

    @abstractmethod
    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> asyncio.TimerHandle:
        """Run ``fn(*args)`` after ``delay_s``; exceptions are logged and end the node."""

    @abstractmethod
    def spawn(self, coro: Any) -> asyncio.Task:
        """Run a coroutine as a task supervised by the runtime."""

    @abstractmethod
    def flush(self) -> None:
        """Flush the event log now (e.g. before an fsync'd protocol action)."""


class Node(ABC):
    """Base class of every protocol process (brokers, servers, client hosts)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.config = rt.config
        self.name = rt.name

    async def start(self) -> None:
        """Called once the data and control listeners are up (before peers connect)."""

    @abstractmethod
    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        """A frame from process ``src`` (after ingress). Must not block."""

    def on_peer_up(self, peer: str) -> None:
        """The outbound connection to ``peer`` was established (again)."""

    def on_peer_down(self, peer: str) -> None:
        """The outbound connection to ``peer`` was lost."""

    def on_link_up(self, peer: str) -> None:
        """The link to ``peer`` came back up (a silent cut or a partition healed, a link change
        undone) while the connection stayed up: what was sent to ``peer`` while it was down was
        dropped (``drop`` reason ``link-down``). A protocol that assumes a reliable channel
        repairs its state here (over real TCP the lost frames would have been retransmitted)."""

    async def start_workload(self, t0_wall_ns: int, duration_s: float) -> None:
        """Begin the workload at wall time ``t0_wall_ns`` (clients publish, etc.)."""

    async def stop_workload(self) -> None:
        """End the workload early."""

    def on_control(self, op: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """Protocol-specific control ops; return a reply dict, or None if unknown op."""
        return None

    def status(self) -> dict[str, Any]:
        """A small dict shown by ``testbed status`` (counters, table sizes)."""
        return {}

    async def stop(self) -> None:
        """Graceful shutdown hook (the runtime flushes the log afterwards)."""


# Where the runtime finds the Node class. The controller renders it into the config as
# ``node_class`` ("module:Class", from the protocol's ``NODE_CLASSES``; see
# ``testbed.protocols``), so an external protocol's node module is imported by name and
# the runtime needs no list of protocols. Without ``node_class`` (hand-written configs,
# the runtime's own tests) the table of the package ``testbed.nodes.<protocol>`` is used:
#     NODE_CLASSES = {("node", "broker"): "myproto.nodes.broker:Broker",
#                     ("clients", "*"): "myproto.nodes.clients:ClientHost"}
# ("module:Class" strings, imported lazily so a node loads only its own protocol).
def load_class(path: str) -> type[Node]:
    """Import "module:Class" and check that it is a :class:`Node`."""
    import importlib

    mod, sep, cls = path.partition(":")
    if not sep or not mod or not cls:
        raise ValueError(f"node_class {path!r}: expected 'module:Class'")
    obj = getattr(importlib.import_module(mod), cls)
    if not (isinstance(obj, type) and issubclass(obj, Node)):
        raise TypeError(f"node_class {path!r} is not a Node subclass")
    return obj


def resolve(protocol: str, kind: str, role: str, node_class: str | None = None) -> type[Node]:
    if node_class:
        return load_class(node_class)
    import importlib

    pkg = importlib.import_module(f"testbed.protocols.{protocol}.nodes")  # a built-in's, by convention
    table: dict[tuple[str, str], str] = getattr(pkg, "NODE_CLASSES", {})
    for key in ((kind, role), (kind, "*")):
        if key in table:
            return load_class(table[key])
    raise KeyError(f"no node class for protocol={protocol} kind={kind} role={role}")
