"""``testbed`` command line: parse arguments, call ``testbed.api``, map errors to exit codes.

Every expected failure is a ``TestbedError`` printed as one line (one line per
problem for topology files) without a traceback; ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import os
import sys

from testbed import __version__
from testbed.errors import TestbedError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="testbed", description="Declarative testbed for pub/sub protocol research.")
    p.add_argument("--version", action="version", version=f"testbed {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--runs-dir", help="where run directories live (default ./runs or $TESTBED_RUNS)")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def topo(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("file", help="topology YAML file")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a template variable (repeatable)")
        sp.add_argument("--provider", choices=["local", "docker", "ansible"], help="override the file's provider")
        sp.add_argument("--accept-unknown-host-keys", action="store_true",
                        help="docker over ssh://: accept engine host keys missing from known_hosts "
                             "(kept in memory only; default: refuse)")

    sp = sub.add_parser("validate", help="check a topology file and print the resolved plan")
    topo(sp)
    sp.add_argument("--json", action="store_true", help="one JSON document on stdout (shape: docs/cli.md)")
    sp = sub.add_parser("predict", help="what every plan of a topology predicts, from the plan alone (no nodes "
                                        "run), for protocols with a predictor (its analysis' predict.py: e.g. "
                                        "the load per server and latencies the plan implies)")
    sp.add_argument("file", help="topology YAML file")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a template variable (repeatable)")
    sp.add_argument("--json", action="store_true", help="one JSON object per plan, one per line")
    sp = sub.add_parser("graph", help="draw a topology with Graphviz: sites, nodes, clients, links; --at: "
                                      "its state at that point of the fault schedule")
    sp.add_argument("file", help="topology YAML file")
    sp.add_argument("-o", "--output", metavar="FILE", help="FILE.png|.svg|.pdf|.dot (default <name>.png; - prints DOT)")
    sp.add_argument("--at", metavar="TIME", help="e.g. 12s: crashed nodes greyed, cut links dashed at that time")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a template variable (repeatable)")
    sp = sub.add_parser("hosts", help="ansible: reach and prepare a topology's hosts, show what each has and "
                                      "what a run would use (containers or processes, link emulation)")
    sp.add_argument("file", help="topology YAML file")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a template variable (repeatable)")
    sp.add_argument("--json", action="store_true")
    sp = sub.add_parser("up", help="start a topology and return (a background controller drives it)")
    topo(sp)
    sp.add_argument("--no-schedule", action="store_true", help="bring the topology up idle: no workload, no faults")
    sp.add_argument("--json", action="store_true", help="one JSON document on stdout (shape: docs/cli.md)")
    sp = sub.add_parser("run", help="the whole experiment: up, workload + faults, collect, down, analyse")
    topo(sp)
    sp.add_argument("--no-analyze", action="store_true", help="skip the Spark analysis")
    _spark_args(sp)
    sp.add_argument("--json", action="store_true", help="one JSON document on stdout (shape: docs/cli.md)")
    sp = sub.add_parser("down", help="stop a run (default: the latest active one); idempotent")
    sp.add_argument("run", nargs="?", help="run id or directory")
    sp.add_argument("--all", action="store_true", help="stop every active run")
    sp = sub.add_parser("status", help="nodes, faults fired and the next one due")
    sp.add_argument("run", nargs="?")
    sp.add_argument("--json", action="store_true")
    sp = sub.add_parser("logs", help="print a node's event log")
    sp.add_argument("node")
    sp.add_argument("--run")
    sp.add_argument("-f", "--follow", action="store_true")
    sp = sub.add_parser("inject", help="inject a fault now, e.g. '{crash: b2}' or '{cut: [a, b], for: 5s}', or a "
                        "protocol's schedule action, e.g. '{move: {client: m-0, to: b6}}'")
    sp.add_argument("fault")
    sp.add_argument("--run")
    sp = sub.add_parser("analyze", help="Spark: ingest runs' logs, check, plot, report (several runs: one session)")
    sp.add_argument("run_dir", nargs="+")
    _spark_args(sp)
    sp.add_argument("--reparse", action="store_true", help="parse the logs again even if the stored Parquet is current")
    sub.add_parser("wipe", help="remove everything testbed ever started here (processes, containers, networks)")
    sp = sub.add_parser("reproduce", help="re-run a paper's experiments and regenerate its figures")
    from testbed.experiments import paper_names

    sp.add_argument("protocol", nargs="+", choices=["all", *paper_names()],
                    metavar="{all|" + "|".join(paper_names()) + "}",
                    help="a paper (the experiments of a protocol: testbed/protocols/<p>/experiments.py, or a plugin's "
                         "EXPERIMENTS module), several (their runs scheduled together), or all of them")
    sp.add_argument("--scale", choices=["quick", "paper"], default="quick")
    sp.add_argument("--fig", type=int, action="append", help="a figure number (repeatable; default all)")
    sp.add_argument("--points", help="only the points matching key=value[,key=value] (e.g. rate=500)")
    sp.add_argument("--out", default="reproductions", help="output directory (REPORT.md, index.html, <paper>/)")
    sp.add_argument("--provider", choices=["local", "docker", "ansible"])
    sp.add_argument("--jobs", type=int, metavar="J",
                    help="runs made at a time, at most (in all and per paper; default: each paper's own, "
                         "docs/experiments.md)")
    sp.add_argument("--cpu-budget", type=float, metavar="CORES",
                    help="cores the runs that share the machine may keep busy together (default: the machine's); "
                         "runs of papers marked alone always run with nothing beside them")
    sp.add_argument("--json", action="store_true", help="the claims and their verdicts as one JSON document "
                                                        "on stdout (shape: docs/cli.md); exit 3 if a claim failed")
    sp.add_argument("--compare", metavar="DIR", help="then compare the claims with a reference (a reproduction "
                                                     "directory or a paper's in one, e.g. docs/results/<paper>) "
                                                     "as `testbed compare DIR OUT` does; exit 3 on a change")
    sp.add_argument("--publish", metavar="DIR", help="then write each paper's small set (REPORT.md, claims.json, "
                                                     "figures/*.png) to DIR/<paper>/, e.g. docs/results")
    _spark_args(sp)
    sp = sub.add_parser("compare", help="what changed between two reproductions: verdict flips, values moved beyond "
                                        "their intervals, claims only in one (exit 3 on a change)")
    sp.add_argument("a", metavar="A", help="the reference: a reproduction directory or a paper's directory in one "
                                           "(e.g. docs/results/<paper>)")
    sp.add_argument("b", metavar="B", help="the reproduction compared with it (same kinds of directory)")
    sp.add_argument("--changed", action="store_true", help="list only the claims that changed")
    sp.add_argument("--json", action="store_true", help="one JSON document on stdout (shape: docs/cli.md)")
    sp = sub.add_parser("explore", help="random fault schedules and topology variants, checked; a failing case "
                                        "shrunk to a minimal topology file (docs/explore.md)")
    sp.add_argument("file", nargs="?", help="topology YAML file (omit with --resume)")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a template variable (repeatable)")
    how = sp.add_mutually_exclusive_group()
    how.add_argument("--runs", type=int, metavar="N", help="cases to draw (default 10)")
    how.add_argument("--budget", metavar="TIME", help="draw cases until this much time is spent, e.g. 30m")
    sp.add_argument("--seed", type=int, help="the exploration's seed (default: drawn, and printed)")
    sp.add_argument("--faults", metavar="KINDS", help="fault kinds to draw: crash,stall,pause,cut,partition,set_link,"
                                                      "throttle (default all but throttle)")
    sp.add_argument("--vary", metavar="KINDS", help="topology variants: links,placement,attach,counts (default none)")
    sp.add_argument("--max-faults", type=int, default=4, metavar="N", help="faults per case: 1..N (default 4)")
    sp.add_argument("--shrink-runs", type=int, default=40, metavar="N", help="runs the shrinker may spend per "
                                                                            "property (default 40)")
    sp.add_argument("--first", action="store_true", help="stop drawing cases after the first violation is shrunk")
    sp.add_argument("--provider", choices=["local", "docker", "ansible"], help="override the file's provider")
    sp.add_argument("--jobs", type=int, default=1, metavar="J", help="cases run at a time (default 1)")
    sp.add_argument("--out", default="explorations", help="where explorations live (default ./explorations)")
    sp.add_argument("--resume", metavar="ID", help="continue an exploration (its id or directory)")
    sp.add_argument("--json", action="store_true", help="the summary as one JSON document on stdout; exit 3 on a "
                                                        "violation")
    _spark_args(sp)
    sp = sub.add_parser("completion", help="print the shell completion script: source <(testbed completion bash)")
    sp.add_argument("shell", choices=["bash", "zsh"])
    sp = sub.add_parser("protocol", help="the protocols this testbed knows, and a new one's skeleton")
    psub = sp.add_subparsers(dest="protocol_cmd", required=True, metavar="ACTION")
    pl = psub.add_parser("list", help="every registered protocol: where it comes from and which parts it has")
    pl.add_argument("--json", action="store_true", help="one JSON document on stdout")
    pn = psub.add_parser("new", help="write a runnable skeleton protocol package (topology, node, events, "
                                     "a check, a smoke topology, a test)")
    pn.add_argument("name", help="the protocol's name (a lower-case Python identifier)")
    pn.add_argument("--external", metavar="DIR",
                    help="a distribution of its own in DIR (pip install -e DIR), instead of "
                         "testbed/protocols/NAME in this source checkout")
    sp = sub.add_parser("image", help="the node image for the docker/ansible providers")
    isub = sp.add_subparsers(dest="image_cmd", required=True, metavar="ACTION")
    b = isub.add_parser("build", help="build the node image")
    b.add_argument("--offline-base", action="store_true",
                   help="first make a local Debian base with debootstrap (no registry needed)")
    b.add_argument("--base", help="base image (default python:3.11-slim)")
    return p


def _protocol(args: argparse.Namespace) -> int:
    from testbed import registry, ui

    if args.protocol_cmd == "list":
        rows = []
        for p in registry.registry():
            parts = [k for k in ("nodes", "analysis", "experiments") if getattr(p, k)]
            rows.append({"name": p.name, "source": p.source, "package": p.package, "builds_on": list(p.builds_on),
                         "parts": ["topology", *parts], "runnable": p.runnable,
                         "topologies": str(p.topologies_dir()) if p.topologies_dir() else None})
        if args.json:
            from testbed import jsonout

            ui.plain(jsonout.dumps({"protocols": rows}))
        else:
            for r in rows:
                extra = f"  builds on {', '.join(r['builds_on'])}" if r["builds_on"] else ""
                ui.plain(f"{r['name']:<14} {r['source']:<10} {' '.join(r['parts'])}{extra}")
        return 0
    from pathlib import Path

    from testbed import scaffold

    if args.external:
        w = scaffold.new_external(args.name, Path(args.external))
    else:
        w = scaffold.new_builtin(args.name)
    ui.plain(f"protocol {args.name}: {len(w.files)} files written in {w.package_dir}")
    for f in w.files:
        ui.plain(f"  {f}")
    ui.plain(f"run it: {w.how_to_run}")
    return 0


def _spark_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--spark-master", metavar="URL",
                    help="Spark master (default $TESTBED_SPARK_MASTER, else local[2]), e.g. spark://host:7077")
    sp.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting, e.g. spark.executor.memory=4g (repeatable)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["__complete"]:  # called by the completion script on TAB (testbed/completion.py)
        from testbed.completion import main_complete

        return main_complete(_parser(), argv[1:])
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except TestbedError as e:
        if args.debug:
            raise
        for line in str(e).splitlines() or [type(e).__name__]:
            print(f"error: {line}" if not getattr(e, "problems", None) else line, file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # e.g. `testbed validate x.yaml | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("interrupted (run `testbed down` to stop what is still up)", file=sys.stderr)
        return 130
    except Exception as e:  # a bug or an unforeseen failure: one line, the traceback on request
        if args.debug:
            raise
        print(f"internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
              f"(run with --debug for the traceback; `testbed down` or `testbed wipe` cleans up)",
              file=sys.stderr)
        return 70


def _dispatch(args: argparse.Namespace) -> int:
    from testbed import api, ui

    rd = args.runs_dir
    if getattr(args, "spark_master", None) or getattr(args, "spark_conf", None):
        from testbed.analysis.session import configure, parse_conf

        configure(args.spark_master, parse_conf(args.spark_conf))
    if getattr(args, "accept_unknown_host_keys", False):
        from testbed.providers.engine import ACCEPT_ENV

        os.environ[ACCEPT_ENV] = "1"  # read where the provider connects to a remote engine
    if args.cmd == "validate":
        if args.json:
            from testbed import jsonout

            ui.plain(jsonout.dumps(jsonout.validate_doc(args.file, api.plans(args.file, api.parse_set(args.set),
                                                                             args.provider))))
            return 0
        ui.plain(api.validate(args.file, api.parse_set(args.set), args.provider))
        return 0
    if args.cmd == "predict":
        import json

        from testbed import registry as protocols
        from testbed.errors import UsageError

        for plan in api.plans(args.file, api.parse_set(args.set)):
            mod = protocols.get(plan.protocol).predictor()
            if mod is None:
                have = [p.name for p in protocols.registry() if p.predictor() is not None]
                raise UsageError(f"{args.file}: protocol {plan.protocol} has no predictor "
                                 f"(analysis/<protocol>/predict.py; have: {', '.join(have) or 'none'})")
            p = mod.predict(plan)
            ui.plain(json.dumps(p, sort_keys=True) if args.json else mod.format_prediction(p))
        return 0
    if args.cmd == "graph":
        if args.output == "-":
            ui.plain(api.graph(args.file, None, at=args.at, set_vars=api.parse_set(args.set))[0].rstrip("\n"))
            return 0
        out = args.output or f"{api.plans(args.file, api.parse_set(args.set))[0].name}.png"
        ui.plain(str(api.graph(args.file, out, at=args.at, set_vars=api.parse_set(args.set))[1]))
        return 0
    if args.cmd == "hosts":
        rows = api.hosts(args.file, api.parse_set(args.set), progress=ui.progress_line)
        if args.json:
            from testbed import jsonout

            ui.plain(jsonout.dumps(rows))  # a list of rows, one per host (docs/cli.md)
        else:
            ui.hosts_table(rows)
        return 0
    if args.cmd == "up":
        prov = args.provider or api.plans(args.file, api.parse_set(args.set))[0].provider
        with ui.Live("up", ui.ETA([("up", None)], history_key=f"up/{prov}")) as live:
            live.phase("up", "bringing up")
            run = api.up(args.file, set_vars=api.parse_set(args.set), provider=args.provider, runs_dir=rd,
                         schedule=not args.no_schedule, progress=live.line)
        if args.json:
            from testbed import jsonout

            ui.plain(jsonout.dumps(jsonout.up_doc(run, api.status(str(run.path), runs_dir=rd))))
            return 0
        ui.status_table(api.status(str(run.path), runs_dir=rd))
        ui.plain(run.run_id)
        return 0
    if args.cmd == "run":
        from testbed.faults.schedule import DRAIN_S

        with ui.LiveRun(api.plans(args.file, api.parse_set(args.set), args.provider),
                        analyze=not args.no_analyze, drain_s=DRAIN_S) as live:
            runs = api.run(args.file, set_vars=api.parse_set(args.set), provider=args.provider, runs_dir=rd,
                           progress=live.line, on_event=live.event, analyze=not args.no_analyze,
                           spark_master=args.spark_master)
        if args.json:
            from testbed import jsonout

            doc = jsonout.run_doc([jsonout.run_entry(r, api.run_checks(r)) for r in runs])
            ui.plain(jsonout.dumps(doc))
            return 0 if doc["ok"] else 3
        ok = True
        for r in runs:
            ui.plain(f"run directory: {r.path}")
            figs = sorted((r.analysis_dir / "figures").glob("*.png")) if r.analysis_dir.exists() else []
            for f in figs:
                ui.plain(f"  figure: {f}")
            if (r.analysis_dir / "report.md").exists():
                ui.plain(f"  report: {r.analysis_dir / 'report.md'}")
            if (r.analysis_dir / "report.html").exists():
                ui.plain(f"  report: {r.analysis_dir / 'report.html'}")
            for c in api.run_checks(r):
                verdict = "PASS" if c.get("passed") else "FAIL"
                ok = ok and bool(c.get("passed"))
                ui.plain(f"  check {c.get('name')}: {verdict} ({c.get('violations', 0)} violations, "
                         f"{c.get('attributed', 0)} attributed to faults)")
        return 0 if ok else 3
    if args.cmd == "down":
        stopped = api.down(args.run, runs_dir=rd, all_runs=args.all, progress=ui.progress_line)
        for s in stopped:
            ui.plain(f"down: {s}")
        return 0
    if args.cmd == "status":
        st = api.status(args.run, runs_dir=rd)
        if args.json:
            from testbed import jsonout

            ui.plain(jsonout.dumps({"schema": jsonout.SCHEMA_VERSION, "command": "status", **st}))
        else:
            ui.status_table(st)
        return 0
    if args.cmd == "logs":
        for line in api.log_lines(args.run, args.node, runs_dir=rd, follow=args.follow):
            ui.plain(line)
        return 0
    if args.cmd == "inject":
        for e in api.inject(args.fault, args.run, runs_dir=rd, progress=ui.progress_line):
            ui.out.print(ui.fault_line(e))
        return 0
    if args.cmd == "analyze":
        with ui.LiveAnalyze() as live:
            results = api.analyze_runs(args.run_dir, spark_master=args.spark_master, progress=live.line,
                                       reuse=not args.reparse)
        for res in results:
            ui.plain(f"report: {res.report}")
            if res.report_html is not None:
                ui.plain(f"report: {res.report_html}")
            for f in res.figures:
                ui.plain(f"figure: {f}")
        return 0 if all(r.ok for r in results) else 3
    if args.cmd == "wipe":
        removed = api.wipe(ui.progress_line, runs_dir=rd)
        ui.plain(f"wiped {len(removed)} resources")
        return 0
    if args.cmd == "reproduce":
        from testbed.experiments import papers, reproduce
        from testbed.experiments import compare as cmp
        from testbed.experiments.grid import parse_points_filter

        target = args.protocol[0] if len(args.protocol) == 1 else args.protocol
        chosen = list(papers()) if target == "all" else list(dict.fromkeys(args.protocol))
        if args.compare:  # a bad reference is said before the reproduction, not after it
            cmp.side(args.compare, chosen)
        report = reproduce(target, scale=args.scale, figs=args.fig, out_dir=args.out, runs_dir=rd,
                           provider=args.provider, progress=ui.progress_line,
                           points=parse_points_filter(args.points), jobs=args.jobs, cpu_budget=args.cpu_budget)
        published = []
        if args.publish:
            from testbed.experiments.publish import publish

            published = [publish(args.out, p, args.publish) for p in chosen if (report.parent / p).is_dir()]
        comparison = cmp.compare(args.compare, args.out, chosen) if args.compare else None
        if args.json:
            from testbed import jsonout

            doc = jsonout.reproduce_doc(report, chosen)
            if comparison is not None:
                doc["compare"] = jsonout.compare_doc(comparison)
            if published:
                doc["published"] = [str(p) for p in published]
            ui.plain(jsonout.dumps(doc))
            return 0 if doc["ok"] and not (comparison and comparison.changed) else 3
        ui.plain(f"report: {report}")
        ui.plain(f"page: {report.parent / 'index.html'}")
        for p in published:
            ui.plain(f"published: {p}")
        if comparison is not None:
            ui.plain(cmp.table(comparison))
            return 3 if comparison.changed else 0
        return 0
    if args.cmd == "compare":
        from testbed.experiments import compare as cmp

        comparison = cmp.compare(args.a, args.b)
        if args.json:
            from testbed import jsonout

            ui.plain(jsonout.dumps(jsonout.compare_doc(comparison)))
        else:
            ui.plain(cmp.table(comparison, changed_only=args.changed))
        return 3 if comparison.changed else 0
    if args.cmd == "explore":
        from testbed.explore import explore
        from testbed.explore.ui import LiveExplore

        with LiveExplore(args.runs, args.budget) as live:
            res = explore(args.file, runs=args.runs, budget=args.budget, seed=args.seed, faults=args.faults,
                          vary=args.vary, provider=args.provider, jobs=args.jobs, out=args.out, resume=args.resume,
                          max_faults=args.max_faults, shrink_runs=args.shrink_runs, first=args.first,
                          set_vars=api.parse_set(args.set), spark_master=args.spark_master, progress=live.line,
                          on_event=live.event)
        if args.json:
            from testbed import jsonout

            ui.plain(jsonout.dumps({"schema": jsonout.SCHEMA_VERSION, "command": "explore", "ok": res.ok,
                                    "path": str(res.path), **res.summary}))
            return 0 if res.ok else 3
        ui.plain(f"exploration: {res.path}  (summary: {res.path / 'summary.md'})")
        ui.plain(f"  {res.summary['cases']} cases, seed {res.summary['settings']['seed']}")
        for prop, n in sorted(res.summary["violations"].items()):
            m = res.summary["minimal"].get(prop)
            ui.plain(f"  {prop}: violated in {n} case(s)" + (f"; minimal case ({m['entries_after']} fault entries): "
                                                               f"{m['file']}" if m else ""))
        if res.ok:
            ui.plain("  no violation")
        return 0 if res.ok else 3
    if args.cmd == "completion":
        from testbed.completion import script

        sys.stdout.write(script(args.shell))
        return 0
    if args.cmd == "protocol":
        return _protocol(args)
    if args.cmd == "image":
        with ui.Live("image build", ui.ETA([("build", None)], history_key="image-build", guess=60.0)) as live:
            live.phase("build", "building the node image")
            tag = api.image_build(base=args.base, offline_base=args.offline_base, progress=live.line)
        ui.plain(tag)
        return 0
    raise AssertionError(args.cmd)


if __name__ == "__main__":
    sys.exit(main())
