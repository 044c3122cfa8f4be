"""``reproductions/REPORT.md`` and ``reproductions/index.html`` from every paper's ``result.json``.

Per paper and figure: our figure (with the paper's stated values drawn on it as markers labelled
"paper"), the paper's statements, every claim (paper value, measured mean ± spread over the
seeds, tolerance, verdict), then the history checks, the runs used and the time taken. The head
says what each paper's results come from: its stamp (code version, git commit, machine, load
during the runs, wall time, scale, date; ``testbed.experiments.stamp``).
The HTML page is one self-contained file (figures embedded as data URIs): it opens from disk.
"""

from __future__ import annotations

import base64
import html
import json
import time
from pathlib import Path
from typing import Any

from testbed.experiments.claims import (BY_CONSTRUCTION, FAIL, INFO, INSUFFICIENT, NO_DATA, PASS, add_summaries,
                                        summary)
from testbed.experiments.stamp import stamp_line

VERDICT_TEXT = {PASS: "pass", FAIL: "**FAIL**", INFO: "info", INSUFFICIENT: "**insufficient**",
                NO_DATA: "**no data**", BY_CONSTRUCTION: "by construction"}


NOT_EXPLAINED = "not explained"

RULES = ("`value` = the 95% Student-t interval of the mean over the seeds (shown in brackets) inside the "
         "tolerance band (wholly outside: fail; across an edge or one seed: insufficient); `shape` = holds on "
         "every seed; `comparison` = the difference of the means exceeds the seeds' spread (sum of the sample "
         "standard deviations) on >= 3 seeds (the t-interval of the paired differences shown beside it); "
         "`information` = an absolute number set by the paper's hardware, reported and never judged; "
         "`by construction` = decided by the plan (the parameter or invariant named), never counted as "
         "reproduced. Reproduced = passes of judged claims / judged claims.")


def paper_summary(r: dict[str, Any]) -> dict[str, Any]:
    """The head's counts of one paper's result (recomputed from its claims: an older result.json
    without ``summary`` gets the same numbers)."""
    return summary(r.get("claims") or [])


def summary_line(s: dict[str, Any]) -> str:
    rep = "-" if s.get("reproduced") is None else f"{s[PASS]}/{s['judged']} = {s['reproduced'] * 100:.0f}%"
    return (f"judged {s['judged']}: {s[PASS]} pass, {s[FAIL]} fail, {s[INSUFFICIENT]} insufficient, "
            f"{s[NO_DATA]} no data; {s[BY_CONSTRUCTION]} by construction; {s[INFO]} information; "
            f"reproduced {rep}")


def _m(meas: dict[str, Any], nd: int = 2) -> str:
    mean, spread, n = meas.get("mean"), meas.get("spread"), meas.get("n", 0)
    if mean is None or not n:
        return "-"
    s = f"{mean:.{nd}f}"
    ci = meas.get("ci")
    if ci and ci[0] is not None and ci[1] is not None:
        s += f" [{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"
    elif ci:  # one seed: an interval without bounds
        s += " [-inf, inf]"
    if n > 1 and spread is not None:
        s += f" ± {spread:.{nd}f}"
    return f"{s} (n={n})"


def why_text(c: dict[str, Any]) -> str:
    """A failed (insufficient, no data) claim's explanation, or what it lacks."""
    if c.get("explanation"):
        return str(c["explanation"])
    s = NOT_EXPLAINED
    reason = str(c.get("reason") or "")
    if c.get("verdict") == INSUFFICIENT and reason.startswith("insufficient:"):
        # made insufficient by its paper's rule (e.g. no point where both shapes keep up): the rule
        # and what it found in this reproduction, then whether the cause was measured
        detail = {k: v for k, v in ((c.get("measured") or {}).get("detail") or {}).items() if k != "what"}
        found = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in detail.items())
        s = f"{reason[len('insufficient:'):].strip()}{f' ({found})' if found else ''}; the cause: {NOT_EXPLAINED}"
    if c.get("not_measured"):
        s += f" (its cause was not measured in this reproduction: {', '.join(map(str, c['not_measured']))})"
    if c.get("note"):
        s += f" (an unmeasured note, not evidence: {c['note']})"
    return s


def _pv(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {x}" for k, x in v.items())
    return str(v)


def _cell(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def load_results(out_dir: Path) -> list[dict[str, Any]]:
    res = []
    for p in sorted(Path(out_dir).glob("*/result.json")):
        try:
            res.append(json.loads(p.read_text()))
        except ValueError:
            continue
    return res


def predicted_for(result: dict[str, Any], figure: int) -> list[dict[str, Any]]:
    """The measured-vs-predicted rows of one figure (``numbers.predicted``, written by a paper's
    ``analyze`` from its predictor): each has series, quantity, and per-seed measured / predicted."""
    return [x for x in ((result.get("numbers") or {}).get("predicted") or []) if x.get("figure") == figure]


def _stats(xs: list[Any]) -> dict[str, Any]:
    from testbed.experiments.claims import mean, spread

    v = [x for x in xs if x is not None]
    return {"mean": mean(v) if v else None, "spread": spread(v) if v else None, "n": len(v)}


def check_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per check: runs passed / runs, violations, the failing runs (every run's row: checks.json)."""
    by: dict[str, dict[str, Any]] = {}
    for c in result.get("checks") or []:
        a = by.setdefault(str(c.get("check")), {"check": c.get("check"), "runs": 0, "passed": 0,
                                                "violations": 0, "failing": []})
        a["runs"] += 1
        a["violations"] += int(c.get("violations") or 0)
        if c.get("passed"):
            a["passed"] += 1
        else:
            a["failing"].append(str(c.get("run")))
    return list(by.values())


LOAD_POINTS_LISTED = 8  # a figure's points whose load is listed one by one; beyond, the extremes


def load_text(load: dict[str, Any] | None) -> tuple[str, str | None] | None:
    """A figure's ``load`` (runner.figure_loads) as (the points' loads, the warning when uneven)."""
    if not load or not load.get("points"):
        return None
    def one(p: dict[str, Any]) -> str:
        return (f"{p['grid']} {p['point']}: {p['load_mean']:.2f}"
                + (f" (max {p['load_max']:.2f}, {p['runs']} runs)" if p["runs"] > 1 else " (1 run)"))

    ps = load["points"]
    if len(ps) <= LOAD_POINTS_LISTED:
        pts = "; ".join(one(p) for p in ps)
    else:  # a figure of many points: its extremes (result.json has every point)
        by = sorted(ps, key=lambda p: p["load_mean"])
        k = LOAD_POINTS_LISTED // 2
        pts = (f"{len(ps)} points, the {k} least loaded: " + "; ".join(one(p) for p in by[:k])
               + f"; the {k} most: " + "; ".join(one(p) for p in by[-k:]))
    text = (f"Load while its points were measured (the 1-minute load average when each run's workload ended, "
            f"{load['cores']} cores): {pts}.")
    warn = None
    if load.get("uneven"):
        warn = (f"Measured at uneven loads ({load['lowest']:.2f} to {load['highest']:.2f} on {load['cores']} "
                "cores): a comparison between these points includes the effect of load, which no claim here "
                "corrects (testbed/experiments/runner.py, UNEVEN_LOAD_CORES).")
    return text, warn


def paper_markdown(r: dict[str, Any], link_prefix: str = "", level: int = 1, runs: bool = True) -> str:
    """One paper's section (``link_prefix``: path from the markdown file to ``<out>/<paper>/``;
    ``runs=False``: the runs are counted, not listed (a published reference ships without them))."""
    h = "#" * level
    claims = r.get("claims") or []
    L = [f"{h} {r['title']} (`{r['paper']}`, scale `{r['scale']}`)", ""]
    if level == 1:  # a page of its own (report.md, a published REPORT.md): the stamp at its head
        L += [f"Stamp: {stamp_line(r.get('stamp'))}.", ""]
    t = r.get("timings") or {}
    st = r.get("stats") or {}
    L.append(f"Figures {', '.join(map(str, r['figures']))}. Claims: {summary_line(paper_summary(r))}. "
             f"Runs: {st.get('points', 0)} ({st.get('ran', 0)} made now, {st.get('reused', 0)} reused). "
             f"Time: {t.get('total_s', '-')} s (runs {t.get('runs_s', '-')} s, analysis {t.get('analysis_s', '-')} s)."
             + (f" Points filter: `{json.dumps(r['points_filter'])}`." if r.get("points_filter") else ""))
    if r.get("notes"):
        L.append(f"Method and deviations: {r['notes']}.")
    L.append("")
    for f in r.get("figure_info") or []:
        L += [f"{h}# Fig {f['number']}: {f['title']}", "", f"Paper: {f['paper']}", ""]
        if f.get("image"):
            L += [f"![Fig {f['number']}]({link_prefix}{f['image']})", ""]
        else:
            L += ["(no figure drawn: no data)", ""]
        for extra in f.get("more_images") or []:
            L += [f"![Fig {f['number']} ({Path(extra).stem})]({link_prefix}{extra})", ""]
        lt = load_text(f.get("load"))
        if lt:
            L += ([f"**{lt[1]}**", ""] if lt[1] else []) + [lt[0], ""]
        fc = [c for c in claims if c["figure"] == f["number"]]
        if fc:
            L += ["| claim (paper) | kind | paper value | measured (mean [interval] ± spread, seeds) | tolerance | verdict |",
                  "|---|---|---|---|---|---|"]
            for c in fc:
                why = (f" — {c['reason']}" if c.get("reason") and c["kind"] in ("information", "construction")
                       else "")
                L.append(f"| {_cell(c['sentence'])} | {c['kind']} | {_cell(_pv(c.get('paper_value')))} | "
                         f"{_m(c['measured'])} | {_cell(c.get('tolerance') or '-')} | "
                         f"{VERDICT_TEXT[c['verdict']]}{_cell(why)} |")
            L.append("")
            failed = [c for c in fc if "explanation" in c]
            if failed:
                L += ["Why these claims do not hold here:", ""]
                L += [f"- *{c['sentence']}* ({c['verdict']}): {why_text(c)}" for c in failed]
                L.append("")
        pr = predicted_for(r, f["number"])
        if pr:
            L += ["Measured against the predictor (`testbed predict`: the plan alone, no queueing):", "",
                  "| series | quantity | measured (mean ± spread, seeds) | predicted (mean ± spread, seeds) |",
                  "|---|---|---|---|"]
            for x in pr:
                L.append(f"| {_cell(x['series'])} | {_cell(x['quantity'])} | {_m(_stats(x['measured']))} | "
                         f"{_m(_stats(x['predicted']))} |")
            L.append("")
    rows = check_rows(r)
    L += [f"{h}# History checks", ""]
    if rows:
        L += ["| check | runs passed | violations | failing runs |", "|---|---|---|---|"]
        for c in rows:
            ok = c["passed"] == c["runs"]
            L.append(f"| {c['check']} | {c['passed']}/{c['runs']}{'' if ok else ' **FAIL**'} | {c['violations']} | "
                     f"{_cell(', '.join(c['failing']) or '-')} |")
    else:
        L.append("(none)")
    numbers = {k: v for k, v in (r.get("numbers") or {}).items() if k != "predicted"}
    if numbers:
        L += ["", f"{h}# Numbers", "", "```json", json.dumps(numbers, indent=1, default=str), "```"]
    L += ["", f"{h}# Runs used", ""]
    if not runs:
        made = [x for x in r.get("runs") or [] if x.get("run")]
        return "\n".join(L + [f"{len(r.get('runs') or [])} entries ({len(made)} runs, the rest computed); the runs "
                                "are not shipped with this page (reproduce the paper to have them)."]) + "\n"
    for x in r.get("runs") or []:
        L.append(f"- `{x['name']}`: {x.get('run') or 'computed'}{' (reused)' if x.get('reused') else ''}")
    return "\n".join(L) + "\n"


def coverage_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a page covers: per paper, its scale, figures, when it was reproduced and how long it
    took (a page may mix an hour-old reproduction of one paper with a fresh one of another)."""
    return [{"paper": r["paper"], "scale": r.get("scale"), "figures": r.get("figures") or [],
             "reproduced": r.get("created") or "unknown", "wall_s": (r.get("timings") or {}).get("total_s"),
             "points_filter": r.get("points_filter") or {}, "stamp": r.get("stamp")} for r in results]


def _stamp_cells(s: dict[str, Any] | None) -> tuple[str, str, str]:
    """(code version, commit, load during the runs) of a stamp, for the coverage table."""
    if not s:
        return "-", "-", "-"
    g = s.get("git") or {}
    commit = (g.get("commit") or "-")[:12] + (" +changes" if g.get("dirty") else "")
    ld = s.get("load") or {}
    cores = (s.get("machine") or {}).get("cores")
    load = (f"{ld['load_1m_max']:.2f} max, {ld['load_1m_mean']:.2f} mean ({ld['runs']} runs, {cores} cores)"
            if ld.get("runs") and ld.get("load_1m_max") is not None else "no runs")
    return str(s.get("code_version") or "-"), commit, load


def machine_lines(results: list[dict[str, Any]]) -> list[str]:
    """One line per distinct machine the papers were reproduced on, with the papers."""
    by: dict[str, list[str]] = {}
    for r in results:
        m = (r.get("stamp") or {}).get("machine")
        if m:
            key = (f"{m.get('cores')} cores, {m.get('memory_gib')} GiB, {m.get('cpu')}, {m.get('os')}, "
                   f"Python {m.get('python')}, Java {m.get('java') or '-'}, Spark {m.get('spark') or '-'}")
            by.setdefault(key, []).append(r["paper"])
    return [f"{k} ({', '.join(v)})" for k, v in by.items()]


def _coverage_md(results: list[dict[str, Any]]) -> list[str]:
    L = ["| paper | scale | figures | reproduced (UTC) | wall time | code version | git commit | "
         "1-min load during the runs |", "|---|---|---|---|---|---|---|---|"]
    for c in coverage_rows(results):
        flt = f" (points {json.dumps(c['points_filter'])})" if c["points_filter"] else ""
        wall = f"{c['wall_s']:.0f} s" if isinstance(c["wall_s"], (int, float)) else "-"
        code, commit, load = _stamp_cells(c["stamp"])
        L.append(f"| {c['paper']} | {c['scale']} | {', '.join(map(str, c['figures']))}{_cell(flt)} | "
                 f"{c['reproduced']} | {wall} | {code} | {commit} | {load} |")
    L += [""] + [f"Machine: {x}." for x in machine_lines(results)]
    return L + ["", "Paths are relative to this directory.", ""]


def write_markdown(out_dir: Path, results: list[dict[str, Any]]) -> Path:
    L = ["# Reproductions", "",
         f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `testbed reproduce`. "
         f"Claims are judged from the runs' logs: {RULES} The same page with the figures embedded: "
         "`index.html`.", "", "| paper | judged | pass | fail | insufficient | no data | by construction | "
         "information | reproduced |", "|---|---|---|---|---|---|---|---|---|"]
    sums = [(r["paper"], paper_summary(r)) for r in results]
    for name, s in [*sums, ("**overall**", add_summaries(s for _, s in sums))]:
        rep = "-" if s["reproduced"] is None else f"{s[PASS]}/{s['judged']} = {s['reproduced'] * 100:.0f}%"
        L.append(f"| {name} | {s['judged']} | {s[PASS]} | {s[FAIL]} | {s[INSUFFICIENT]} | {s[NO_DATA]} | "
                 f"{s[BY_CONSTRUCTION]} | {s[INFO]} | {rep} |")
    L += ["", "This page covers:", ""]
    L += _coverage_md(results)
    for r in results:
        L.append(paper_markdown(r, link_prefix=f"{r['paper']}/", level=2))
    p = Path(out_dir) / "REPORT.md"
    p.write_text("\n".join(L))
    return p


# ------------------------------------------------------------------------------ HTML
_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:14px}
td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}
th{background:#f3f3f3}.pass{color:#070}.fail,.insufficient,.nodata{color:#b00;font-weight:bold}
.info,.byconstruction{color:#555}.fig{display:flex;gap:1.5em;align-items:flex-start;flex-wrap:wrap}
.fig img{max-width:640px;border:1px solid #ddd}.paper{max-width:480px}
code{background:#f6f6f6}.warn{color:#a60}.load{color:#555}
"""

_SCRIPT = """
function tbMarkReady(){
  var imgs=Array.prototype.slice.call(document.querySelectorAll('img.figure'));
  var ok=imgs.filter(function(i){return i.complete&&i.naturalWidth>0;});
  var m=document.getElementById('figures-status');
  if(ok.length===imgs.length){m.setAttribute('data-ready','yes');}
  m.setAttribute('data-decoded',String(ok.length));m.setAttribute('data-total',String(imgs.length));
}
window.addEventListener('load',tbMarkReady);
"""


def _data_uri(path: Path) -> str | None:
    try:
        return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    except OSError:
        return None


def paper_html(out_dir: Path, r: dict[str, Any]) -> str:
    e = html.escape
    claims = r.get("claims") or []
    t = r.get("timings") or {}
    st = r.get("stats") or {}
    H = [f"<section id='{e(r['paper'])}'><h2>{e(r['title'])} (<code>{e(r['paper'])}</code>, "
         f"scale <code>{e(r['scale'])}</code>)</h2>",
         f"<p class='summary'>Claims: {e(summary_line(paper_summary(r)))}.</p>",
         f"<p>Runs: {st.get('points', 0)} ({st.get('ran', 0)} made, {st.get('reused', 0)} reused). "
         f"Time: {t.get('total_s', '-')} s (runs {t.get('runs_s', '-')} s, analysis {t.get('analysis_s', '-')} s)."
         + (f" Method and deviations: {e(r['notes'])}." if r.get("notes") else "") + "</p>"]
    for f in r.get("figure_info") or []:
        H.append(f"<h3>Fig {f['number']}: {e(f['title'])}</h3><div class='fig'>")
        uri = _data_uri(Path(out_dir) / r["paper"] / f["image"]) if f.get("image") else None
        if uri:
            H.append(f"<img class='figure' id='{e(r['paper'])}-fig{f['number']}' alt='Fig {f['number']}' "
                     f"src='{uri}'>")
        else:
            H.append("<p><em>no figure drawn (no data)</em></p>")
        for extra in f.get("more_images") or []:
            xuri = _data_uri(Path(out_dir) / r["paper"] / extra)
            if xuri:
                H.append(f"<img class='figure' id='{e(r['paper'])}-{e(Path(extra).stem)}' "
                         f"alt='Fig {f['number']} ({e(Path(extra).stem)})' src='{xuri}'>")
        refs = "".join(f"<li>{e(_ref_text(x))}</li>" for x in f.get("references") or [])
        H.append(f"<div class='paper'><p><b>Paper:</b> {e(f['paper'])}</p>"
                 + (f"<p>Drawn as “paper” markers:</p><ul>{refs}</ul>" if refs else "") + "</div></div>")
        lt = load_text(f.get("load"))
        if lt:
            if lt[1]:
                H.append(f"<p class='warn'><b>{e(lt[1])}</b></p>")
            H.append(f"<p class='load'><small>{e(lt[0])}</small></p>")
        fc = [c for c in claims if c["figure"] == f["number"]]
        if fc:
            H.append("<table><tr><th>claim (paper)</th><th>kind</th><th>paper value</th>"
                     "<th>measured (mean [interval] ± spread, seeds)</th><th>tolerance</th><th>verdict</th></tr>")
            for c in fc:
                cls = c["verdict"].replace(" ", "")
                reason = f"<br><small>{e(c['reason'])}</small>" if c.get("reason") else ""
                H.append(f"<tr><td>{e(c['sentence'])}<br><small>{e(c.get('judged') or '')}</small></td>"
                         f"<td>{e(c['kind'])}</td><td>{e(_pv(c.get('paper_value')))}</td>"
                         f"<td>{e(_m(c['measured']))}</td><td>{e(c.get('tolerance') or '-')}{reason}</td>"
                         f"<td class='{cls}'>{e(c['verdict'])}</td></tr>")
            H.append("</table>")
            failed = [c for c in fc if "explanation" in c]
            if failed:
                H.append("<p>Why these claims do not hold here:</p><ul class='why'>")
                H += [f"<li><em>{e(c['sentence'])}</em> ({e(c['verdict'])}): "
                      + (e(c["explanation"]) if c.get("explanation") else f"<strong>{e(why_text(c))}</strong>")
                      + "</li>" for c in failed]
                H.append("</ul>")
        pr = predicted_for(r, f["number"])
        if pr:
            H.append("<p>Measured against the predictor (<code>testbed predict</code>: the plan alone, no "
                     "queueing):</p><table class='predicted'><tr><th>series</th><th>quantity</th>"
                     "<th>measured (mean ± spread, seeds)</th><th>predicted (mean ± spread, seeds)</th></tr>")
            for x in pr:
                H.append(f"<tr><td>{e(x['series'])}</td><td>{e(x['quantity'])}</td>"
                         f"<td>{e(_m(_stats(x['measured'])))}</td><td>{e(_m(_stats(x['predicted'])))}</td></tr>")
            H.append("</table>")
    H.append("<h3>History checks</h3>")
    rows = check_rows(r)
    if rows:
        H.append("<table><tr><th>check</th><th>runs passed</th><th>violations</th><th>failing runs</th></tr>")
        for c in rows:
            ok = c["passed"] == c["runs"]
            H.append(f"<tr><td>{e(str(c['check']))}</td><td class='{'pass' if ok else 'fail'}'>{c['passed']}/{c['runs']}"
                     f"</td><td>{c['violations']}</td><td>{e(', '.join(c['failing']) or '-')}</td></tr>")
        H.append("</table>")
    else:
        H.append("<p>(none)</p>")
    H.append("<details><summary>Runs used</summary><ul>")
    for x in r.get("runs") or []:
        H.append(f"<li><code>{e(x['name'])}</code>: {e(str(x.get('run') or 'computed'))}"
                 f"{' (reused)' if x.get('reused') else ''}</li>")
    H.append("</ul></details></section>")
    return "\n".join(H)


def _ref_text(x: dict[str, Any]) -> str:
    where = f"at x={x['x']:g}" if x.get("x") is not None else "line"
    s = f"{x['y']:g} ({where}"
    if x.get("series"):
        s += f", {x['series']}"
    s += ")"
    return s + (f": {x['note']}" if x.get("note") else "")


def _coverage_html(results: list[dict[str, Any]]) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(c['paper'])}</td><td>{e(str(c['scale']))}</td><td>{e(', '.join(map(str, c['figures'])))}"
        + (f" (points {e(json.dumps(c['points_filter']))})" if c["points_filter"] else "")
        + f"</td><td>{e(c['reproduced'])}</td><td>"
        + (f"{c['wall_s']:.0f} s" if isinstance(c["wall_s"], (int, float)) else "-") + "</td>"
        + "".join(f"<td>{e(x)}</td>" for x in _stamp_cells(c["stamp"])) + "</tr>"
        for c in coverage_rows(results))
    machines = "".join(f"<p>Machine: {e(x)}.</p>" for x in machine_lines(results))
    return ("<p>This page covers:</p><table class='coverage'><tr><th>paper</th><th>scale</th><th>figures</th>"
            "<th>reproduced (UTC)</th><th>wall time</th><th>code version</th><th>git commit</th>"
            f"<th>1-min load during the runs</th></tr>{rows}</table>{machines}"
            "<p><small>Paths are relative to this page's directory.</small></p>")


def write_html(out_dir: Path, results: list[dict[str, Any]]) -> Path:
    body = "\n".join(paper_html(out_dir, r) for r in results)
    e = html.escape
    sums = [(r["paper"], paper_summary(r)) for r in results]
    head = ("<table class='summary'><tr><th>paper</th><th>judged</th><th>pass</th><th>fail</th><th>insufficient</th>"
            "<th>no data</th><th>by construction</th><th>information</th><th>reproduced</th></tr>")
    for name, s in [*sums, ("overall", add_summaries(s for _, s in sums))]:
        rep = "-" if s["reproduced"] is None else f"{s[PASS]}/{s['judged']} = {s['reproduced'] * 100:.0f}%"
        head += (f"<tr><td>{e(name)}</td><td>{s['judged']}</td><td>{s[PASS]}</td><td>{s[FAIL]}</td>"
                 f"<td>{s[INSUFFICIENT]}</td><td>{s[NO_DATA]}</td><td>{s[BY_CONSTRUCTION]}</td><td>{s[INFO]}</td>"
                 f"<td>{rep}</td></tr>")
    head += "</table>"
    toc = " · ".join(f"<a href='#{html.escape(r['paper'])}'>{html.escape(r['paper'])}</a>" for r in results)
    page = (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>testbed reproductions</title>"
            f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body>"
            f"<h1>Reproductions</h1><p>{toc}</p>{head}{_coverage_html(results)}"
            f"<p>Verdicts: {html.escape(RULES.replace('`', ''))} Markers labelled “paper” on a figure "
            "are the numbers the paper states.</p>"
            f"<div id='figures-status' data-ready='no'></div>{body}</body></html>")
    p = Path(out_dir) / "index.html"
    p.write_text(page)
    return p


def write_all(out_dir: Path) -> tuple[Path, Path]:
    results = load_results(out_dir)
    return write_markdown(out_dir, results), write_html(out_dir, results)
