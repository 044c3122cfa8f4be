"""One helper that runs a playbook through ansible-runner: typed errors, per-task progress.

``run_playbook(name, inventory, extravars, progress)`` runs ``testbed/providers/ansible/playbooks/<name>.yml`` with a
private data directory in a fresh temporary directory (never inside a run directory; it is
deleted afterwards, artifacts included). Per-task progress lines go to ``progress``; the
results of tasks whose name starts with ``report`` are kept per host (their ``stdout`` parsed
as JSON when it is JSON) so a playbook can hand facts back to the provider.

SSH: host keys are verified against known_hosts (``~/.ssh/known_hosts`` and the files in
``TESTBED_KNOWN_HOSTS``); ``StrictHostKeyChecking=yes``: an unknown or changed key fails the
host as unreachable, naming it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from testbed.errors import ProviderError
from testbed.runs import scratch

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"  # package data: in the wheel too
KNOWN_HOSTS_ENV = "TESTBED_KNOWN_HOSTS"
Progress = Callable[[str], None]


class PlaybookError(ProviderError):
    """A playbook failed. ``failed`` and ``unreachable`` name the hosts; ``messages`` say why."""

    def __init__(self, playbook: str, failed: dict[str, str], unreachable: dict[str, str], detail: str = ""):
        self.playbook = playbook
        self.failed = failed
        self.unreachable = unreachable
        parts = []
        if unreachable:
            parts.append("unreachable: " + "; ".join(f"{h} ({m})" for h, m in sorted(unreachable.items())))
        if failed:
            parts.append("failed: " + "; ".join(f"{h} ({m})" for h, m in sorted(failed.items())))
        if not parts:
            parts.append(detail or "failed")
        hosts = sorted(set(failed) | set(unreachable))
        super().__init__(f"playbook {playbook}: " + "; ".join(parts),
                         host=",".join(hosts) if hosts else None)


class HostsUnreachable(PlaybookError):
    """Some hosts could not be reached over SSH (address, key, or host key not in known_hosts)."""


@dataclass
class PlaybookResult:
    playbook: str
    status: str
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)  # host -> task name -> result
    tasks: int = 0


def known_hosts_files(env: dict[str, str] | None = None) -> list[str]:
    env = dict(os.environ) if env is None else env
    files = [p for p in env.get(KNOWN_HOSTS_ENV, "").split(os.pathsep) if p]
    home = os.path.expanduser("~/.ssh/known_hosts")
    return files + [home]


def ssh_common_args(known_hosts: list[str]) -> str:
    """The ssh options every connection uses (a string for ansible's ``ansible_ssh_common_args``)."""
    opts = ["-o", "StrictHostKeyChecking=yes",
            "-o", "UserKnownHostsFile=" + " ".join(known_hosts),
            "-o", "PasswordAuthentication=no", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15"]
    return " ".join(shlex.quote(o) for o in opts)


def _short(msg: Any) -> str:
    s = str(msg or "").strip().splitlines()
    return (s[-1] if s else "")[:300]


def _message(res: dict[str, Any]) -> str:
    """Why a task failed: its message, and for a command the last line it wrote to stderr (for a
    loop, those of the first item that failed)."""
    items = [r for r in res.get("results") or [] if isinstance(r, dict) and r.get("failed")]
    if items:
        return _message(items[0])
    msg = next((_short(res[k]) for k in ("msg", "stderr", "module_stderr", "stdout") if res.get(k)), "failed")
    err = _short(res.get("stderr"))
    if err and err != msg:
        msg = f"{msg}: {err}"
    return msg


def run_playbook(name: str, inventory: str, extravars: dict[str, Any], progress: Progress,
                 *, timeout: int = 600, forks: int = 20) -> PlaybookResult:
    """Run ``testbed/providers/ansible/playbooks/<name>.yml``; raise HostsUnreachable / PlaybookError naming the hosts."""
    try:
        import ansible_runner
    except ImportError:
        raise ProviderError("the ansible provider needs ansible-runner: pip install 'testbed[ansible]'") from None
    playbook = PLAYBOOKS / f"{name}.yml"
    if not playbook.is_file():
        raise ProviderError(f"no playbook {playbook}")
    failed: dict[str, str] = {}
    unreachable: dict[str, str] = {}
    result = PlaybookResult(name, "unknown")
    lock = threading.Lock()

    def on_event(ev: dict[str, Any]) -> bool:
        kind = ev.get("event", "")
        data = ev.get("event_data", {}) or {}
        host = data.get("host") or data.get("remote_addr") or ""
        task = data.get("task", "")
        with lock:
            if kind == "playbook_on_task_start":
                result.tasks += 1
                progress(f"{name}: {task}")
            elif kind == "runner_on_ok" and task.startswith("report"):
                res = dict(data.get("res", {}) or {})
                out = res.get("stdout")
                if isinstance(out, str):
                    try:
                        res["json"] = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
                    except (ValueError, IndexError):
                        pass
                result.reports.setdefault(host, {})[task] = res
            elif kind == "runner_on_failed" and not data.get("ignore_errors"):
                failed[host] = f"{task}: {_message(data.get('res', {}) or {})}"
            elif kind == "runner_on_unreachable":
                unreachable[host] = _message(data.get("res", {}) or {})
        return True  # keep the event (ansible-runner writes it into the temp artifacts dir)

    tmp = str(scratch.make("tb-ansible"))
    try:
        os.chmod(tmp, 0o700)
        inv = Path(tmp) / "inventory" / "hosts.yml"
        inv.parent.mkdir()
        inv.write_text(inventory)
        bindir = str(Path(sys.executable).parent)
        env = {
            "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=15s",
            "ANSIBLE_SSH_CONTROL_PATH_DIR": os.path.join(tmp, "cp"),
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_NOCOLOR": "True",
            "ANSIBLE_LOCAL_TEMP": os.path.join(tmp, "tmp"),
            "ANSIBLE_PYTHON_INTERPRETER": "python3",  # no discovery round trips
            "ANSIBLE_DEPRECATION_WARNINGS": "False",
        }
        r = ansible_runner.run(
            private_data_dir=tmp, project_dir=str(PLAYBOOKS), playbook=playbook.name,
            inventory=str(inv), extravars=extravars, envvars=env, quiet=True, forks=forks,
            event_handler=on_event, timeout=timeout, rotate_artifacts=1, suppress_env_files=True,
        )
        result.status = r.status
        if r.status != "successful" or failed or unreachable:
            detail = f"ansible-runner status {r.status} (rc {r.rc})"
            if not failed and not unreachable:
                try:
                    tail = [ln for ln in r.stdout.read().splitlines() if ln.strip()][-3:]
                    detail += ": " + " | ".join(t.strip() for t in tail)
                except Exception:
                    pass
            cls = HostsUnreachable if unreachable else PlaybookError
            raise cls(name, failed, unreachable, detail)
        return result
    finally:
        _close_masters(Path(tmp) / "cp")
        shutil.rmtree(tmp, ignore_errors=True)


def _close_masters(cp_dir: Path) -> None:
    """End the ssh ControlMaster processes of this playbook run (they would linger 15 s)."""
    import subprocess

    if not cp_dir.is_dir():
        return
    for sock in cp_dir.iterdir():
        try:
            subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"], capture_output=True,
                           timeout=5)
        except (OSError, subprocess.SubprocessError):
            pass
