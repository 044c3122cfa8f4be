"""Does a kernel have ``sch_netem``? (I/O lives here, not in the pure ``netem.py``.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Sequence

Runner = Callable[[Sequence[str]], int]

# Adding a netem qdisc to the loopback device of a throwaway network namespace
# (unshare -n) is the only reliable test: netem may be built in, a module that
# loads on demand, or missing, and /proc/modules or modinfo cannot tell them apart.
PROBE = ["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]


def _run(argv: Sequence[str]) -> int:
    try:
        return subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=10).returncode
    except (OSError, subprocess.TimeoutExpired):
        return 127


def kernel_has_netem(run: Runner = _run, sys_module: Path = Path("/sys/module/sch_netem")) -> bool:
    """True iff this machine's kernel can attach a netem qdisc.

    A loaded module counts as yes; otherwise the probe needs root and ``unshare`` + ``tc``
    (without them the answer is no: userspace emulation is the safe choice).
    """
    if sys_module.exists():
        return True
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("tc") is None:
        return False
    return run(PROBE) == 0
