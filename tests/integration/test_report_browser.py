"""The reproduction page in a real headless Chromium: every figure decoded, and a broken one is seen."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from browser import dump_dom  # noqa: E402

from testbed.analysis.plots import bar_plot, series_plot  # noqa: E402
from testbed.experiments import claims as C  # noqa: E402
from testbed.experiments import report  # noqa: E402

pytestmark = pytest.mark.browser


def _result(paper: str, figs: list[int]) -> dict:
    claims = [C.comparison(figs[0], "a above b", [C.Difference("x", (5, 6, 7), (1, 2, 3), ">")], what="w"),
              C.information(figs[0], "hardware number", [1.0], 300, "set by the paper's hardware")]
    return {"paper": paper, "title": f"paper {paper}", "scale": "quick", "figures": figs,
            "timings": {"total_s": 1.0}, "stats": {"points": 3, "ran": 3, "reused": 0},
            "figure_info": [{"number": n, "title": f"fig {n}", "paper": "stated", "image": f"figures/fig{n}.png",
                             "references": [{"y": 2.0, "x": 1.0, "series": "", "note": "about 2"}]} for n in figs],
            "claims": [c.to_dict() for c in claims], "checks": [{"run": "r0", "check": "tno", "passed": True,
                                                                "violations": 0}],
            "runs": [{"name": "g/-/r0", "run": "/x", "reused": False}]}


def _page(tmp: Path) -> Path:
    for paper, figs in (("p1", [1, 2]), ("p2", [3])):
        d = tmp / paper / "figures"
        d.mkdir(parents=True)
        for n in figs:
            if n == 2:
                bar_plot(d / f"fig{n}.png", "bars", "y", {"a": {"s1": [1, 2, 3]}}, [(None, 2.0, "paper")])
            else:
                series_plot(d / f"fig{n}.png", "t", "x", "y", {"s": {1: [1, 2, 3], 2: [2, 3, 4]}}, [(1, 2, "paper")])
        (tmp / paper / "result.json").write_text(json.dumps(_result(paper, figs)))
    return report.write_all(tmp)[1]


def _status(dom: str) -> str:
    return re.search(r"<div id=\"figures-status\"[^>]*>", dom).group(0)


def test_every_figure_of_every_paper_is_decoded(tmp_path):
    page = _page(tmp_path)
    dom = dump_dom(page)
    st = _status(dom)
    assert 'data-ready="yes"' in st and 'data-total="3"' in st and 'data-decoded="3"' in st, st
    for fid in ("p1-fig1", "p1-fig2", "p2-fig3"):
        assert f'id="{fid}"' in dom


def test_a_broken_figure_is_detected(tmp_path):
    page = _page(tmp_path)
    text = page.read_text()
    i = text.index("data:image/png;base64,") + len("data:image/png;base64,")
    page.write_text(text[:i] + "AAAA" + text[i + 4000:])  # corrupt the first image's data
    st = _status(dump_dom(page))
    assert 'data-ready="no"' in st and 'data-decoded="2"' in st and 'data-total="3"' in st, st
