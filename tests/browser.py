"""Headless Chromium for tests that open the HTML the testbed writes (marker ``browser``).

``dump_dom(page)`` loads a file from disk in Debian's ``chromium`` (headless, no
network, a throw-away profile) and returns the DOM after the page's scripts ran,
so a test can read what those scripts marked. ``screenshot(page, png)`` renders
it to a PNG. ``chromium()`` gives the binary or skips the test (in CI a skipped
``browser`` test fails the run, see tests/conftest.py).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium() -> str:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no chromium (apt-get install chromium; scripts/setup.sh installs it)")
    raise AssertionError  # unreachable


def _args(profile: str) -> list[str]:
    return ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--mute-audio", "--hide-scrollbars",
            f"--user-data-dir={profile}", "--virtual-time-budget=5000"]


def _run(extra: list[str], page: Path, timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="tb-chromium-") as profile:
        cmd = [chromium(), *_args(profile), *extra, Path(page).resolve().as_uri()]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def dump_dom(page: Path, timeout: float = 120) -> str:
    """The serialized DOM of ``page`` after load (its inline scripts have run)."""
    r = _run(["--dump-dom"], page, timeout)
    if r.returncode != 0 or "<html" not in r.stdout:
        raise AssertionError(f"chromium --dump-dom {page} -> {r.returncode}\n{r.stderr[-2000:]}")
    return r.stdout


def screenshot(page: Path, png: Path, size: str = "1200,3000", timeout: float = 120) -> Path:
    """A PNG of ``page`` rendered at ``size`` (width,height)."""
    r = _run([f"--screenshot={png}", f"--window-size={size}"], page, timeout)
    if r.returncode != 0 or not Path(png).exists():
        raise AssertionError(f"chromium --screenshot {page} -> {r.returncode}\n{r.stderr[-2000:]}")
    return Path(png)


__all__ = ["chromium", "dump_dom", "screenshot"]
