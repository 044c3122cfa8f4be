"""One exception root; every expected failure is a one-line message.

The CLI prints ``str(error)`` without a traceback (tracebacks only with
``--debug``) and exits with ``error.exit_code``.
"""

from __future__ import annotations

from dataclasses import dataclass


class TestbedError(Exception):
    """Root of every expected error. ``str()`` is the one line shown to users."""

    __test__ = False  # not a pytest test class
    exit_code = 1


@dataclass(frozen=True)
class Problem:
    """One problem in a topology file, located at the user's line and column."""

    path: str
    line: int  # 1-based; 0 when unknown
    col: int  # 1-based; 0 when unknown
    key: str  # dotted key, e.g. "nodes.b1.neighbors[0]"
    message: str

    def __str__(self) -> str:
        key = f"{self.key}: " if self.key else ""
        return f"{self.path}:{self.line}:{self.col}: {key}{self.message}"


class TopologyError(TestbedError):
    """A topology file is invalid. Carries every problem found, not just the first."""

    exit_code = 2

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems, key=lambda p: (p.path, p.line, p.col, p.key))
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def single(cls, path: str, line: int, col: int, key: str, message: str) -> "TopologyError":
        return cls([Problem(path, line, col, key, message)])


class UsageError(TestbedError):
    """Bad command-line usage (unknown run, bad --set, ...)."""

    exit_code = 2


class ProviderError(TestbedError):
    """A provider could not do what was asked. Names the host/node when known."""

    def __init__(self, message: str, *, host: str | None = None, node: str | None = None):
        self.host = host
        self.node = node
        where = ""
        if host:
            where += f"host {host}: "
        if node:
            where += f"node {node}: "
        super().__init__(where + message)


class UnsupportedAction(ProviderError):
    """An action this provider cannot perform (never a silent no-op)."""


class RunError(TestbedError):
    """A run directory is missing, incomplete or inconsistent."""


class AnalysisError(TestbedError):
    """The analysis pipeline could not complete."""
