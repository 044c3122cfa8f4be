"""The provider contract: the only place that starts, stops, pauses, kills or shapes anything.

Every backend (``local``, ``docker``, ``ansible``) is a subpackage with a
``provider.py`` defining one :class:`Provider` subclass. Link faults (cut,
heal, partition, stall, set_link) go through each node's control channel
(:mod:`testbed.providers.control`), shared by every provider; process faults
(crash, restart, pause, resume) are the provider's own.

A provider keeps everything it needs to find what it made in the run
directory's ``state.json`` (written *before* each side effect, so a killed
controller leaves nothing ``down``/``wipe`` cannot find) and labels every
resource it creates with the run id.

The deployment record (:class:`Deployment`, :class:`Endpoint`) lives in
:mod:`testbed.runs.deployment` (the run directory reads it without importing any
provider); the factory ``get_provider`` lives in :mod:`testbed.providers.registry`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from testbed.errors import UnsupportedAction
from testbed.runs.deployment import Deployment
from testbed.topology.plan import Action, Plan

if TYPE_CHECKING:
    from testbed.runs.rundir import RunDir

Progress = Callable[[str], None]  # one human-readable line per step


@dataclass
class NodeStatus:
    node: str
    state: str  # running | paused | stopped | crashed | unknown
    detail: str = ""
    info: dict[str, Any] = field(default_factory=dict)  # from the node's status op


PROCESS_OPS = ("crash", "restart", "pause", "resume", "throttle", "unthrottle")


def process_status(node: str, pid: int | None, state: str | None, where: str = "") -> NodeStatus:
    """A node process's status from its /proc state letter (None: the process is gone)."""
    detail = f"{where}: pid {pid}" if where else f"pid {pid}"
    if state in (None, "Z"):
        return NodeStatus(node, "stopped", f"{detail} gone")
    if state == "T":
        return NodeStatus(node, "paused", detail)
    return NodeStatus(node, "running", detail)


class Provider(ABC):
    """One backend. Instances are cheap; all durable state lives in the run directory."""

    name: str = "abstract"

    @abstractmethod
    def up(self, plan: Plan, run: "RunDir", progress: Progress) -> Deployment:
        """Start every node of the plan; return when all answer on their control channel."""

    @abstractmethod
    def down(self, run: "RunDir", progress: Progress) -> None:
        """Stop everything of this run. Idempotent; never fails because things are already gone."""

    @abstractmethod
    def status(self, run: "RunDir") -> list[NodeStatus]:
        """The state of every node of the run."""

    @abstractmethod
    def process_action(self, run: "RunDir", action: Action) -> None:
        """crash / restart / pause / resume one node (``action.target[0]``)."""

    @abstractmethod
    def collect(self, run: "RunDir", progress: Progress) -> None:
        """Bring every node's log into ``run.logs_dir`` (no-op where they are written there)."""

    def logs_path(self, run: "RunDir", node: str) -> str:
        """A local path where the node's current log can be read (for ``testbed logs``).

        Default: the run directory's ``logs/<node>.jsonl``, where every provider here writes
        (local, docker bind mounts) or collects (ansible) the logs."""
        return str(run.logs_dir / f"{node}.jsonl")

    def dead_reason(self, run: "RunDir", node: str) -> str | None:
        """Why the node's process is gone (its last words), or None while it runs or when the
        provider cannot tell. Used while waiting for a restarted node to answer, and by the
        schedule runner to find a node gone outside the failure schedule (``ScheduleRunner.exited``)."""
        return None

    def killed_by_limit(self, run: "RunDir", node: str) -> bool:
        """True if the node's process was ended by the plan's own resource limit (the kernel's
        OOM killer under its ``memory``): a crash the provider records in the timeline at
        ``down`` (testbed/runs/oom.py), not a node gone outside the run's model. Default: False."""
        return False

    def confirm_node(self, run: "RunDir", node: str, ping: dict) -> None:
        """Raise ProviderError unless the process that answered ``ping`` (an authenticated reply:
        it holds the run secret) is the one this provider started for ``node`` (e.g. its pid).
        Default: the authenticated reply naming the node and run is the proof."""

    def warm_up(self, run: "RunDir") -> None:
        """Open what process faults will need (e.g. SSH sessions) before the schedule starts,
        so no connection set-up sits on a fault's critical path. Default: nothing to open."""

    @classmethod
    @abstractmethod
    def wipe(cls, progress: Progress) -> list[str]:
        """Remove everything this provider ever made, for any run. Returns what was removed."""

    def unsupported(self, what: str) -> UnsupportedAction:
        return UnsupportedAction(f"provider {self.name} cannot {what}")
