"""PacedWorkload on a simulated clock: pacing, catch-up, restart after t0, batches, the end."""

from __future__ import annotations

import heapq
import math

import pytest

from testbed.nodes.runtime.workload import PacedWorkload

T0_WALL = 1_700_000_000_000_000_000
S = 1_000_000_000


class _Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeRt:
    """Wall and monotonic clocks moving together; call_later fires ``lag_s`` after it is due."""

    def __init__(self, now_wall_ns: int, lag_s: float = 0.0) -> None:
        self.mono = 5 * S
        self.wall_offset = now_wall_ns - self.mono
        self.lag_ns = int(lag_s * S)
        self.q: list = []
        self.n = 0

    def wall_ns(self) -> int:
        return self.mono + self.wall_offset

    def mono_ns(self) -> int:
        return self.mono

    def call_later(self, delay_s, fn, *args):
        t = _Timer()
        self.n += 1
        heapq.heappush(self.q, (self.mono + int(delay_s * S) + self.lag_ns, self.n, t, fn, args))
        return t

    def run(self, until_ns: int | None = None) -> None:
        while self.q:
            at, _, t, fn, args = heapq.heappop(self.q)
            if until_ns is not None and at > until_ns:
                heapq.heappush(self.q, (at, 0, t, fn, args))
                return
            self.mono = max(self.mono, at)
            if not t.cancelled:
                fn(*args)


def drive(rt: FakeRt, **kw):
    got: list[tuple[int, int]] = []  # (k, time since t0 in ns)
    t0_mono = T0_WALL - rt.wall_offset
    w = PacedWorkload(rt, lambda k: got.append((k, rt.mono - t0_mono)), **kw)
    return w, got, t0_mono


def test_on_time_every_event_at_or_after_its_due_time():
    rt = FakeRt(T0_WALL)
    w, got, _ = drive(rt)
    assert w.start(10.0, T0_WALL, 1.0)
    rt.run()
    assert [k for k, _ in got] == list(range(10))
    assert all(t >= k * S // 10 and t - k * S // 10 < S // 1000 for k, t in got)
    assert not w.running and w.emitted == 10


def test_late_timers_catch_up_and_keep_the_count():
    rt = FakeRt(T0_WALL, lag_s=0.35)
    w, got, _ = drive(rt)
    w.start(10.0, T0_WALL, 1.0)
    rt.run()
    assert [k for k, _ in got] == list(range(10))  # nothing lost, nothing repeated
    assert got[0][1] == int(0.35 * S) and got[3][1] == got[0][1]  # 0..3 were due: one batch


def test_a_late_start_that_is_not_a_restart_catches_up_from_zero():
    rt = FakeRt(T0_WALL + int(0.42 * S))  # start_workload called 0.42 s after t0
    w, got, _ = drive(rt)
    w.start(10.0, T0_WALL, 1.0, born_wall_ns=T0_WALL - S)
    rt.run()
    assert [k for k, _ in got] == list(range(10))


def test_a_process_restarted_after_t0_skips_what_fell_due_while_down():
    born = T0_WALL + int(0.42 * S)
    rt = FakeRt(born)
    w, got, _ = drive(rt)
    w.start(10.0, T0_WALL, 1.0, born_wall_ns=born)
    rt.run()
    assert [k for k, _ in got] == list(range(math.ceil(0.42 * 10), 10))  # 5..9, each on time
    assert all(t >= k * S // 10 for k, t in got)


def test_lead_shifts_start_and_end():
    rt = FakeRt(T0_WALL)
    w, got, _ = drive(rt)
    w.start(4.0, T0_WALL, 1.0, lead_s=2.0)
    rt.run()
    assert [k for k, _ in got] == [0, 1, 2, 3]
    assert [t for _, t in got] == [2 * S, 2 * S + S // 4, 2 * S + S // 2, 2 * S + 3 * S // 4]


def test_batches_are_bounded_and_the_rest_follows_at_once():
    rt = FakeRt(T0_WALL + int(0.5 * S))  # 5000 events already due at 10000/s
    w, got, _ = drive(rt, max_batch=1000)
    w.start(10000.0, T0_WALL, 1.0)
    calls = []
    orig = rt.call_later
    rt.call_later = lambda d, fn, *a: (calls.append(d), orig(d, fn, *a))[1]
    rt.run()
    assert [k for k, _ in got] == list(range(10000))
    assert calls[:4] == [0.0, 0.0, 0.0, 0.0]  # four more batches due at once


def test_far_behind_after_the_end_nothing_more_is_sent():
    rt = FakeRt(T0_WALL + int(2.5 * S))  # the whole 1 s schedule ended 1.5 s ago (> late_s)
    w, got, _ = drive(rt)
    w.start(10.0, T0_WALL, 1.0)
    rt.run()
    assert got == [] and not w.running


def test_min_wait_coarsens_the_tick():
    rt = FakeRt(T0_WALL)
    w, got, _ = drive(rt, min_wait_s=0.25)
    w.start(20.0, T0_WALL, 1.0)
    rt.run()
    assert [k for k, _ in got] == list(range(20))
    assert sorted({t for _, t in got}) == [0, S // 4, S // 2, 3 * S // 4, S]  # one tick per 0.25 s


def test_stop_cancels_and_zero_rate_schedules_nothing():
    rt = FakeRt(T0_WALL)
    w, got, _ = drive(rt)
    assert not w.start(0.0, T0_WALL, 1.0)
    w.start(10.0, T0_WALL, 1.0)
    rt.run(until_ns=rt.mono + S // 2 - 1)
    w.stop()
    rt.run()
    assert [k for k, _ in got] == [0, 1, 2, 3, 4] and not w.running


@pytest.mark.parametrize("rate", [3.0, 7.5, 1000.0])
def test_count_is_rate_times_duration(rate):
    rt = FakeRt(T0_WALL, lag_s=0.003)
    w, got, _ = drive(rt)
    w.start(rate, T0_WALL, 2.0)
    rt.run()
    assert len(got) == math.ceil(rate * 2.0)
