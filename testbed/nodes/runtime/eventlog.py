"""The node's append-only JSON-lines event log.

One line per event: ``t`` (``time.time_ns()``), ``m`` (``time.monotonic_ns()``),
``node``, ``ev`` and the event's fields. ``ev`` and the field names are checked
against the registry (:mod:`testbed.nodes.runtime.events`) -- a dict lookup and
a key-set comparison. Lines are buffered in memory and written with one
``os.write`` at least every ``flush_ms`` (a timer on the loop), when the buffer
grows large, and on :meth:`close`; a SIGKILLed node keeps everything up to its
last flush (the data is in the kernel's page cache). Opening an existing log
appends to it (a restarted node continues its log).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

from testbed.nodes.runtime import events as _events

MAX_BUFFER_LINES = 20_000
_time_ns = time.time_ns
_monotonic_ns = time.monotonic_ns


class UnknownEvent(ValueError):
    """An event type or field not declared in the registry."""


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode


def _line_encoder() -> Callable[[dict[str, Any]], str]:
    """``_dumps`` without its per-call set-up: the C encoder made once, no circular-reference
    check (a record is built here from plain values). The same text as ``_dumps`` (a unit test
    compares them); ``_dumps`` where the C accelerator is missing."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _dumps
    try:
        enc = make(None, str, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    except TypeError:  # another signature (a Python version we have not met): the plain way
        return _dumps

    def encode(rec: dict[str, Any]) -> str:
        return "".join(enc(rec, 0))
    return encode


_encode_line = _line_encoder()


class EventLog:
    def __init__(self, path: str, node: str, flush_ms: int = 100,
                 lookup: Callable[[str], Any] = _events.get) -> None:
        self.path = path
        self.node = node
        self.flush_ms = max(1, min(int(flush_ms), 100))
        self._lookup = lookup
        self.existed = os.path.exists(path) and os.path.getsize(path) > 0
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._buf: list[str] = []
        self._timer: Any = None
        self._loop: Any = None
        self._fields_ok: dict[str, frozenset[str]] = {}
        self.lines = 0

    def log(self, ev: str, fields: dict[str, Any] | None = None) -> None:
        allowed = self._fields_ok.get(ev)
        if allowed is None:
            et = self._lookup(ev)
            if et is None:
                raise UnknownEvent(f"event {ev!r} is not declared in the event registry "
                                   "(declare it in testbed/nodes/<protocol>/events.py)")
            allowed = self._fields_ok[ev] = frozenset(et.fields)
        rec = {"t": _time_ns(), "m": _monotonic_ns(), "node": self.node, "ev": ev}
        if fields:
            if not allowed.issuperset(fields):
                extra = sorted(set(fields) - allowed)
                raise UnknownEvent(f"event {ev!r}: undeclared field(s) {', '.join(extra)}")
            rec.update(fields)
        self._buf.append(_encode_line(rec))
        self.lines += 1
        if len(self._buf) >= MAX_BUFFER_LINES:
            self.flush()

    def flush(self) -> None:
        if not self._buf or self._fd is None:
            return
        data = ("\n".join(self._buf) + "\n").encode("utf-8")
        self._buf = []
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def start(self, loop: Any) -> None:
        """Flush every ``flush_ms`` on ``loop``."""
        self._loop = loop
        self._tick()

    def _tick(self) -> None:
        self.flush()
        if self._fd is not None:
            self._timer = self._loop.call_later(self.flush_ms / 1000.0, self._tick)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
