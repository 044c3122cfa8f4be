"""analysis/report.html: the content of report.md as one self-contained page that opens from disk.

Every figure is inlined as a ``data:image/png;base64`` URI, the style sheet is
inline, nothing is fetched from the network. Checks are a table; each check's
violations, fault attributions and details expand under it (``<details>``).
A few lines of inline script mark each figure once the browser decoded it
(``data-rendered="yes|no"`` on the ``<img>``, ``data-figures="ok/total"`` on
``<body>``), which is what the headless-browser test reads.
"""

from __future__ import annotations

import base64
import json
from html import escape
from pathlib import Path
from typing import Any

from testbed.analysis.report import _window_note, findings, fmt as _fmt
from testbed.analysis.timeline import action_rows

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;color:#222;
     padding:0 1em;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em} h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em} td,th{border:1px solid #ddd;padding:.25em .6em;
     vertical-align:top} th{background:#f4f4f4;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:.15em .6em;border-radius:.3em;color:#fff;font-weight:bold}
.pass{background:#2e7d32} .fail{background:#c62828} .warn{color:#a15c00}
code{background:#f4f4f4;padding:0 .25em;border-radius:3px;font-size:.92em}
details{margin:.3em 0 .6em 0} summary{cursor:pointer} pre{background:#f7f7f7;padding:.6em;overflow:auto;font-size:.85em}
figure{margin:1.2em 0} figure img{max-width:100%;border:1px solid #eee} figcaption{color:#555;font-size:.9em}
"""

MARK_SCRIPT = """
<script>
(function(){
  function mark(){
    var imgs=document.querySelectorAll('img.figure'), ok=0;
    imgs.forEach(function(i){var r=i.complete&&i.naturalWidth>0; i.setAttribute('data-rendered',r?'yes':'no'); if(r)ok++;});
    document.body.setAttribute('data-figures', ok+'/'+imgs.length);
  }
  if(document.readyState==='complete'){mark();} else {window.addEventListener('load', mark);}
})();
</script>
"""


def _e(v: Any) -> str:
    return escape(str(v), quote=True)


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _table(head: list[str] | None, rows: list[list[str]], numeric: frozenset[int] | set[int] = frozenset()) -> str:
    h = "".join(f"<th>{_e(c)}</th>" for c in head or [])
    body = "".join("<tr>" + "".join(f"<td class=\"n\">{c}</td>" if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    thead = f"<thead><tr>{h}</tr></thead>" if head else ""
    return f"<table>{thead}<tbody>{body}</tbody></table>"


def _figure(path: Path, caption: str) -> str:
    stem = Path(path).stem
    return (f'<figure id="fig-{_e(stem)}"><img class="figure" alt="{_e(stem)}" src="{data_uri(path)}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


CAPTIONS = {
    "fault_timeline": "The fault schedule (one row per fault; filled: actual window, hatched: planned) "
                      "over the delivered and published rate.",
    "cpu": "CPU used per node (cores, from the nodes' periodic cpu lines) against its share (dashed: its "
           "cpu key, or a throttle in force), on the fault timeline's time axis.",
    "delivered_rate": "Delivered messages per second, fault windows shaded (actual) and hatched (planned).",
    "latency_cdf": "Delivery latency CDF per publisher site \u2192 subscriber site (clock-offset corrected).",
}


def render_report_html(*, run_id: str, plan: dict[str, Any], manifest: dict[str, Any], ingest: dict[str, Any],
                       checks: list[dict[str, Any]], metrics: dict[str, Any], figures: list[Path]) -> str:
    """The page (a string); ``figures`` are PNG paths read now and inlined."""
    versions = manifest.get("versions") or {}
    emulation = manifest.get("emulation") or manifest.get("emulation_mode") or "unknown"
    ok = all(c["passed"] for c in checks)
    P: list[str] = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                    f"<title>testbed run {_e(run_id)}</title>", f"<style>{CSS}</style></head><body>"]
    P.append(f"<h1>Analysis of run <code>{_e(run_id)}</code></h1>")
    P.append(f'<p><span id="result" class="badge {"pass" if ok else "fail"}">{"PASS" if ok else "FAIL"}</span> '
             f"{sum(c['passed'] for c in checks)}/{len(checks)} checks passed</p>")
    if findings(checks):
        P.append('<div id="findings"><p><b>Findings:</b></p><ul>' + "".join(
            f"<li><code>{_e(n)}</code>: {_e(t)}</li>" for n, t in findings(checks)) + "</ul></div>")
    summary = [["topology", _e(plan.get("name", "?"))], ["protocol", _e(plan.get("protocol", "?"))],
               ["provider", _e(manifest.get("provider") or plan.get("provider", "?"))], ["emulation", _e(emulation)],
               ["duration", f"{_fmt(plan.get('duration_s'), 1)} s"],
               ["seed", f"{_e(plan.get('seed', '-'))} (repeat {_e(plan.get('repeat_index', 0))})"]]
    if plan.get("point"):
        summary.append(["sweep point", f"<code>{_e(json.dumps(plan['point'], sort_keys=True))}</code>"])
    P.append(_table(None, [[f"<b>{k}</b>", v] for k, v in summary]))
    if versions:
        P.append("<details><summary>versions</summary>"
                 + _table(["package", "version"], [[_e(k), _e(v)] for k, v in sorted(versions.items())]) + "</details>")
    else:
        P.append("<p>versions: not recorded in the manifest</p>")

    # checks
    P.append('<h2 id="checks">Checks</h2>')
    if checks:
        rows = []
        for c in checks:
            verdict = '<span class="badge pass">PASS</span>' if c["passed"] else '<span class="badge fail">FAIL</span>'
            rows.append([f"<code>{_e(c['name'])}</code>", verdict, _e(c["violations"]), _e(c["attributed"]),
                         _e(c.get("description", ""))])
        P.append(_table(["check", "result", "violations", "attributed to faults", "property"], rows, {2, 3}))
        for c in checks:
            P.append(_check_details(c))
        comp = next((c for c in checks if c["name"] == "completeness"), None)
        if comp:
            d = comp.get("details") or {}
            P.append(f"<p>Completeness: {_e(d.get('expected'))} expected deliveries, {_e(d.get('delivered'))} "
                     f"delivered, {_e(comp['attributed'])} missing inside fault windows, {_e(comp['violations'])} "
                     f"missing outside (settle {_e(d.get('settle_s'))} s, travel margin "
                     f"{_e(d.get('travel_margin_s'))} s, fault margin {_e(d.get('fault_margin_s'))} s).</p>")
    else:
        P.append(f"<p>No checks registered for protocol <code>{_e(plan.get('protocol'))}</code>.</p>")

    # faults
    P.append('<h2 id="faults">Fault timeline (planned vs actual)</h2>')
    by_stem = {Path(f).stem: Path(f) for f in figures}
    if "fault_timeline" in by_stem:
        P.append(_figure(by_stem["fault_timeline"], CAPTIONS["fault_timeline"]))
    if "cpu" in by_stem:  # beside the fault timeline: a throttle's effect lines up with its window
        P.append(_figure(by_stem["cpu"], CAPTIONS["cpu"]))
    rows_a = action_rows(manifest, plan)
    if rows_a:
        rows = []
        for r in rows_a:
            status = r["status"] + (" (injected)" if r.get("injected") else "")
            cls = "" if r["status"] in ("done", "planned") else ' class="warn"'
            err = f"<br><span class=\"warn\">{_e(r['error'])}</span>" if r.get("error") else ""
            rows.append([_e(r["fault"]), _e(r["op"]), _e(", ".join(map(str, r["target"]))), _fmt(r["planned_s"], 3),
                         _fmt(r["actual_s"], 3), _fmt(r["delta_ms"], 1), f"<span{cls}>{_e(status)}</span>{err}",
                         f"<code>{_e(r['source'])}</code>"])
        P.append(_table(["fault", "op", "target", "planned (s)", "actual (s)", "delta (ms)", "status",
                         "fault as written"], rows, {0, 3, 4, 5}))
    else:
        P.append("<p>No faults in this run.</p>")

    # metrics
    P.append('<h2 id="metrics">Metrics</h2>')
    if metrics.get("latency"):
        P.append("<p>Delivery latency (ms, clock-offset corrected):</p>")
        P.append(_table(["publisher site", "subscriber site", "deliveries", "mean", "p50", "p90", "p99", "max"],
                        [[_e(r["pub_site"]), _e(r["sub_site"]), _e(r["count"]), _fmt(r["mean_ms"]), _fmt(r["p50_ms"]),
                          _fmt(r["p90_ms"]), _fmt(r["p99_ms"]), _fmt(r["max_ms"])] for r in metrics["latency"]],
                        {2, 3, 4, 5, 6, 7}))
        P.append(f"<p>Mean delivered rate over the workload: {_fmt(metrics.get('delivered_per_s_mean'))} "
                 f"messages/s.</p>")
    else:
        P.append("<p>No deliveries in this run.</p>")
    if metrics.get("faults"):
        rows = []
        for f in metrics["faults"]:
            ratio = f.get("delivered_per_s_ratio")
            rows.append([_e(f["fault"]), _e("/".join(f["ops"])), _e(f["status"]), _e(f["delivered"]),
                         _fmt(f["delivered_per_s"]), "-" if ratio is None else f"{ratio:.0%}", _e(f["published"]),
                         _e(f["dropped"]), _e(f["missing_attributed"])])
        P.append("<p>Per fault (counts in the 1 s bins the actual window touches; the planned one if it never "
                 "ran):</p>")
        P.append(_table(["fault", "ops", "status", "delivered", "delivered/s", "vs mean", "published", "dropped",
                         "missing (attributed)"], rows, {0, 3, 4, 5, 6, 7, 8}))

    # event logs
    P.append('<h2 id="logs">Event logs</h2>')
    P.append(f"<p>{_e(ingest.get('files', 0))} logs, {_e(ingest.get('lines', 0))} lines, "
             f"{sum((ingest.get('events') or {}).values())} events ingested; {_e(ingest.get('malformed', 0))} "
             f"malformed line(s) skipped; {sum((ingest.get('unknown') or {}).values())} event(s) of unknown "
             f"type.</p>")
    items = [f"<li>malformed: <code>{_e(f)}</code>: {_e(n)} line(s) (a torn last line is expected from a killed "
             f"node)</li>" for f, n in sorted((ingest.get("malformed_by_file") or {}).items())]
    items += [f"<li>unknown event type <code>{_e(ev)}</code>: {_e(n)}</li>"
              for ev, n in sorted((ingest.get("unknown") or {}).items())]
    if ingest.get("unknown_nodes"):
        items.append(f"<li>log lines from processes not in plan.json: {_e(', '.join(ingest['unknown_nodes']))}</li>")
    if ingest.get("t0_source") and ingest["t0_source"] != "manifest":
        items.append(f"<li>time origin: {_e(ingest['t0_source'])}</li>")
    if items:
        P.append("<ul>" + "".join(items) + "</ul>")

    # figures
    P.append('<h2 id="figures">Figures</h2>')
    others = [f for f in figures if Path(f).stem not in ("fault_timeline", "cpu")]
    if others:
        for f in others:
            P.append(_figure(Path(f), CAPTIONS.get(Path(f).stem, Path(f).stem.replace("_", " "))))
    elif not figures:
        P.append("<p>No figures (no deliveries).</p>")
    P.append("<p>Data beside this page: <code>checks.json</code>, <code>metrics.json</code>, <code>ingest.json</code>, "
             "Parquet per event type under <code>parquet/</code>; the same content as text in "
             "<code>report.md</code>.</p>")
    P.append(MARK_SCRIPT)
    P.append("</body></html>")
    return "\n".join(P) + "\n"


def _check_details(c: dict[str, Any]) -> str:
    d = c.get("details") or {}
    parts: list[str] = []
    by_fault = d.get("attributed_by_fault") or {}
    if by_fault:
        parts.append("<p>Missing deliveries attributed to faults (not violations):</p><ul>"
                     + "".join(f"<li>fault #{_e(k)} <code>{_e(v.get('source'))}</code>: {_e(v.get('count'))}"
                               f"{_e(_window_note(v))}</li>"
                               for k, v in by_fault.items()) + "</ul>")
    ex = c.get("examples") or []
    if ex:
        keys = list(dict.fromkeys(k for e in ex for k in e))
        parts.append(f"<p>Violations (first {len(ex)} of {_e(c['violations'])}):</p>"
                     + _table(keys, [[_e(e.get(k, "")) for k in keys] for e in ex]))
    if d.get("unparsable_filters"):
        parts.append("<p>Unreadable filters:</p><ul>"
                     + "".join(f"<li>{_e(m)}</li>" for m in d["unparsable_filters"].values()) + "</ul>")
    rest = {k: v for k, v in d.items() if k not in ("attributed_by_fault", "unparsable_filters")}
    if rest:
        parts.append(f"<pre>{_e(json.dumps(rest, indent=1, default=str))}</pre>")
    if not parts:
        return ""
    n = c["violations"]
    what = f"{n} violation(s)" if n else "details"
    opened = " open" if not c["passed"] else ""
    return (f'<details class="check" id="check-{_e(c["name"])}"{opened}><summary><code>{_e(c["name"])}</code>: '
            f"{_e(what)}{', ' + _e(c['attributed']) + ' attributed to faults' if c['attributed'] else ''}"
            f"</summary>{''.join(parts)}</details>")


__all__ = ["render_report_html", "data_uri"]
