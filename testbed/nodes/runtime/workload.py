"""A paced open-loop workload: the one publish loop every client host uses.

Event ``k`` (k = 0, 1, 2, ...) is due at ``start + k / rate``, where ``start``
is the run's workload instant ``t0`` plus ``lead_s`` (e.g. a warm-up), and the
loop ends at ``start + duration``. It is open loop: nothing waits for replies,
and the schedule does not drift when a callback is late.

Rules (the same for every protocol):

* **Catch-up.** A late timer (the loop fell behind) sends what fell due, at most
  ``max_batch`` events per callback, then yields to the event loop and goes on at
  once, so the average rate is kept. Once ``late_s`` past the end, what is left
  is dropped (a host far behind does not keep publishing after the run).
* **Restart after t0.** A process born after ``t0`` (restarted by a fault)
  resumes the schedule where it stands now: the events that fell due while it
  was down are skipped, none is sent late, and it still ends at
  ``start + duration``. The next event index is then ``ceil(elapsed * rate)``,
  so indices (and the seqs a protocol derives from them) are never reused within
  the schedule.
* **Timer granularity.** The loop sleeps until the next event is due, but at
  least ``min_wait_s`` (0 = exactly; a coarse tick such as 10 ms sends the
  events due in between as one batch).

``emit(k)`` is called once per event, in order, from the event loop; it must not
block. Stdlib only (this runs in node processes).
"""

from __future__ import annotations

import math
from typing import Any, Callable

MAX_BATCH = 2000
LATE_S = 1.0


class PacedWorkload:
    """Drives ``emit(k)`` at ``rate`` events/s over ``[t0 + lead_s, t0 + lead_s + duration)``."""

    def __init__(self, rt: Any, emit: Callable[[int], None], *, max_batch: int = MAX_BATCH,
                 late_s: float = LATE_S, min_wait_s: float = 0.0) -> None:
        self.rt = rt
        self.emit = emit
        self.max_batch = max(1, int(max_batch))
        self.late_ns = int(late_s * 1e9)
        self.min_wait_s = max(0.0, float(min_wait_s))
        self.running = False
        self.k = 0  # the next event's index (= events emitted, plus those skipped by a restart)
        self.emitted = 0
        self.start_ns = self.end_ns = 0
        self.period_ns = 0.0
        self._timer: Any = None

    def start(self, rate_per_s: float, t0_wall_ns: int, duration_s: float, *,
              born_wall_ns: int | None = None, lead_s: float = 0.0) -> bool:
        """Schedule the events; False (nothing scheduled) when the rate or duration is 0.

        ``born_wall_ns``: when this process started (``rt.wall_ns()`` in ``__init__``);
        born after ``t0_wall_ns`` means restarted mid-run (see the module docstring).
        """
        self.stop()
        if rate_per_s <= 0 or duration_s <= 0:
            return False
        rt = self.rt
        offset_s = (t0_wall_ns - rt.wall_ns()) / 1e9 + lead_s  # until the schedule starts (< 0: past)
        self.start_ns = rt.mono_ns() + int(offset_s * 1e9)
        self.end_ns = self.start_ns + int(duration_s * 1e9)
        self.period_ns = 1e9 / rate_per_s
        restarted = born_wall_ns is not None and born_wall_ns > t0_wall_ns
        self.k = max(0, math.ceil(-offset_s * rate_per_s)) if restarted else 0
        self.running = True
        self._timer = rt.call_later(max(0.0, offset_s), self._tick)
        return True

    def stop(self) -> None:
        self.running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        self._timer = None
        if not self.running:
            return
        now = self.rt.mono_ns()
        start, period, end = self.start_ns, self.period_ns, self.end_ns
        if now >= end + self.late_ns:  # far behind after the end: what is left is not sent
            self.running = False
            return
        k, done, emit = self.k, 0, self.emit
        while True:
            due = start + k * period
            if due >= end:
                self.k = k
                self.emitted += done
                self.running = False
                return  # the schedule is over
            if due > now or done >= self.max_batch:
                break
            self.k = k + 1  # before emit: an emit that raises does not repeat the event
            emit(k)
            k += 1
            done += 1
        self.emitted += done
        wait = max(self.min_wait_s, (start + k * period - self.rt.mono_ns()) / 1e9)
        if done >= self.max_batch and start + k * period <= self.rt.mono_ns():
            wait = 0.0  # still behind: go on at once (after other callbacks ran)
        self._timer = self.rt.call_later(wait, self._tick)


__all__ = ["LATE_S", "MAX_BATCH", "PacedWorkload"]
