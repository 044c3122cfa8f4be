"""Runtime-wide analysis, run for every protocol: who changed the nodes' state, who was refused.

* ``control_provenance`` (a check): every state change applied through a node's control
  channel (``ctl_applied`` of stall, unstall, cut, heal, partition, heal_partition,
  set_links) must be explained by an entry of the manifest's fault timeline (scheduled or
  injected) of the matching op, touching that node, at the same time (between the action's
  ``actual_s`` and ``done_s``, give or take ``TOLERANCE_S``; the link state a restarted node
  gets back is explained by its ``restart`` up to ``RESTORE_S`` later). A node that went silent -- no periodic ``cpu``
  line for ``SILENCE_S`` while its process lived on, as a paused (SIGSTOP) process does --
  must be explained by a pause, crash or restart of that node. Either unexplained is a
  violation: the run's results may be wrong (e.g. a broker stalled by someone else).
* ``node_lives`` (a check): every process life of a node (from its ``node_start``) ends with
  a graceful ``node_stop``, or is ended by a crash or restart of that node in the manifest's
  timeline; a ``node_error`` (an exception in protocol code or escaping the runtime's loop)
  or a life that just ends (killed by the kernel, by someone else) is a violation, never
  counted as a fault's loss; so is a restart the timeline records as failed (the node stayed
  down: e.g. its ports were taken while it was down, and nothing answered for it).
* :func:`rejected_summary`: refused or malformed connections and control requests per node
  and channel (``conn_rejected`` counts); the report shows them, with a warning at its top
  when any control request was refused.

Times are ``t_rel_s`` (seconds from the workload start, clock-corrected by the ingest).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.checks import MAX_EXAMPLES, CheckResult
from testbed.analysis.context import AnalysisContext

TOLERANCE_S = 2.0
RESTORE_S = 40.0  # a restarted node gets its link state once it answers (the runner waits 30 s)
SILENCE_S = 5.0  # periodic lines come every second; 5 s of silence is a stopped process

# control op -> timeline ops that explain it
EXPLAINED_BY: dict[str, tuple[str, ...]] = {
    "stall": ("stall",), "unstall": ("unstall",), "cut": ("cut", "restart"), "heal": ("heal",),
    "partition": ("partition", "restart"), "heal_partition": ("heal_partition",),
    "set_links": ("set_link", "restart"),
}
SILENCE_OPS = ("pause", "resume", "crash", "restart", "throttle")  # a throttled node may log late


# -- pure helpers (values in, values out) ---------------------------------------------------
def timeline_entries(manifest: dict[str, Any], plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every fault action the controller carried out (scheduled and injected) with the nodes it
    touched (``nodes``; None when unknown: an injected set_link)."""
    links_by_fault: dict[int, set[str]] = {}
    for a in plan.get("actions") or []:
        if a.get("op") == "set_link":
            s = links_by_fault.setdefault(int(a.get("fault", -1)), set())
            for k in a.get("links") or {}:
                s.update(k.split("->"))
    out = []
    for e in list(manifest.get("timeline") or []) + list(manifest.get("injected") or []):
        if e.get("actual_s") is None or e.get("status") not in ("done", "failed"):
            continue
        nodes: set[str] | None = {str(t) for t in e.get("target") or []}
        for g in e.get("groups") or []:
            nodes.update(str(n) for n in g)
        if e.get("op") == "set_link":
            nodes = None if e.get("injected") else links_by_fault.get(int(e.get("fault", -1)))
        done = e.get("done_s")
        out.append({"op": e.get("op"), "nodes": nodes, "at_s": float(e["actual_s"]),
                    "done_s": float(done) if isinstance(done, (int, float)) else float(e["actual_s"]),
                    "fault": e.get("fault"), "injected": bool(e.get("injected"))})
    return out


def explains(entry: dict[str, Any], node: str, op: str, t_s: float) -> bool:
    if entry["op"] not in EXPLAINED_BY.get(op, ()):
        return False
    if entry["nodes"] is not None and node not in entry["nodes"]:
        return False
    if entry["op"] == "restart":
        return entry["at_s"] - TOLERANCE_S <= t_s <= entry["at_s"] + RESTORE_S
    # between the controller firing the action and its control calls returning (+ clock slack)
    return entry["at_s"] - TOLERANCE_S <= t_s <= max(entry["done_s"], entry["at_s"]) + TOLERANCE_S


def explains_silence(entry: dict[str, Any], node: str, start_s: float, end_s: float) -> bool:
    return (entry["op"] in SILENCE_OPS and entry["nodes"] is not None and node in entry["nodes"]
            and start_s - TOLERANCE_S <= entry["at_s"] <= end_s + TOLERANCE_S)


# -- transforms ------------------------------------------------------------------------------
def state_changes(ctl_applied: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """ctl_applied -> [node, op, origin, peer, args, t_rel_s]: applied ops that change link/egress state
    (``by``: extra key columns kept first, e.g. ``run_id`` over many runs)."""
    return (ctl_applied.where(F.col("ok") & F.col("op").isin(list(EXPLAINED_BY)))
            .select(*by, "node", "op", "origin", "peer", "args", "t_rel_s"))


def silences(cpu: DataFrame, node_start: DataFrame, min_gap_s: float = SILENCE_S,
             by: tuple[str, ...] = ()) -> DataFrame:
    """cpu, node_start -> [node, from_s, to_s, gap_s]: gaps between a node's periodic lines within one
    process life (a restart begins a new life: its node_start closes the gap)."""
    marks = (cpu.select(*by, "node", "t_rel_s", F.lit(0).alias("start"))
             .unionByName(node_start.select(*by, "node", "t_rel_s", F.lit(1).alias("start"))))
    w = Window.partitionBy(*by, "node").orderBy("t_rel_s", "start")
    return (marks.withColumn("next_s", F.lead("t_rel_s").over(w))
            .withColumn("next_start", F.lead("start").over(w))
            .where((F.col("next_start") == 0) & (F.col("next_s") - F.col("t_rel_s") > min_gap_s))
            .select(*by, "node", F.col("t_rel_s").alias("from_s"), F.col("next_s").alias("to_s"),
                    (F.col("next_s") - F.col("t_rel_s")).alias("gap_s")))


# -- the check ---------------------------------------------------------------------------------
def check_control_provenance(ctx: AnalysisContext) -> CheckResult:
    changes = state_changes(ctx.df("ctl_applied")).orderBy("t_rel_s").collect()
    quiet = silences(ctx.df("cpu"), ctx.df("node_start")).orderBy("from_s").collect()
    return control_provenance_of(ctx.manifest, ctx.plan, changes, quiet)


def control_provenance_of(manifest: dict[str, Any], plan: dict[str, Any], changes: list, quiet: list) -> CheckResult:
    """The check's verdict from one run's collected :func:`state_changes` (ordered by time) and
    :func:`silences` (ordered by ``from_s``): plain Python, shared by the batch (``batch_checks``)."""
    entries = timeline_entries(manifest, plan)
    bad: list[dict[str, Any]] = []
    by_origin: dict[str, int] = {}
    for r in changes:
        by_origin[r["origin"]] = by_origin.get(r["origin"], 0) + 1
        t = r["t_rel_s"]
        if t is None or not any(explains(e, r["node"], r["op"], t) for e in entries):
            bad.append({"kind": "state change", "node": r["node"], "op": r["op"], "origin": r["origin"],
                        "from": r["peer"], "args": ",".join(r["args"] or []),
                        "t_s": None if t is None else round(t, 3)})
    for r in quiet:
        if not any(explains_silence(e, r["node"], r["from_s"], r["to_s"]) for e in entries):
            bad.append({"kind": "silent (paused?)", "node": r["node"], "op": "-", "origin": "-", "from": "-",
                        "args": f"{r['gap_s']:.1f}s without periodic lines", "t_s": round(r["from_s"], 3)})
    return CheckResult(
        name="control_provenance", passed=not bad, violations=len(bad), examples=bad[:MAX_EXAMPLES],
        description="every stall, cut, partition, link change and pause is explained by the manifest's "
                    "fault timeline",
        details={"state_changes": len(changes), "by_origin": by_origin, "unexplained": len(bad)})


LIFE_ENDERS = ("crash", "restart")


def life_marks(node_start: DataFrame, node_stop: DataFrame, node_error: DataFrame,
               by: tuple[str, ...] = ()) -> DataFrame:
    """-> [*by, node, mark (start|stop|error), t_rel_s, detail]: the marks of the nodes' process lives."""
    return (node_start.select(*by, "node", F.lit("start").alias("mark"), "t_rel_s", F.lit("").alias("detail"))
            .unionByName(node_stop.select(*by, "node", F.lit("stop").alias("mark"), "t_rel_s",
                                          F.col("reason").alias("detail")))
            .unionByName(node_error.select(*by, "node", F.lit("error").alias("mark"), "t_rel_s",
                                           F.col("error").alias("detail"))))


def check_node_lives(ctx: AnalysisContext) -> CheckResult:
    marks = life_marks(ctx.df("node_start"), ctx.df("node_stop"), ctx.df("node_error")).collect()
    return node_lives_of(ctx.manifest, ctx.plan, marks)


def node_lives_of(manifest: dict[str, Any], plan: dict[str, Any], marks: list) -> CheckResult:
    """The check's verdict from one run's collected :func:`life_marks` (plain Python, shared by the batch)."""
    entries = [e for e in timeline_entries(manifest, plan) if e["op"] in LIFE_ENDERS and e["nodes"] is not None]
    by_node: dict[str, list] = {}
    for r in marks:
        by_node.setdefault(r["node"], []).append(r)
    order = {"start": 0, "error": 1, "stop": 2}
    bad: list[dict[str, Any]] = []
    lives = 0
    for node, rs in sorted(by_node.items()):
        rs.sort(key=lambda r: (r["t_rel_s"] if r["t_rel_s"] is not None else float("-inf"), order[r["mark"]]))
        starts = [i for i, r in enumerate(rs) if r["mark"] == "start"]
        lives += len(starts)
        for r in rs:
            if r["mark"] == "error":
                bad.append({"node": node, "kind": "node_error", "t_s": _r3(r["t_rel_s"]),
                            "detail": str(r["detail"])[:200]})
        for k, i in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else len(rs)
            life = rs[i + 1:end]
            if any(r["mark"] in ("stop", "error") for r in life):
                continue  # stopped gracefully, or its error is a violation already
            t0 = rs[i]["t_rel_s"] if rs[i]["t_rel_s"] is not None else float("-inf")
            t1 = rs[end]["t_rel_s"] if end < len(rs) and rs[end]["t_rel_s"] is not None else float("inf")
            if not any(node in e["nodes"] and t0 - TOLERANCE_S <= e["at_s"] <= t1 + TOLERANCE_S for e in entries):
                bad.append({"node": node, "kind": "ended without node_stop", "t_s": _r3(rs[i]["t_rel_s"]),
                            "detail": "no crash or restart of this node in the timeline explains it"})
    for e in list(manifest.get("timeline") or []) + list(manifest.get("injected") or []):
        if e.get("op") == "restart" and e.get("status") == "failed":  # the node stayed down
            for node in e.get("target") or []:
                bad.append({"node": str(node), "kind": "restart failed", "t_s": _r3(e.get("actual_s")),
                            "detail": str(e.get("error") or "")[:200]})
    return CheckResult(
        name="node_lives", passed=not bad, violations=len(bad), examples=bad[:MAX_EXAMPLES],
        description="every node process stops gracefully or by a planned crash/restart (no node_error, "
                    "no unexplained death)",
        details={"lives": lives, "nodes": len(by_node), "unplanned": len(bad)})


def _r3(t: Any) -> float | None:
    return None if t is None else round(float(t), 3)


CHECKS = [check_control_provenance, check_node_lives]


def checks_of(plan: dict[str, Any], manifest: dict[str, Any]) -> list:
    """The runtime's checks that apply to one run: ``CHECKS``, and ``cpu_share`` when a process
    has a CPU limit or was throttled (docs/topology.md, Capacity)."""
    from testbed.analysis import capacity

    limited = any(v is not None for v in capacity.limits(plan).values()) or capacity.share_changes(plan, manifest)
    return CHECKS + ([capacity.check_cpu_share] if limited else [])


def rejected_summary(ctx: AnalysisContext) -> dict[str, Any]:
    """{"by_node": {node: {channel: count}}, "total": n, "control": n, "reasons": {reason: n}}
    from ``conn_rejected`` (each line counts itself and the lines suppressed before it)."""
    return rejected_of(rejected_rows(ctx.df("conn_rejected")).collect())


def rejected_rows(conn_rejected: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """-> [*by, node, channel, reason, n]."""
    return conn_rejected.groupBy(*by, "node", "channel", "reason").agg(F.sum("count").alias("n"))


def rejected_of(rows: list) -> dict[str, Any]:
    """:func:`rejected_summary` from one run's :func:`rejected_rows`."""
    by_node: dict[str, dict[str, int]] = {}
    reasons: dict[str, int] = {}
    for r in rows:
        n = int(r["n"] or 0)
        d = by_node.setdefault(r["node"], {})
        d[r["channel"]] = d.get(r["channel"], 0) + n
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + n
    total = sum(sum(d.values()) for d in by_node.values())
    control = sum(d.get("control", 0) for d in by_node.values())
    return {"by_node": dict(sorted(by_node.items())), "total": total, "control": control,
            "reasons": dict(sorted(reasons.items()))}
