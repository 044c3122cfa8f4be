"""A check's ``details.finding`` (e.g. clients a protocol lost) is shown at the top of both reports;
an excusing fault's window is shown with its attributed misses."""

from testbed.analysis.report import render_report
from testbed.analysis.report_html import render_report_html

CHECKS = [
    {"name": "P2_move_atomicity", "passed": True, "violations": 0, "attributed": 9, "description": "d",
     "examples": [], "details": {"finding": "covering: 8 of 10 mobile client(s) lost (running nowhere at the end), "
                                            "10 move(s) never ended"}},
    {"name": "completeness", "passed": True, "violations": 0, "attributed": 3, "description": "c", "examples": [],
     "details": {"attributed_by_fault": {"0": {"count": 3, "source": "{at: 2s, crash: b2}", "window": [0.0, 6.5],
                                               "recovered": "resync", "routes": 4}}}},
]


def _kw(tmp_path):
    return dict(run_id="r", plan={"name": "t", "protocol": "mobility"}, manifest={}, ingest={}, checks=CHECKS,
                metrics={}, figures=[])


def test_findings_at_the_top_and_fault_windows(tmp_path):
    md = render_report(out_dir=tmp_path, **_kw(tmp_path))
    top = md.split("## Event logs")[0]
    assert "**Findings:**" in top and "8 of 10 mobile client(s) lost" in top
    assert "fault #0 `{at: 2s, crash: b2}`: 3 (window 0-6.5 s, ends when the re-syncs were applied (measured); " \
           "4 route(s) touched)" in md
    html = render_report_html(**_kw(tmp_path))
    assert html.index('id="findings"') < html.index('id="checks"')
    assert "8 of 10 mobile client(s) lost" in html and "window 0-6.5 s" in html


def test_no_findings_no_section(tmp_path):
    kw = _kw(tmp_path)
    kw["checks"] = CHECKS[1:]
    assert "Findings" not in render_report(out_dir=tmp_path, **kw)
    assert 'id="findings"' not in render_report_html(**kw)
