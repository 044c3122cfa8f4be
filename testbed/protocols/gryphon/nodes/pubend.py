"""Pubends: tick assignment, the stable log, silence (Sec 2.2). Stdlib + msgpack.

The pubend's knowledge stream has the shape ``F*[D|F]*Q*``: ``[0, acked)`` is
F (acknowledged everywhere), ``[acked, horizon)`` holds D ticks with F between
them, and ticks from ``horizon`` on are Q (the future). A message is published
only once its log record is fsync'd; until then it is *pending* and nothing
about its tick leaves the PHB. A restarted PHB rebuilds every pubend from the
log in ``state_dir``: logged ticks are D, everything between and up to the
restart is F (never published).
"""

from __future__ import annotations

import os
from typing import Any

import msgpack

from testbed.protocols.gryphon.nodes.streams import KnowledgeStream


# Sec 4.1: the ~100 ms GD - best-effort latency difference "is due to the delay introduced
# by the logging of guaranteed messages at the PHB": the default time a log force takes.
LOG_FORCE_S = 0.1


class PubendLog:
    """Append-only, fsync'd log of one PHB: msgpack records ``[pubend, tick, msg]``.

    ``force_s``: how long a force (write + fsync) takes before its records count as stable,
    the paper's disk (Sec 4.1, :data:`LOG_FORCE_S`); our fsync on a local SSD or tmpfs takes
    well under a millisecond. The PHB waits ``force_s`` after :meth:`sync` before it publishes
    what that sync made stable; forces overlap (a latency, not a throughput limit).
    """

    def __init__(self, path: str, force_s: float = LOG_FORCE_S) -> None:
        if force_s < 0:
            raise ValueError(f"log force delay {force_s} < 0")
        self.path = path
        self.force_s = float(force_s)
        self._buf: list[bytes] = []
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def append(self, pubend: str, tick: int, msg: dict[str, Any]) -> None:
        self._buf.append(msgpack.packb([pubend, tick, msg], use_bin_type=True))

    def sync(self) -> int:
        """Write and fsync everything appended; returns the number of records made stable."""
        n = len(self._buf)
        if n:
            os.write(self._fd, b"".join(self._buf))
            os.fsync(self._fd)
            self._buf.clear()
        return n

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass

    @staticmethod
    def recover(path: str) -> list[tuple[str, int, dict[str, Any]]]:
        """Every complete record in the log (a torn tail record is ignored)."""
        if not os.path.exists(path):
            return []
        out = []
        with open(path, "rb") as f:
            up = msgpack.Unpacker(f, raw=False, strict_map_key=False)
            try:
                for rec in up:
                    out.append((rec[0], int(rec[1]), rec[2]))
            except (msgpack.OutOfData, ValueError):
                pass
        return out


class Pubend:
    """One pubend's stream and tick assignment (pure; logging is done by the PHB)."""

    def __init__(self, pid: str) -> None:
        self.id = pid
        self.k = KnowledgeStream()
        self.horizon = 0  # ticks < horizon are known (D or F); the rest is Q
        self.last_d = -1  # latest D tick made stable
        self.last_assigned = -1
        self.pending: list[tuple[int, dict[str, Any]]] = []  # assigned, not yet logged

    def assign(self, now_ms: int, msg: dict[str, Any]) -> int:
        """Give a new message a unique tick, later than every tick known or assigned."""
        t = max(now_ms, self.horizon, self.last_assigned + 1)
        self.last_assigned = t
        self.pending.append((t, msg))
        return t

    def stable(self, n: int | None = None) -> tuple[list[tuple[int, int]], list[tuple[int, dict[str, Any]]]]:
        """The first ``n`` pending messages (all: None) were logged: they become D (F before
        each). Returns a first-time knowledge message (F intervals incl. the F* prefix, D ticks)."""
        f: list[tuple[int, int]] = []
        if n is None or n >= len(self.pending):
            d, self.pending = self.pending, []
        else:
            d, self.pending = self.pending[:n], self.pending[n:]
        if not d:
            return f, d
        if self.k.acked > 0:
            f.append((0, self.k.acked))
        for t, m in d:
            lo = max(self.last_d + 1, self.k.acked)
            if lo < t:
                f.append((lo, t))
            self.last_d = t
        self.k.accumulate(f, d)
        self.horizon = max(self.horizon, d[-1][0] + 1)
        return f, d

    def first_publication_prefix(self, t: int) -> None:
        """Before the first D, every earlier tick is F (nothing was published)."""
        if self.last_d < 0 and self.k.acked == 0:
            self.k.ack(t)

    def silence(self, now_ms: int) -> tuple[int, int] | None:
        """Idle: turn Q ticks up to ``now_ms`` into F (a first-time silence message)."""
        if self.pending or now_ms <= self.horizon:
            return None
        lo = self.horizon
        self.k.accumulate([(lo, now_ms)], [])
        self.horizon = now_ms
        return lo, now_ms

    @classmethod
    def recovered(cls, pid: str, records: list[tuple[int, dict[str, Any]]], now_ms: int) -> "Pubend":
        p = cls(pid)
        if records:
            records = sorted(records, key=lambda r: r[0])
            p.k.ack(records[0][0])
            p.pending = list(records)
            p.stable()
            p.last_assigned = p.last_d
        # ticks after the last logged one up to now were never published: F
        p.horizon = max(p.horizon, now_ms)
        if p.horizon > p.last_d + 1:
            p.k.accumulate([(p.last_d + 1, p.horizon)], [])
        return p
