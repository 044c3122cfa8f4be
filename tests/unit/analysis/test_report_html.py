"""report.html and the fault-timeline figure from analysis results (no Spark: dicts in, page out)."""

from __future__ import annotations

import base64
import re

from testbed.analysis.gantt import fault_label, fault_timeline
from testbed.analysis.report_html import render_report_html

PLAN = {"name": "t", "protocol": "pubsub", "provider": "local", "duration_s": 10.0, "seed": 1, "actions": []}
MANIFEST = {"provider": "local", "emulation": "userspace", "versions": {"testbed": "0.1.0"},
            "timeline": [{"fault": 0, "op": "crash", "target": ["b1"], "planned_s": 2.0, "actual_s": 2.004,
                          "status": "done", "source": "{at: 2s, crash: b1}", "window": [2.0, 10.0]}]}
INGEST = {"files": 2, "lines": 10, "events": {"deliver": 5}, "malformed": 0, "unknown": {}}
FAULT = {"fault": 0, "source": "{at: 2s, crash: b1}", "ops": ["crash"], "targets": ["b1"], "status": "done",
         "planned": [2.0, 10.0], "actual": [2.004, 10.0], "delivered": 3, "published": 9, "dropped": 0,
         "delivered_per_s": 0.375, "delivered_per_s_ratio": 0.2, "missing_attributed": 4}
METRICS = {"latency": [], "rate": {"second": list(range(10)), "delivered": [5] * 2 + [0] * 8,
                                   "published": [5] * 10, "bin_s": 1.0}, "faults": [FAULT]}


def check(name, passed, violations=0, examples=(), **details):
    return {"name": name, "passed": passed, "violations": violations, "attributed": 0, "examples": list(examples),
            "description": f"property of {name}", "details": details}


def page(checks, figures=()):
    return render_report_html(run_id="run-1", plan=PLAN, manifest=MANIFEST, ingest=INGEST, checks=checks,
                              metrics=METRICS, figures=list(figures))


def test_verdict_checks_table_and_expandable_violations():
    html = page([check("fifo", True), check("no_duplicates", False, 1, [{"client": "c-0", "deliveries": 2}])])
    assert '<span id="result" class="badge fail">FAIL</span> 1/2 checks passed' in html
    assert re.search(r"<td><code>fifo</code></td><td><span class=\"badge pass\">PASS</span></td>", html)
    det = re.search(r'<details class="check" id="check-no_duplicates" open>(.*?)</details>', html, re.S).group(1)
    assert "Violations (first 1 of 1)" in det and "<td>c-0</td>" in det
    assert page([check("fifo", True)]).count('class="badge pass">PASS</span> 1/1') == 1


def test_text_from_the_logs_is_escaped():
    html = page([check("filter_match", False, 1, [{"filter": "<script>alert(1)</script>", "x": 'a"b'}])])
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "a&quot;b" in html
    assert html.count("<script>") == 1  # only the page's own figure-marking script


def test_figures_are_inlined_and_the_fault_timeline_sits_in_the_faults_section(tmp_path):
    tl = fault_timeline(METRICS, tmp_path / "fault_timeline.png", 10.0)
    other = tmp_path / "latency_cdf.png"
    other.write_bytes(tl.read_bytes())
    html = page([check("fifo", True)], [other, tl])
    uris = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert [base64.b64decode(u) for u in uris] == [tl.read_bytes(), other.read_bytes()]
    faults = html.split('id="faults"')[1].split("<h2")[0]
    assert 'id="fig-fault_timeline"' in faults and "{at: 2s, crash: b1}" in faults and "2.004" in faults
    assert 'id="fig-latency_cdf"' in html.split('id="figures"')[1]


def test_fault_timeline_figure_only_with_faults_and_a_rate(tmp_path):
    out = tmp_path / "f.png"
    assert fault_timeline({**METRICS, "faults": []}, out) is None
    assert fault_timeline({**METRICS, "rate": {}}, out) is None
    assert not out.exists()
    assert fault_timeline(METRICS, out) == out and out.read_bytes()[:4] == b"\x89PNG"
    assert fault_label(FAULT) == "#0 crash b1"
    assert fault_label({**FAULT, "ops": ["stall", "unstall"], "targets": ["b" * 40]}).endswith("...")
