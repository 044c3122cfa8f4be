"""Load a page in a real headless Chromium (Debian package ``chromium``) and return its DOM."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def load_page(path: str | Path, budget_ms: int = 10000) -> str:
    """The DOM of ``path`` after it loaded and its scripts ran (``--dump-dom``)."""
    exe = chromium()
    if exe is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    url = Path(path).resolve().as_uri()
    res = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise RuntimeError(f"chromium failed ({res.returncode}): {res.stderr[-500:]}")
    return res.stdout
