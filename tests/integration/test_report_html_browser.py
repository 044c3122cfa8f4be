"""analysis/report.html for real: a synthetic run through analyze() (real Spark), opened from disk
in headless Chromium (Debian ``chromium``), every figure decoded and drawn.

Marker ``browser``: in CI a skip (no chromium) fails the run, like docker/ssh.
"""

from __future__ import annotations

import re

import pytest

from browser import dump_dom, screenshot
from testbed.analysis.job import analyze
from testbed.testing.synthetic import make_run_dir

pytestmark = [pytest.mark.spark, pytest.mark.browser]


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    from testbed.analysis.session import SMALL_DATA_CONF, SMALL_DATA_JAVA_OPTS, spark_session

    spark = spark_session(app="testbed-tests", conf=SMALL_DATA_CONF, java_opts=SMALL_DATA_JAVA_OPTS)
    syn = make_run_dir(tmp_path_factory.mktemp("html"), duration_s=20.0, publishers=2, subscribers=2,
                       rate_per_s=5.0, stall=(8.0, 10.0), duplicate=True, torn=True, unknown_event=True)
    res = analyze(syn.path, spark=spark, progress=lambda s: None)
    return syn, res


def test_report_html_is_written_beside_report_md_and_self_contained(analysed):
    syn, res = analysed
    html_path = syn.path / "analysis" / "report.html"
    assert res.report_html == html_path and html_path.exists()
    html = html_path.read_text()
    # nothing fetched from elsewhere: every image inline, no external script, style or link
    srcs = re.findall(r'src="([^"]*)"', html)
    assert len(srcs) == len(res.figures) == 3
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    assert not re.search(r'(href|src)="(https?:|//|file:)', html) and "<link" not in html
    # the fault timeline is the Gantt strip figure, inside the faults section
    assert sorted(p.name for p in res.figures) == ["delivered_rate.png", "fault_timeline.png", "latency_cdf.png"]
    faults = html.split('id="faults"')[1].split("<h2")[0]
    assert 'id="fig-fault_timeline"' in faults and "{at: 8s, stall: b2, for: 2s}" in faults


def test_every_figure_renders_in_headless_chromium(analysed, tmp_path):
    syn, res = analysed
    dom = dump_dom(syn.path / "analysis" / "report.html")
    imgs = re.findall(r"<img[^>]*>", dom)
    assert len(imgs) == 3
    assert all('data-rendered="yes"' in i for i in imgs), imgs
    assert re.search(r'<body[^>]*data-figures="3/3"', dom)
    # the checks: a table with the verdicts, and the failing check's violations expandable (and open)
    assert re.search(r"<code>no_duplicates</code></td><td><span class=\"badge fail\">FAIL</span>", dom)
    det = re.search(r'<details class="check" id="check-no_duplicates" open="">(.*?)</details>', dom, re.S)
    assert det and "Violations (first 1 of 1)" in det.group(1) and "locs-0" in det.group(1)
    comp = re.search(r'<details class="check" id="check-completeness">(.*?)</details>', dom, re.S)
    assert comp and "fault #0" in comp.group(1)
    # a screenshot of the page is not blank: the figures add many distinct colours
    from PIL import Image

    png = screenshot(syn.path / "analysis" / "report.html", tmp_path / "page.png")
    colours = Image.open(png).convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50


def test_a_broken_figure_is_reported_as_not_rendered(analysed, tmp_path):
    """The browser check can fail: corrupt one inlined PNG and it is marked data-rendered="no"."""
    syn, _ = analysed
    html = (syn.path / "analysis" / "report.html").read_text()
    broken = tmp_path / "broken.html"
    broken.write_text(html.replace("data:image/png;base64,iVBOR", "data:image/png;base64,AAAAA", 1))
    dom = dump_dom(broken)
    imgs = re.findall(r"<img[^>]*>", dom)
    assert sum('data-rendered="no"' in i for i in imgs) == 1
    assert re.search(r'<body[^>]*data-figures="2/3"', dom)
