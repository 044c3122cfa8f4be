"""measure_7 on hand-made frames: which pubends p1 routed via b1 when the stall began, and the stall."""

import math

import pandas as pd

from testbed.protocols.gryphon.analysis.measure import measure_7


class FakeRun:
    def __init__(self, routes: pd.DataFrame, times: dict[str, float]):
        self.routes, self.times, self.end_s = routes, times, 20.0

    def fault_time(self, op: str, target: str) -> float:
        return self.times.get(op, math.nan)

    def pdf(self, ev: str, columns):
        assert ev == "g_route"
        return self.routes


def _routes(rows):
    return pd.DataFrame(rows, columns=["node", "t_rel_s", "pubend", "cell", "via"])


def _nacks():
    rows = [("s1", 8.0, "p1/pubs-0", 2750, "subend", "b2"), ("s1", 8.1, "p1/pubs-2", 2740, "subend", "b2"),
            ("s2", 8.0, "p1/pubs-0", 2750, "subend", "b2"), ("b2", 8.2, "p1/pubs-0", 2750, "broker", "p1")]
    return pd.DataFrame(rows, columns=["node", "nack_s", "pubend", "range_ms", "origin", "to"])


def test_pubends_via_b1_are_the_last_routes_before_the_stall():
    routes = _routes([
        ("p1", 0.5, "p1/pubs-0", "ib1", "b1"), ("p1", 0.5, "p1/pubs-1", "ib1", "b2"),
        ("p1", 0.5, "p1/pubs-2", "ib1", "b2"), ("p1", 0.5, "p1/pubs-3", "ib1", "b2"),
        ("p1", 1.0, "p1/pubs-2", "ib1", "b1"),          # moved to b1 before the stall
        ("p1", 0.5, "p1/pubs-1", "ib2", "b1"),          # another cell: not counted
        ("p1", 7.8, "p1/pubs-0", "ib1", "b2"),          # after the crash: not counted
        ("p1", 7.8, "p1/pubs-2", "ib1", "b2"),
        ("b1", 0.5, "p1/pubs-3", "ib1", "b1"),          # another node: not counted
    ])
    lat = pd.DataFrame({"broker": ["s1"], "pub_s": [5.5], "lat_ms": [2500.0], "recv_s": [8.0]})
    m = measure_7(FakeRun(routes, {"stall": 5.0, "crash": 7.75, "restart": 15.75}), lat, _nacks())
    assert m["pubends_via_b1"] == ["p1/pubs-0", "p1/pubs-2"]
    assert m["stall_s"] == 2.75
    assert m["s1_range_ms"] == 5490.0 and m["s1_nacked_pubends"] == ["p1/pubs-0", "p1/pubs-2"]
    assert m["p1_routes_to_ib1_while_b1_down"] == ["b2"]


def test_routes_back_is_when_p1_again_routes_as_many_pubends_via_b1_as_before_the_stall():
    from testbed.protocols.gryphon.analysis.measure import routes_back_s

    routes = _routes([
        ("p1", 0.5, "p1/pubs-0", "ib1", "b1"), ("p1", 0.5, "p1/pubs-1", "ib1", "b2"),
        ("p1", 0.5, "p1/pubs-2", "ib1", "b1"), ("p1", 0.5, "p1/pubs-3", "ib1", "b2"),
        ("p1", 7.8, "p1/pubs-0", "ib1", "b2"), ("p1", 7.8, "p1/pubs-2", "ib1", "b2"),  # b1 crashed
        ("b1", 16.0, "p1/pubs-0", "ib1", "b1"),                                        # another node
        ("p1", 16.1, "p1/pubs-1", "ib1", "b1"),                                        # one back
        ("p1", 16.2, "p1/pubs-1", "ib1", "b2"),
        ("p1", 16.6, "p1/pubs-3", "ib1", "b1"), ("p1", 16.9, "p1/pubs-0", "ib1", "b1"),  # two back
    ])
    assert abs(routes_back_s(routes, 15.75, 2) - (16.9 - 15.75)) < 1e-9
    assert routes_back_s(routes[routes["t_rel_s"] < 16.8], 15.75, 2) is None  # never two again
    lat = pd.DataFrame({"broker": ["s1"], "pub_s": [5.5], "lat_ms": [2500.0], "recv_s": [8.0]})
    m = measure_7(FakeRun(routes[routes["t_rel_s"] < 16.8], {"stall": 5.0, "crash": 7.75, "restart": 15.75}),
                  lat, _nacks())
    assert m["routes_back_within_run"] is False and m["routes_back_after_restart_s"] == 20.0 - 15.75


def test_the_fault_figure_draws_the_failed_path_pubends_in_colour_and_the_others_in_grey(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from testbed.protocols.gryphon.analysis.measure import fault_figure

    lat = pd.DataFrame({"client": ["subs-0"] * 4, "broker": ["s1"] * 4, "pub_s": [1.0, 1.1, 1.2, 1.3],
                        "lat_ms": [10.0, 2500.0, 11.0, 2400.0],
                        "pubend": ["p1/pubs-1", "p1/pubs-0", "p1/pubs-3", "p1/pubs-2"]})
    seen = {}
    monkeypatch.setattr(plt, "close", lambda fig: seen.setdefault("lines", [
        (ln.get_label(), list(ln.get_ydata())) for ln in fig.axes[0].get_lines()]))
    nk = _nacks().assign(cum_range_ms=lambda d: d.groupby("node")["range_ms"].cumsum())
    fault_figure(tmp_path / "f.png", "t", lat, nk, focus=["p1/pubs-0", "p1/pubs-2"])
    assert (tmp_path / "f.png").stat().st_size > 0
    assert seen["lines"] == [("other pubends", [10.0, 11.0]), ("subs-0@s1 (p1/pubs-0, p1/pubs-2)", [2500.0, 2400.0])]
