"""Suite-wide rules.

In CI (``CI=true``) a skipped test marked ``docker``, ``ssh``, ``browser`` or ``spark_cluster`` fails the run:
those tests exist to exercise the real engine, real SSH and a real browser, and a skip would
hide untested code.
"""

from __future__ import annotations

import os

import pytest

_REQUIRED_MARKERS = ("docker", "ssh", "browser", "spark_cluster")
_skipped_required: list[str] = []


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and any(m in report.keywords for m in _REQUIRED_MARKERS):
        _skipped_required.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if in_ci() and _skipped_required:
        print(f"\nCI: {len(_skipped_required)} docker/ssh/browser/spark_cluster test(s) were skipped; that is a failure here:")
        for n in _skipped_required:
            print(f"  {n}")
        session.exitstatus = 1
