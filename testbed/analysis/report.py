"""analysis/report.md, checks.json and metrics.json from the results of one analysis."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from testbed.analysis.timeline import action_rows


def fmt(v: Any, nd: int = 2) -> str:
    """A table cell's value: ``-`` for none, floats to ``nd`` decimals (report.md and report.html)."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def _cell(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _rejected_warning(rej: dict[str, Any]) -> list[str]:
    """A warning for the top of the report when control requests were refused."""
    if not rej.get("control"):
        return []
    nodes = ", ".join(f"{n} ({d['control']})" for n, d in rej.get("by_node", {}).items() if d.get("control"))
    return [f"> **Warning: {rej['control']} control request(s) or connection(s) were refused** "
            f"(not authenticated with this run's secret, replayed or malformed) at {_cell(nodes)}. "
            "Refused requests change nothing; see *Refused connections* below and `control_provenance`.", ""]


def _rejected_section(rej: dict[str, Any]) -> list[str]:
    L = ["", "## Refused connections", ""]
    if not rej.get("total"):
        return L + ["No connection or control request was refused."]
    chans = sorted({c for d in rej["by_node"].values() for c in d})
    L += ["| node | " + " | ".join(chans) + " | total |", "|---|" + "---:|" * (len(chans) + 1)]
    for n, d in rej["by_node"].items():
        L.append(f"| {_cell(n)} | " + " | ".join(str(d.get(c, 0)) for c in chans) + f" | {sum(d.values())} |")
    L += ["", "By reason: " + ", ".join(f"{_cell(r)} {n}" for r, n in rej.get("reasons", {}).items()) + "."]
    return L


def findings(checks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(check, finding) of every check whose details carry a ``finding``: something the run shows
    that passing checks do not (e.g. clients a protocol lost under faults), for the report's top."""
    return [(c["name"], str((c.get("details") or {})["finding"])) for c in checks
            if (c.get("details") or {}).get("finding")]


def _findings(checks: list[dict[str, Any]]) -> list[str]:
    f = findings(checks)
    return ["**Findings:**", "", *[f"- `{n}`: {_cell(t)}" for n, t in f], ""] if f else []


def _window_note(v: dict[str, Any]) -> str:
    """' (window a-b s, recovered by re-sync, 3 routes)' of an ``attributed_by_fault`` entry."""
    if "window" not in v:
        return ""
    lo, hi = v["window"]
    how = {"resync": "ends when the re-syncs were applied (measured)",
           "resync-sent": "ends at the sent re-syncs + the fault margin (a log without applied re-syncs)",
           "never": "never re-synchronised: open to the end",
           "margin": "ends by the fault margin", "restart": "ends at the node's restart (another fault)"}.get(v.get("recovered"), v.get("recovered"))
    routes = "every route" if v.get("routes") == "all" else f"{v.get('routes')} route(s) touched"
    return f" (window {lo:g}-{hi:g} s, {how}; {routes})"


def render_report(*, run_id: str, plan: dict[str, Any], manifest: dict[str, Any], ingest: dict[str, Any],
                  checks: list[dict[str, Any]], metrics: dict[str, Any], figures: list[Path],
                  out_dir: Path) -> str:
    versions = manifest.get("versions") or {}
    emulation = manifest.get("emulation") or manifest.get("emulation_mode") or "unknown"
    ok = all(c["passed"] for c in checks)
    L: list[str] = [
        f"# Analysis of run `{run_id}`",
        "",
        f"**Result: {'PASS' if ok else 'FAIL'}** ({sum(c['passed'] for c in checks)}/{len(checks)} checks passed)",
        "",
        *_rejected_warning(metrics.get("rejected") or {}),
        *_findings(checks),
        "| | |",
        "|---|---|",
        f"| topology | {_cell(plan.get('name', '?'))} |",
        f"| protocol | {_cell(plan.get('protocol', '?'))} |",
        f"| provider | {_cell(manifest.get('provider') or plan.get('provider', '?'))} |",
        f"| emulation | {_cell(emulation)} |",
        f"| duration | {fmt(plan.get('duration_s'), 1)} s |",
        f"| seed | {_cell(plan.get('seed', '-'))} (repeat {_cell(plan.get('repeat_index', 0))}) |",
    ]
    if plan.get("point"):
        L.append(f"| sweep point | {_cell(json.dumps(plan['point'], sort_keys=True))} |")
    for k, v in sorted(versions.items()):
        L.append(f"| version: {_cell(k)} | {_cell(v)} |")
    if not versions:
        L.append("| versions | not recorded in the manifest |")

    L += ["", "## Event logs", "",
          f"{ingest.get('files', 0)} logs, {ingest.get('lines', 0)} lines, "
          f"{sum((ingest.get('events') or {}).values())} events ingested; "
          f"{ingest.get('malformed', 0)} malformed line(s) skipped; "
          f"{sum((ingest.get('unknown') or {}).values())} event(s) of unknown type.", ""]
    for f, n in sorted((ingest.get("malformed_by_file") or {}).items()):
        L.append(f"- malformed: `{f}`: {n} line(s) (a torn last line is expected from a killed node)")
    for ev, n in sorted((ingest.get("unknown") or {}).items()):
        L.append(f"- unknown event type `{_cell(ev)}`: {n}")
    if ingest.get("unknown_nodes"):
        L.append(f"- log lines from processes not in plan.json: {', '.join(ingest['unknown_nodes'])}")
    if ingest.get("t0_source") and ingest["t0_source"] != "manifest":
        L.append(f"- time origin: {ingest['t0_source']}")

    L += ["", "## Fault timeline (planned vs actual)", ""]
    rows = action_rows(manifest, plan)
    if rows:
        L += ["| fault | op | target | planned (s) | actual (s) | delta (ms) | status | fault as written |",
              "|---:|---|---|---:|---:|---:|---|---|"]
        for r in rows:
            status = r["status"] + (" (injected)" if r.get("injected") else "") + (f": {r['error']}" if r.get("error") else "")
            L.append(f"| {r['fault']} | {_cell(r['op'])} | {_cell(', '.join(map(str, r['target'])))} | "
                     f"{fmt(r['planned_s'], 3)} | {fmt(r['actual_s'], 3)} | {fmt(r['delta_ms'], 1)} | "
                     f"{_cell(status)} | `{_cell(r['source'])}` |")
    else:
        L.append("No faults in this run.")

    L += ["", "## Checks", ""]
    if checks:
        L += ["| check | result | violations | attributed to faults | property |", "|---|---|---:|---:|---|"]
        for c in checks:
            L.append(f"| {c['name']} | {'PASS' if c['passed'] else '**FAIL**'} | {c['violations']} | "
                     f"{c['attributed']} | {_cell(c.get('description', ''))} |")
        for c in checks:
            d = c.get("details") or {}
            by_fault = d.get("attributed_by_fault") or {}
            if by_fault:
                L += ["", f"Missing deliveries of `{c['name']}` attributed to faults (not violations):", ""]
                for k, v in by_fault.items():
                    L.append(f"- fault #{k} `{_cell(v.get('source'))}`: {v['count']}{_window_note(v)}")
            if c.get("examples"):
                L += ["", f"Violations of `{c['name']}` (first {len(c['examples'])}):", ""]
                for e in c["examples"]:
                    L.append("- " + ", ".join(f"{k}={_cell(v)}" for k, v in e.items()))
            if d.get("unparsable_filters"):
                L += ["", f"Unreadable filters in `{c['name']}`:", ""]
                L += [f"- {_cell(msg)}" for msg in d["unparsable_filters"].values()]
        comp = next((c for c in checks if c["name"] == "completeness"), None)
        if comp:
            d = comp["details"]
            margins = ", ".join(f"{label} {d[k]} s" for label, k in (
                ("settle", "settle_s"), ("travel margin", "travel_margin_s"),
                ("fault margin", "fault_margin_s")) if d.get(k) is not None)
            L += ["", f"Completeness: {d.get('expected')} expected deliveries, {d.get('delivered')} delivered, "
                  f"{comp['attributed']} missing inside fault windows, {comp['violations']} missing outside"
                  + (f" ({margins})." if margins else ".")]
    else:
        L.append(f"No checks registered for protocol `{plan.get('protocol')}`.")

    L += _rejected_section(metrics.get("rejected") or {})

    L += ["", "## Metrics", ""]
    if metrics.get("latency"):
        L += ["Delivery latency (ms, clock-offset corrected):", "",
              "| publisher site | subscriber site | deliveries | mean | p50 | p90 | p99 | max |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in metrics["latency"]:
            L.append(f"| {r['pub_site']} | {r['sub_site']} | {r['count']} | {fmt(r['mean_ms'])} | "
                     f"{fmt(r['p50_ms'])} | {fmt(r['p90_ms'])} | {fmt(r['p99_ms'])} | {fmt(r['max_ms'])} |")
        L += ["", f"Mean delivered rate over the workload: {fmt(metrics.get('delivered_per_s_mean'))} messages/s."]
    else:
        L.append("No deliveries in this run.")
    if metrics.get("faults"):
        L += ["", "Per fault (counts in the 1 s bins the actual window touches; the planned one if it never ran):", "",
              "| fault | ops | status | delivered | delivered/s | vs mean | published | dropped | missing (attributed) |",
              "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
        for f in metrics["faults"]:
            ratio = f.get("delivered_per_s_ratio")
            L.append(f"| {f['fault']} | {_cell('/'.join(f['ops']))} | {f['status']} | {f['delivered']} | "
                     f"{fmt(f['delivered_per_s'])} | {'-' if ratio is None else f'{ratio:.0%}'} | "
                     f"{f['published']} | {f['dropped']} | {f['missing_attributed']} |")

    L += ["", "## Figures", ""]
    if figures:
        for p in figures:
            rel = os.path.relpath(p, out_dir)
            L += [f"![{Path(p).stem}]({rel})", ""]
    else:
        L.append("No figures (no deliveries).")
    L += ["", "Data: `checks.json`, `metrics.json`, `ingest.json`, Parquet per event type under `parquet/`."]
    return "\n".join(L) + "\n"


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)
