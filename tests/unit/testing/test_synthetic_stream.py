"""synthetic.make_run_dir(stream=True) (the benchmark's multi-million-event runs) writes the same lines."""

from testbed.testing.synthetic import make_run_dir


def test_streamed_run_has_the_same_lines_and_counts(tmp_path):
    kw = dict(duration_s=6.0, publishers=2, subscribers=3, rate_per_s=4.0, duplicate=True, lost=True)
    a = make_run_dir(tmp_path / "a", **kw)
    b = make_run_dir(tmp_path / "b", stream=True, **kw)
    assert (a.publications, a.deliveries, a.lost_in_fault, a.events) == \
        (b.publications, b.deliveries, b.lost_in_fault, b.events)
    names = sorted(p.name for p in (a.path / "logs").iterdir())
    assert names == sorted(p.name for p in (b.path / "logs").iterdir())
    for n in names:
        la = (a.path / "logs" / n).read_text().split("\n")
        lb = (b.path / "logs" / n).read_text().split("\n")
        assert sorted(la) == sorted(lb), n
        assert la[-1] == lb[-1]  # the torn last line (b2) stays last
    assert (a.path / "manifest.json").read_text() == (b.path / "manifest.json").read_text()
