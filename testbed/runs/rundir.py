"""The run directory: everything needed to re-analyse a run without the testbed that made it.

Layout (``runs/<run-id>/``)::

    manifest.json          versions, seeds, emulation mode, clock offsets, fault timeline
    plan.json              the resolved Plan
    topology.yaml          the topology file as given
    topology.rendered.yaml the file after Jinja2 rendering
    state.json             provider state (pids, container ids, ...), written before side effects
    deployment.json        endpoints of every node (data and control addresses)
    configs/<node>.json    the node configs (mode 0600: they hold the run secret)
    secret                 the run secret, hex, mode 0600 (testbed.providers.control.run_secret)
    logs/<node>.jsonl      every node's event log (collected here)
    state/<node>/          per-node stable storage (survives restarts)
    controller.log         the background controller's log (schedule runner)
    analysis/              parquet/, figures/, report.md, checks.json, metrics.json

manifest["timeline"] entries: {"fault", "op", "target", "groups", "planned_s",
"actual_s", "status" (pending|done|failed|skipped), "error", "window", "source"}
with times in seconds from the workload start ``manifest["t0_wall_ns"]``.
manifest["load_avg"]: {"cpus", "start", "end"}: the machine's 1/5/15-minute load averages when
the workload started and when it ended (``api.load_average``; cited by the reproductions'
explanations of a claim that does not hold, docs/experiments.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from testbed.errors import RunError

DEFAULT_RUNS_DIR = "runs"
ACTIVE_FILE = ".active"  # in the runs dir: run ids that are up, one per line


def runs_root(runs_dir: str | os.PathLike | None = None) -> Path:
    return Path(runs_dir or os.environ.get("TESTBED_RUNS") or DEFAULT_RUNS_DIR).resolve()


def new_run_id(name: str) -> str:
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def write_json_atomic(path: Path, data: Any, *, indent: int | None = 1) -> None:
    """``indent=None``: one line, by the C encoder (``indent`` takes json's pure-Python one:
    for a large file such as a 100-process plan.json, most of the time of writing it)."""
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    text = json.dumps(data, indent=indent, sort_keys=False, default=str)
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RunDir:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).resolve()
        self.run_id = self.path.name

    # -- layout ---------------------------------------------------------------
    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    @property
    def configs_dir(self) -> Path:
        return self.path / "configs"

    @property
    def state_root(self) -> Path:
        return self.path / "state"

    @property
    def analysis_dir(self) -> Path:
        return self.path / "analysis"

    def node_state_dir(self, node: str) -> Path:
        return self.state_root / node

    @classmethod
    def create(cls, root: Path, run_id: str) -> "RunDir":
        path = root / run_id
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=False)
        os.chmod(path, 0o700)  # whatever the umask: logs, configs and the secret are the run's alone
        rd = cls(path)
        for d in (rd.logs_dir, rd.configs_dir, rd.state_root):
            d.mkdir()
        return rd

    def exists(self) -> bool:
        return (self.path / "plan.json").exists()

    # -- json files -------------------------------------------------------------
    def read(self, name: str, default: Any = None) -> Any:
        p = self.path / name
        if not p.exists():
            if default is not None:
                return default
            raise RunError(f"{p}: missing (not a complete run directory?)")
        try:
            return json.loads(p.read_text())
        except json.JSONDecodeError as e:
            raise RunError(f"{p}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None

    def write(self, name: str, data: Any, *, indent: int | None = 1) -> None:
        write_json_atomic(self.path / name, data, indent=indent)

    @property
    def manifest(self) -> dict[str, Any]:
        return self.read("manifest.json", {})

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """An exclusive lock on this run's files, for read-modify-write across processes."""
        with open(self.path / ".lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def modify_manifest(self, fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply ``fn`` to the manifest under the run lock and write it back."""
        with self.locked():
            m = self.manifest
            fn(m)
            self.write("manifest.json", m)
        return m

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        return self.modify_manifest(lambda m: m.update(fields))

    @property
    def state(self) -> dict[str, Any]:
        return self.read("state.json", {})

    def save_state(self, state: dict[str, Any]) -> None:
        self.write("state.json", state)

    def plan(self):
        from testbed.topology.plan import Plan

        return Plan.from_dict(self.read("plan.json"))

    def deployment(self):
        from testbed.runs.deployment import Deployment

        return Deployment.from_dict(self.read("deployment.json"))


def mark_active(root: Path, run_id: str, active: bool) -> None:
    """Add (remove) a run to (from) ``root``'s list of active runs. Under an exclusive lock on
    ``root/.active.lock``: runs brought up or torn down at the same time (threads of one
    ``testbed reproduce --jobs``, or several processes) do not lose each other's entries."""
    import fcntl

    root.mkdir(parents=True, exist_ok=True)
    f = root / ACTIVE_FILE
    with open(root / ".active.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ids = [x for x in (f.read_text().split() if f.exists() else []) if x != run_id]
        if active:
            ids.append(run_id)
        f.write_text("".join(i + "\n" for i in ids))


def active_runs(root: Path) -> list[str]:
    f = root / ACTIVE_FILE
    return [x for x in (f.read_text().split() if f.exists() else []) if (root / x).exists()]


def find_run(run: str | None, runs_dir: str | None = None) -> RunDir:
    """A run by id or path; None = the most recent active run."""
    from testbed.errors import UsageError

    root = runs_root(runs_dir)
    if run:
        p = Path(run)
        cand = p if p.exists() else root / run
        if not (cand / "plan.json").exists():
            raise UsageError(f"{run}: no such run (looked in {root})")
        return RunDir(cand)
    act = active_runs(root)
    if not act:
        raise UsageError(f"no active run in {root} (start one with `testbed up FILE`)")
    return RunDir(root / act[-1])
