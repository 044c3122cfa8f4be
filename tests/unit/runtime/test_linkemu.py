"""Link emulation math and the egress scheduler, with a fake clock."""

import math
import random
import statistics

import pytest

from testbed.nodes.runtime.linkemu import (
    TABLE_MAX, DownReasons, Egress, ErrorHistogram, LinkSpec, LinkState, dist_t, normal_quantile,
    pareto_t, sample_delay_s,
)


def draws(spec, n=20000, seed=1):
    rng = random.Random(seed)
    return [sample_delay_s(spec, rng) * 1000 for _ in range(n)]


# --- distributions ---------------------------------------------------------------

def test_constant_when_jitter_is_zero_whatever_the_distribution():
    for dist in ("normal", "uniform", "pareto", "paretonormal", "constant"):
        assert set(draws(LinkSpec(delay_ms=7.0, distribution=dist), n=50)) == {7.0}
    assert set(draws(LinkSpec(delay_ms=7.0, jitter_ms=3.0, distribution="constant"), n=50)) == {7.0}


def test_uniform_is_mu_plus_minus_sigma():
    d = draws(LinkSpec(delay_ms=10, jitter_ms=2, distribution="uniform"))
    assert 8.0 <= min(d) < 8.05 and 11.95 < max(d) < 12.0
    assert abs(statistics.mean(d) - 10) < 0.05
    assert abs(statistics.pstdev(d) - 2 / math.sqrt(3)) < 0.03


def test_normal_mean_and_std_and_table_clip():
    d = draws(LinkSpec(delay_ms=10, jitter_ms=2, distribution="normal"))
    assert abs(statistics.mean(d) - 10) < 0.05
    assert abs(statistics.pstdev(d) - 2) < 0.05
    assert min(d) >= 10 - 2 * TABLE_MAX and max(d) <= 10 + 2 * TABLE_MAX


def test_pareto_table_formula():
    # iproute2 pareto.c: (U^(-1/a) - 1.5) * 4/3 with a = 3, U = 1 - u
    assert pareto_t(0.0) == pytest.approx(-2 / 3)
    assert pareto_t(0.875) == pytest.approx((0.125 ** (-1 / 3) - 1.5) * 4 / 3)  # = 2/3
    assert pareto_t(1 - 1e-12) == TABLE_MAX  # capped like the int16 table
    d = draws(LinkSpec(delay_ms=20, jitter_ms=4, distribution="pareto"), n=40000)
    assert min(d) >= 20 - 4 * 2 / 3 - 1e-9
    assert abs(statistics.mean(d) - 20) < 0.3  # mean ~0 for t (slightly below: the cap)
    assert statistics.median(d) < 20  # right-skewed


def test_paretonormal_is_the_one_to_three_blend_at_the_same_quantile():
    for u in (0.01, 0.3, 0.5, 0.9, 0.999):
        want = (normal_quantile(u) + 3 * pareto_t(u)) / 4
        assert dist_t("paretonormal", u) == pytest.approx(want)
    assert dist_t("paretonormal", 0.5) == pytest.approx(3 * (0.5 ** (-1 / 3) - 1.5) * 4 / 3 / 4)
    d = draws(LinkSpec(delay_ms=20, jitter_ms=4, distribution="paretonormal"))
    assert abs(statistics.mean(d) - 20) < 0.3


def test_negative_draws_are_clamped_to_zero():
    d = draws(LinkSpec(delay_ms=1, jitter_ms=5, distribution="normal"), n=2000)
    assert min(d) == 0.0 and max(d) > 1


def test_unknown_distribution():
    with pytest.raises(ValueError):
        dist_t("weibull", 0.5)


# --- LinkState: loss, rate, FIFO ---------------------------------------------------

def test_constant_delay_due_time():
    st = LinkState("b", LinkSpec(delay_ms=10))
    assert st.admit(100.0, 50, random.Random(0)) == pytest.approx(100.010)


def test_bernoulli_loss():
    rng = random.Random(3)
    st = LinkState("b", LinkSpec(loss=0.3))
    lost = sum(st.admit(float(i), 10, rng) is None for i in range(20000))
    assert 0.28 < lost / 20000 < 0.32
    assert all(LinkState("b", LinkSpec(loss=1.0)).admit(0.0, 1, rng) is None for _ in range(100))


def test_rate_serialization_and_departure_clock():
    st = LinkState("b", LinkSpec(rate_bps=8_000_000, delay_ms=5))  # 1000 B = 1 ms on the wire
    rng = random.Random(0)
    dues = [st.admit(10.0, 1000, rng) for _ in range(3)]  # a burst queues behind the departure clock
    assert dues == pytest.approx([10.006, 10.007, 10.008])
    assert st.admit(20.0, 500, rng) == pytest.approx(20.0 + 0.0005 + 0.005)  # idle link: clock restarts


def test_fifo_unless_reorder():
    rng = random.Random(5)
    fifo = LinkState("b", LinkSpec(delay_ms=10, jitter_ms=5))
    dues = [fifo.admit(i * 0.0002, 10, rng) for i in range(2000)]
    assert dues == sorted(dues)
    re = LinkState("b", LinkSpec(delay_ms=10, jitter_ms=5, reorder=True))
    dues = [re.admit(i * 0.0002, 10, rng) for i in range(2000)]
    assert dues != sorted(dues)


def test_change_applies_to_later_frames_and_keeps_fifo():
    rng = random.Random(0)
    st = LinkState("b", LinkSpec(delay_ms=100))
    first = st.admit(0.0, 10, rng)
    st.spec = LinkSpec(delay_ms=1)
    second = st.admit(0.001, 10, rng)
    assert first == pytest.approx(0.1)
    assert second == pytest.approx(0.1)  # held behind the earlier frame (FIFO)
    st.spec = LinkSpec(delay_ms=1, reorder=True)
    assert st.admit(0.002, 10, rng) == pytest.approx(0.003)


def test_kernel_mode_applies_no_delay_loss_or_rate():
    st = LinkState("b", LinkSpec(delay_ms=50, jitter_ms=5, loss=1.0, rate_bps=8), userspace=False)
    assert st.admit(1.0, 1000, random.Random(0)) == 1.0


# --- LinkSpec ----------------------------------------------------------------------

def test_linkspec_merge_and_validation():
    base = LinkSpec(delay_ms=10, jitter_ms=2, loss=0.01)
    s = LinkSpec.from_dict({"delay_ms": 200}, base)
    assert (s.delay_ms, s.jitter_ms, s.loss) == (200.0, 2, 0.01)
    assert LinkSpec.from_dict(s.to_dict()) == s
    for bad, msg in [({"delay": 1}, "unknown key"), ({"loss": 2}, "fraction"), ({"delay_ms": -1}, ">= 0"),
                     ({"distribution": "x"}, "one of"), ({"rate_bps": 0}, "> 0"), ({"up": 1}, "true or false")]:
        with pytest.raises(ValueError, match=msg):
            LinkSpec.from_dict(bad)


# --- reason sets ---------------------------------------------------------------------

def test_cut_and_partition_compose():
    r = DownReasons()
    assert r.add("b", "cut") is True
    assert r.add("b", "partition:p1") is False  # already down
    assert r.remove("b", "cut") is False  # the partition still holds it
    assert r.is_down("b")
    assert r.remove_everywhere("partition:p1") == ["b"]
    assert not r.is_down("b")
    assert r.remove("b", "cut") is False  # healing twice is harmless


def test_partition_heal_by_id_only():
    r = DownReasons()
    for p in ("a", "b"):
        r.add(p, "partition:p1")
    r.add("b", "partition:p2")
    assert r.remove_everywhere("partition:p1") == ["a"]
    assert r.snapshot() == {"b": ["partition:p2"]}
    assert r.peers_with("partition:p2") == ["b"]


# --- histogram ---------------------------------------------------------------------

def test_error_histogram_percentiles():
    h = ErrorHistogram()
    for us in range(100):  # 0..99 us
        h.add(us / 1e6)
    assert h.percentile_us(50) == 50.0  # upper edge of the 40..50 us bin
    assert h.percentile_us(99) == 100.0
    h.add(-0.005)  # below range: clamped into the first bin
    assert h.summary()["n"] == 101
    assert ErrorHistogram().summary() == {"n": 0}


# --- the scheduler with a fake loop -----------------------------------------------------

class FakeLoop:
    def __init__(self):
        self.now = 0.0
        self.handles = []

    def time(self):
        return self.now

    def call_at(self, when, fn, *args):
        h = _Handle(when, fn, args)
        self.handles.append(h)
        return h

    def advance(self, to):
        while True:
            ready = sorted((h for h in self.handles if not h.cancelled and h.when <= to), key=lambda h: h.when)
            if not ready:
                break
            h = ready[0]
            self.handles.remove(h)
            self.now = max(self.now, h.when)
            h.fn(*h.args)
        self.now = to


class _Handle:
    def __init__(self, when, fn, args):
        self.when, self.fn, self.args, self.cancelled = when, fn, args, False

    def cancel(self):
        self.cancelled = True


def make_egress(**kw):
    loop = FakeLoop()
    out, drops = [], []
    eg = Egress(loop, random.Random(0), lambda p, fs: out.extend((p, f, loop.now) for f in fs),
                lambda p, r, n: drops.append((p, r, n)), early_s=0.0, **kw)
    return loop, eg, out, drops


def test_egress_releases_at_due_time_in_order():
    loop, eg, out, _ = make_egress()
    eg.set_link("b", LinkSpec(delay_ms=10))
    eg.send("b", b"1")
    loop.advance(0.002)
    eg.send("b", b"2")
    loop.advance(0.0099)
    assert out == []
    loop.advance(0.05)
    assert [(f, round(t, 6)) for _, f, t in out] == [(b"1", 0.01), (b"2", 0.012)]
    assert eg.sched_summary()["all"]["n"] == 2


def test_egress_zero_delay_is_immediate_and_down_link_drops():
    loop, eg, out, drops = make_egress()
    eg.send("c", b"x")
    assert out == [("c", b"x", 0.0)]
    eg.down.add("c", "cut")
    eg.send("c", b"y")
    assert drops == [("c", "link-down", 1)]


def test_stall_holds_then_releases_in_due_order_and_close_loses_held():
    loop, eg, out, _ = make_egress()
    eg.set_link("b", LinkSpec(delay_ms=5))
    eg.send("b", b"before")
    assert eg.stall() == 1
    eg.send("b", b"during")
    eg.send("c", b"during-c")  # zero-delay link: held too
    loop.advance(1.0)
    assert out == []
    assert eg.held() == 3
    assert eg.unstall() == 3
    assert [f for _, f, _ in out] == [b"before", b"during", b"during-c"]
    eg.stall()
    eg.send("b", b"lost")
    assert eg.close() == 1


def test_set_link_up_false_is_a_reason():
    loop, eg, out, drops = make_egress()
    eg.set_link("b", LinkSpec(up=False))
    eg.send("b", b"x")
    eg.down.add("b", "cut")
    eg.set_link("b", LinkSpec(up=True))
    assert eg.down.is_down("b")  # the cut still holds
    assert drops == [("b", "link-down", 1)]


def test_loss_reported_as_drop():
    loop, eg, out, drops = make_egress()
    eg.set_link("b", LinkSpec(loss=1.0))
    eg.send("b", b"x")
    assert drops == [("b", "loss", 1)] and out == []


def test_add_zero_is_add_of_zero():
    a, b = ErrorHistogram(), ErrorHistogram()
    for h in (a, b):
        h.add(-0.0005)
    a.add(0.0)
    b.add_zero()
    assert (a.counts, a.n, a.sum_us, a.max_us) == (b.counts, b.n, b.sum_us, b.max_us)
    c, d = ErrorHistogram(), ErrorHistogram()
    c.add(0.0)
    d.add_zero()
    assert (c.counts, c.n, c.sum_us, c.max_us, c.summary()) == (d.counts, d.n, d.sum_us, d.max_us, d.summary())


def test_plain_follows_the_spec():
    st = LinkState("b", LinkSpec())
    assert st.plain
    for spec in (LinkSpec(delay_ms=1), LinkSpec(jitter_ms=1), LinkSpec(loss=0.1), LinkSpec(rate_bps=1000)):
        st.spec = spec
        assert not st.plain, spec
        assert st.spec is spec
    st.spec = LinkSpec(reorder=True, distribution="pareto")
    assert st.plain
    assert LinkState("b", LinkSpec(delay_ms=5), userspace=False).plain  # kernel mode emulates nothing here


def test_egress_plain_link_fast_path_keeps_fifo_behind_earlier_delayed_frames():
    """A link made plain while delayed frames are queued (or due later) does not pass them:
    the fast path is taken only when admit would give due = now with nothing queued."""
    loop, eg, out, _ = make_egress()
    eg.set_link("b", LinkSpec(delay_ms=10))
    eg.send("b", b"slow")
    eg.set_link("b", LinkSpec())
    loop.advance(0.001)
    eg.send("b", b"after")  # FIFO: due at the slow frame's due time, not now
    assert out == []
    loop.advance(0.02)  # absolute times
    assert [(f, round(t, 6)) for _, f, t in out] == [(b"slow", 0.01), (b"after", 0.01)]
    loop.advance(0.021)
    eg.send("b", b"now")  # plain, nothing queued, past the last due: immediate
    assert out[-1] == ("b", b"now", loop.now)
    s = eg.sched_summary()["links"]["b"]
    assert s["n"] == 3 and s["max_us"] >= 0.0


def test_egress_plain_link_counts_every_frame_in_the_histogram():
    loop, eg, out, _ = make_egress()
    for i in range(5):
        eg.send("c", b"%d" % i)
        loop.advance(0.001 * (i + 1))
    ref = ErrorHistogram()
    for _ in range(5):
        ref.add(0.0)
    assert eg.sched_summary()["links"]["c"] == ref.summary()
    assert [f for _, f, _ in out] == [b"0", b"1", b"2", b"3", b"4"]
