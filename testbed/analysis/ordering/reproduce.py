"""``testbed reproduce ordering``: Figs 7-14 of Baldoni et al. (EXPERIMENTS.md section A).

* Figs 7-8 (timestamp size vs total subscribed topics) are a pure function of the
  subscriptions: for every point of ``topologies/ordering/fig07-<scale>.yaml`` the
  clients' subscriptions are re-drawn exactly as the client hosts draw them and the
  sequencing groups are computed with the topic managers' rule (``tssize.py``).
* Figs 9-12 (latency, throughput vs event rate; % outgoing bandwidth per server)
  and 13-14 (latency, throughput vs subscriptions) run every point of
  ``fig09-<scale>.yaml`` / ``fig13-<scale>.yaml`` with real processes, then one Spark
  job reads every run's logs (``o_timestamp``, ``o_tm_stats``).
* The property checks run on two runs of ``smoke.yaml`` (reliable and unreliable
  ENS, events diffused through the pub/sub brokers), through the same Spark job.

Resumable: ``<out>/ordering/index.json`` maps (topology file, point) to its run
directory (or, for Figs 7-8, to its computed row); finished entries are reused.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

TOPO_DIR = Path(__file__).resolve().parents[3] / "topologies" / "ordering"
ALL_FIGS = (7, 8, 9, 10, 11, 12, 13, 14)
SHAPES = (0.901, 0.349)
LABEL = {0.901: "0.901 (geographic)", 0.349: "0.349 (spray-and-diffuse)"}
BW_RATE = {"quick": 1000, "paper": 5000}  # the rate point Figs 11-12 are drawn at
CHECK_RUNS = {"reliable": {"ens": "reliable", "duration": "6s"},
              "unreliable": {"ens": "unreliable", "duration": "6s", "loss": "3%", "retry": "500ms",
                             "ttl": "5ms", "jitter": "15ms", "reorder": "true"}}
PAPER = {
    7: "at 10 topics/subscriber: about 46 (0.349) and 17 (0.901)",
    9: "0.901 below 0.349; < 300 ms with 0.901 up to 10000 events/s",
    10: "peak at 5000 requests/s for both; 0.901 peaks above 4k timestamps/s",
    11: "only servers 4 and 5 forward; 3 negligible; 1 and 2 zero",
    12: "considerably higher on every server except server 1",
    13: "subscriptions do not affect 0.901; they do under 0.349",
    14: "same as Fig 13 (throughput)",
}


def _key(path: Path, point: dict[str, Any]) -> str:
    return f"{path.name}|{json.dumps(point, sort_keys=True)}"


class Index:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        tmp.replace(self.path)


def _run_finished(run_dir: str | None) -> bool:
    if not run_dir:
        return False
    p = Path(run_dir)
    try:
        m = json.loads((p / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return m.get("status") in ("collected", "analyzed") and any((p / "logs").glob("*.jsonl"))


def ensure_runs(path: Path, index: Index, runs_dir: str | None, provider: str | None,
                progress: Callable[[str], None], set_vars: dict[str, Any] | None = None,
                key_prefix: str = "") -> dict[str, tuple[dict[str, Any], str]]:
    """Run every point of ``path`` not already in the index; key -> (point, run dir)."""
    from testbed import api

    out: dict[str, tuple[dict[str, Any], str]] = {}
    for plan in api.plans(str(path), set_vars or {}, provider):
        point = {**plan.point, **(set_vars or {})}
        key = key_prefix + _key(path, point)
        have = index.get(key)
        if not _run_finished(have):
            progress(f"ordering: running {path.name} {json.dumps(point, sort_keys=True)}")
            [rd] = api.run(str(path), set_vars=point, provider=provider, runs_dir=runs_dir,
                           progress=lambda s: None, analyze=False)
            have = str(rd.path)
            index.put(key, have)
        else:
            progress(f"ordering: reusing {Path(have).name} for {path.name} {json.dumps(point, sort_keys=True)}")
        out[key] = (point, have)
    return out


def fig7_rows(scale: str, index: Index, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    from testbed import api
    from testbed.analysis.ordering.tssize import size_stats

    path = TOPO_DIR / f"fig07-{scale}.yaml"
    rows = []
    for plan in api.plans(str(path)):
        key = "tssize|" + _key(path, plan.point)
        row = index.get(key)
        if row is None:
            t = time.monotonic()
            row = {"shape": plan.point["shape"], "k": plan.point["k"], **size_stats(plan)}
            row["compute_s"] = round(time.monotonic() - t, 2)
            index.put(key, row)
            progress(f"ordering: Fig 7-8 point shape={row['shape']} k={row['k']}: "
                     f"mean {row['size_mean']:.1f} ({row['compute_s']} s)")
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- Spark part
def _read_events(spark, run_dirs: dict[str, str], ev: str):
    """Every ``ev`` line of the given runs' logs, typed by the event registry, plus ``run``."""
    from pyspark.sql import functions as F

    from testbed.analysis.ingest import event_schema
    from testbed.nodes.runtime.events import all_events

    et = all_events()[ev]
    files = [str(p) for d in run_dirs.values() for p in sorted((Path(d) / "logs").glob("*.jsonl"))]
    by_dir = {str(Path(d).resolve()): k for k, d in run_dirs.items()}
    mapping = F.create_map(*[x for d, k in by_dir.items() for x in (F.lit(d), F.lit(k))])
    lines = spark.read.text(files).select(F.col("_metadata.file_path").alias("file"), "value")
    parsed = (lines.where(F.col("value").contains(f'"ev":"{ev}"'))
              .select("file", F.from_json("value", event_schema(et)).alias("e"))
              .select("file", "e.*")
              .where(F.col("ev") == ev))
    run_dir = F.regexp_replace(F.regexp_extract("file", r"^(?:file:)?(.*)/logs/[^/]*$", 1), "%20", " ")
    return parsed.withColumn("run", mapping[run_dir]).drop("file")


def spark_metrics(spark, run_dirs: dict[str, str]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Per run: the timestamp summary; per run and server: the outgoing bandwidth."""
    from pyspark.sql import functions as F

    from testbed.analysis.ordering.metrics import outgoing_bandwidth, timestamp_summary

    ts = _read_events(spark, run_dirs, "o_timestamp").withColumn("t_rel_s", F.col("t") / 1e9)
    summary: dict[str, dict[str, Any]] = {r: {} for r in run_dirs}
    for row in timestamp_summary(ts, ("run",)).collect():
        d = row.asDict()
        summary[d.pop("run")] = d
    tm = _read_events(spark, run_dirs, "o_tm_stats")
    bw: dict[str, dict[str, Any]] = {r: {} for r in run_dirs}
    for row in outgoing_bandwidth(tm, ("run",)).collect():
        d = row.asDict()
        bw[d.pop("run")][d["server"]] = d
    return summary, bw


def spark_checks(spark, run_dirs: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """The history checks of each run, from its logs through Spark (see checks/ordering.py)."""
    from pyspark.sql import functions as F

    from testbed.analysis.ordering import history as H

    notify = _read_events(spark, run_dirs, "o_notify").select(
        "run", "client", "eid", "topic", "ts", "ooo", F.col("n").alias("order"), (F.col("t") / 1e9).alias("t"))
    stamps = _read_events(spark, run_dirs, "o_timestamp").select(
        "run", "client", "eid", "topic", (F.col("t") / 1e9).alias("t"), (F.col("t0") / 1e9).alias("t0"))
    subs = _read_events(spark, run_dirs, "o_subscribed").select("run", "client", "topic", (F.col("t") / 1e9).alias("t"))
    unsubs = _read_events(spark, run_dirs, "o_unsubscribe").select("run", "client", "topic", (F.col("t") / 1e9).alias("t"))
    hist: dict[str, list[dict[str, Any]]] = {r: [] for r in run_dirs}
    for df, ev in ((notify, "o_notify"), (stamps, "o_ens_publish"), (subs, "o_subscribed"),
                   (unsubs, "o_unsubscribe")):
        for row in df.toLocalIterator():
            d = row.asDict()
            hist[d.pop("run")].append({**d, "ev": ev})
    out: dict[str, list[dict[str, Any]]] = {}
    for run, h in hist.items():
        params = json.loads((Path(run_dirs[run]) / "plan.json").read_text()).get("params") or {}
        reliable = params.get("ens", "reliable") == "reliable"
        notes = [x for x in h if x["ev"] == "o_notify"]
        last = max((x["t"] for x in notes), default=0.0)
        res = [H.check_tno(h)]
        if reliable:
            res.append(H.check_completeness(h, until=last - 1.0))
        else:
            res.append(H.check_ooo_tags(h))
        for r in res:
            r["notifications"] = len(notes)
        out[run] = res
    return out


# ----------------------------------------------------------------------------- figures
def _plot(path: Path, title: str, xlabel: str, ylabel: str, series: dict[str, tuple[list, list]],
          logx: bool = False) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for label, (xs, ys) in series.items():
        ax.plot(xs, ys, marker="o", label=label)
    if logx:
        ax.set_xscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _bars(path: Path, title: str, servers: list[str], values: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.bar(servers, values)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("server")
    ax.set_ylabel("% outgoing bandwidth")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    import csv

    cols: list[str] = []
    for r in rows:
        for c in r:
            if c not in cols:
                cols.append(c)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def _series(rows: list[dict[str, Any]], x: str, y: str) -> dict[str, tuple[list, list]]:
    out = {}
    for shape in SHAPES:
        pts = sorted((r[x], r[y]) for r in rows if r["shape"] == shape and r.get(y) is not None)
        out[LABEL[shape]] = ([p[0] for p in pts], [p[1] for p in pts])
    return out


# ----------------------------------------------------------------------------- claims
def claims_fig7(rows: list[dict[str, Any]], topics: int) -> list[dict[str, Any]]:
    by = {(r["shape"], r["k"]): r for r in rows}
    out = []
    at10 = {s: by.get((s, 10), {}).get("size_mean") for s in SHAPES}
    if all(v is not None for v in at10.values()):
        ok = abs(at10[0.349] - 46) / 46 <= 0.3 and abs(at10[0.901] - 17) / 17 <= 0.3
        out.append({"figure": 7, "claim": "at 10 topics/subscriber: about 46 (shape 0.349) and about 17 (shape 0.901)",
                    "measured": {"0.349": round(at10[0.349], 2), "0.901": round(at10[0.901], 2)},
                    "paper": {"0.349": 46, "0.901": 17}, "tolerance": "within 30%", "holds": ok})
    for s in SHAPES:
        pts = sorted((k, by[(s, k)]["size_mean"]) for (sh, k) in by if sh == s)
        mono = all(b >= a - 1e-9 for (_, a), (_, b) in zip(pts, pts[1:]))
        last = pts[-1][1] if pts else 0
        out.append({"figure": 7, "claim": f"grows toward the maximum ({topics}) as subscriptions grow (shape {s})",
                    "measured": {"sizes_by_k": {str(k): round(v, 2) for k, v in pts}},
                    "holds": bool(pts) and mono and last >= 0.8 * topics})
    below = [(k, by[(0.901, k)]["size_mean"], by[(0.349, k)]["size_mean"])
             for (s, k) in by if s == 0.901 and (0.349, k) in by]
    # equal only where both are at an extreme: no intersections (size 1) or saturation
    holds = all(a < b or (a == b == 1.0) or (a >= 0.99 * topics and b >= 0.99 * topics)
                for _, a, b in below)
    out.append({"figure": 7, "claim": "0.901 always below 0.349",
                "measured": {str(k): [round(a, 2), round(b, 2)] for k, a, b in sorted(below)},
                "holds": bool(below) and holds})
    return out


def claims_fig8(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    have = [r for r in rows if r.get("size_std") is not None]
    return [{"figure": 8, "claim": "std dev of the timestamp size reported alongside Fig 7 (same sweep)",
             "measured": {f"{r['shape']}/k={r['k']}": round(r["size_std"], 2) for r in have},
             "holds": len(have) == len(rows) > 0}]


def _by_x(rows, x, y, shape):
    return dict(sorted((r[x], r[y]) for r in rows if r["shape"] == shape and r.get(y) is not None))


def claims_rate(rows: list[dict[str, Any]], figs: list[int], scale: str) -> list[dict[str, Any]]:
    out = []
    lat = {s: _by_x(rows, "rate", "latency_mean_ms", s) for s in SHAPES}
    thr = {s: _by_x(rows, "rate", "throughput_per_s", s) for s in SHAPES}
    if 9 in figs:
        common = sorted(set(lat[0.901]) & set(lat[0.349]))
        out.append({"figure": 9, "claim": "mean latency with 0.901 lower than with 0.349 at every rate",
                    "measured": {str(r): [round(lat[0.901][r], 1), round(lat[0.349][r], 1)] for r in common},
                    "holds": bool(common) and all(lat[0.901][r] < lat[0.349][r] for r in common)})
        out.append({"figure": 9, "claim": "latency < 300 ms with 0.901 up to the highest rate of the sweep",
                    "measured": {str(r): round(v, 1) for r, v in lat[0.901].items()},
                    "holds": bool(lat[0.901]) and max(lat[0.901].values()) < 300})
    if 10 in figs:
        peak = {s: (max(thr[s], key=thr[s].get) if thr[s] else None) for s in SHAPES}
        out.append({"figure": 10, "claim": "throughput peaks at the same offered rate for both shapes"
                    + (" (paper: 5000 requests/s)" if scale == "paper" else ""),
                    "measured": {str(s): peak[s] for s in SHAPES},
                    "holds": peak[0.901] is not None and peak[0.901] == peak[0.349]
                    and (scale != "paper" or peak[0.901] == 5000)})
        p901 = max(thr[0.901].values(), default=0.0)
        p349 = max(thr[0.349].values(), default=0.0)
        out.append({"figure": 10, "claim": "0.901 reaches the best peak throughput",
                    "measured": {"0.901": round(p901, 1), "0.349": round(p349, 1)}, "holds": p901 >= p349 > 0})
        out.append({"figure": 10, "claim": "0.901 peaks above 4000 timestamps/s (absolute; paper scale)",
                    "measured": {"0.901": round(p901, 1)}, "holds": p901 > 4000})
    return out


def claims_bw(bw901: dict[str, float], bw349: dict[str, float], figs: list[int]) -> list[dict[str, Any]]:
    out = []
    s = [f"tm{i}" for i in range(1, 6)]
    if 11 in figs and bw901:
        v = [bw901.get(x, 0.0) for x in s]
        out.append({"figure": 11, "claim": "servers 1 and 2 forward nothing (0.901)",
                    "measured": {x: round(y, 3) for x, y in zip(s, v)}, "holds": v[0] == 0 and v[1] == 0})
        out.append({"figure": 11, "claim": "server 3 negligible, only servers 4 and 5 forward noticeably (0.901)",
                    "measured": {x: round(y, 3) for x, y in zip(s, v)},
                    "holds": v[2] < 1.0 and v[2] <= min(v[3], v[4]) and max(v[3], v[4]) > 0})
    if 12 in figs and bw349 and bw901:
        out.append({"figure": 12, "claim": "0.349 considerably higher than 0.901 on every server except server 1",
                    "measured": {x: [round(bw901.get(x, 0), 3), round(bw349.get(x, 0), 3)] for x in s},
                    "holds": all(bw349.get(x, 0) > bw901.get(x, 0) for x in s[1:])})
    return out


def claims_subs(rows: list[dict[str, Any]], figs: list[int]) -> list[dict[str, Any]]:
    out = []
    for fig, y, what in ((13, "latency_mean_ms", "latency"), (14, "throughput_per_s", "throughput")):
        if fig not in figs:
            continue
        ch = {}
        for s in SHAPES:
            pts = _by_x(rows, "total_subscribed", y, s)
            vals = list(pts.values())
            ch[s] = (max(vals) - min(vals)) / max(min(vals), 1e-9) if len(vals) > 1 else None
        ok = ch[0.901] is not None and ch[0.349] is not None and ch[0.901] < 0.25 and ch[0.349] > ch[0.901]
        out.append({"figure": fig, "claim": f"the number of subscriptions does not affect 0.901's {what} "
                    f"(spread < 25%) but affects 0.349's more",
                    "measured": {"relative_spread": {str(s): (round(v, 3) if v is not None else None)
                                                     for s, v in ch.items()}},
                    "holds": ok})
    return out


# ----------------------------------------------------------------------------- main
def reproduce(scale: str, figs: list[int] | None, out_dir: Path, runs_dir: str | None,
              provider: str | None, progress: Callable[[str], None]) -> Path:
    from testbed.errors import UsageError

    if scale not in ("quick", "paper"):
        raise UsageError(f"unknown scale {scale!r} (quick or paper)")
    figs = sorted(set(figs or ALL_FIGS))
    bad = [f for f in figs if f not in ALL_FIGS]
    if bad:
        raise UsageError(f"ordering has figures {list(ALL_FIGS)}, not {bad}")
    t_start = time.monotonic()
    out = Path(out_dir) / "ordering"
    (out / "figures").mkdir(parents=True, exist_ok=True)
    (out / "data").mkdir(parents=True, exist_ok=True)
    index = Index(out / f"index-{scale}.json")
    claims: list[dict[str, Any]] = []
    timings: dict[str, float] = {}

    # Figs 7-8: from the subscriptions
    rows7: list[dict[str, Any]] = []
    if 7 in figs or 8 in figs:
        t = time.monotonic()
        rows7 = fig7_rows(scale, index, progress)
        timings["figs_7_8_s"] = round(time.monotonic() - t, 1)
        topics = rows7[0]["topics"] if rows7 else 1000
        if 7 in figs:
            _write_csv(out / "data" / "fig7.csv", [{k: v for k, v in r.items() if k != "size_std"} for r in rows7])
            _plot(out / "figures" / "fig7.png", f"Fig 7: mean timestamp size ({scale})",
                  "total subscribed topics", "mean timestamp size (entries)",
                  _series(rows7, "total_subscribed", "size_mean"), logx=True)
            claims += claims_fig7(rows7, topics)
        if 8 in figs:
            _write_csv(out / "data" / "fig8.csv", [{k: r[k] for k in ("shape", "k", "clients", "total_subscribed",
                                                                          "size_std", "size_std_pub")} for r in rows7])
            _plot(out / "figures" / "fig8.png", f"Fig 8: std dev of the timestamp size ({scale})",
                  "total subscribed topics", "std dev of timestamp size",
                  _series(rows7, "total_subscribed", "size_std"), logx=True)
            claims += claims_fig8(rows7)

    # runs
    t = time.monotonic()
    runs: dict[str, tuple[dict[str, Any], str]] = {}
    rate_keys: list[str] = []
    subs_keys: list[str] = []
    if any(f in figs for f in (9, 10, 11, 12)):
        r = ensure_runs(TOPO_DIR / f"fig09-{scale}.yaml", index, runs_dir, provider, progress)
        runs.update(r)
        rate_keys = list(r)
    if any(f in figs for f in (13, 14)):
        r = ensure_runs(TOPO_DIR / f"fig13-{scale}.yaml", index, runs_dir, provider, progress)
        runs.update(r)
        subs_keys = list(r)
    check_runs: dict[str, str] = {}
    for name, sv in CHECK_RUNS.items():
        r = ensure_runs(TOPO_DIR / "smoke.yaml", index, runs_dir, provider, progress, set_vars=sv,
                        key_prefix=f"check-{name}|")
        check_runs.update({f"smoke-{name}": d for _, (_, d) in r.items()})
    timings["runs_s"] = round(time.monotonic() - t, 1)

    # Spark: every run's logs at once
    t = time.monotonic()
    from testbed.analysis.session import spark_session

    spark = spark_session()
    summary, bw = spark_metrics(spark, {k: d for k, (_, d) in runs.items()}) if runs else ({}, {})
    checks_by_run = spark_checks(spark, check_runs)
    timings["spark_s"] = round(time.monotonic() - t, 1)

    def rows_of(keys: list[str]) -> list[dict[str, Any]]:
        rows = []
        for k in keys:
            point, d = runs[k]
            plan = json.loads((Path(d) / "plan.json").read_text())
            ncl = sum(n["clients"]["count"] for n in plan["nodes"].values() if n.get("clients"))
            kk = next(n["clients"]["extra"].get("topics_per_client", 10) for n in plan["nodes"].values()
                      if n.get("clients"))
            s = summary.get(k, {})
            rows.append({"shape": point["shape"], "rate": point.get("rate", plan["point"].get("rate")),
                         "k": kk, "total_subscribed": ncl * kk, "clients": ncl,
                         "rate_offered": sum(n["clients"]["count"] * n["clients"]["rate_per_s"]
                                             for n in plan["nodes"].values() if n.get("clients")),
                         "timestamps": s.get("n"), "latency_mean_ms": s.get("latency_mean_ms"),
                         "latency_p50_ms": s.get("latency_p50_ms"), "latency_p99_ms": s.get("latency_p99_ms"),
                         "throughput_per_s": s.get("throughput_per_s"), "size_mean": s.get("size_mean"),
                         "size_std": s.get("size_std"), "run": Path(d).name})
        return rows

    rate_rows = rows_of(rate_keys)
    subs_rows = rows_of(subs_keys)
    for r in rate_rows + subs_rows:  # fill rate for the subscription sweep (fixed in the file)
        if r["rate"] is None:
            r["rate"] = round(r["rate_offered"])
    if 9 in figs:
        _write_csv(out / "data" / "fig9.csv", rate_rows)
        _plot(out / "figures" / "fig9.png", f"Fig 9: mean end-to-end latency ({scale})", "event rate (requests/s)",
              "mean latency (ms)", _series(rate_rows, "rate", "latency_mean_ms"))
    if 10 in figs:
        _write_csv(out / "data" / "fig10.csv", rate_rows)
        _plot(out / "figures" / "fig10.png", f"Fig 10: throughput ({scale})", "event rate (requests/s)",
              "timestamps/s", _series(rate_rows, "rate", "throughput_per_s"))
    claims += claims_rate(rate_rows, figs, scale)
    bwv: dict[float, dict[str, float]] = {}
    for shape, fig in ((0.901, 11), (0.349, 12)):
        keys = [k for k in rate_keys if runs[k][0]["shape"] == shape and runs[k][0].get("rate") == BW_RATE[scale]]
        if not keys:
            continue
        per = bw.get(keys[0], {})
        bwv[shape] = {srv: v["outgoing_pct"] for srv, v in per.items()}
        if fig in figs:
            rows = [{"shape": shape, "rate": BW_RATE[scale], **v} for v in per.values()]
            _write_csv(out / "data" / f"fig{fig}.csv", rows)
            servers = sorted(bwv[shape])
            _bars(out / "figures" / f"fig{fig}.png",
                  f"Fig {fig}: % outgoing bandwidth, shape {shape} ({scale}, {BW_RATE[scale]} req/s)",
                  servers, [bwv[shape][s] for s in servers])
    claims += claims_bw(bwv.get(0.901, {}), bwv.get(0.349, {}), figs)
    if 13 in figs:
        _write_csv(out / "data" / "fig13.csv", subs_rows)
        _plot(out / "figures" / "fig13.png", f"Fig 13: mean latency vs subscriptions ({scale})",
              "total subscribed topics", "mean latency (ms)", _series(subs_rows, "total_subscribed", "latency_mean_ms"))
    if 14 in figs:
        _write_csv(out / "data" / "fig14.csv", subs_rows)
        _plot(out / "figures" / "fig14.png", f"Fig 14: throughput vs subscriptions ({scale})",
              "total subscribed topics", "timestamps/s", _series(subs_rows, "total_subscribed", "throughput_per_s"))
    claims += claims_subs(subs_rows, figs)

    checks = []
    for run, res in checks_by_run.items():
        for r in res:
            checks.append({"run": run, "run_dir": Path(check_runs[run]).name, "property": r["property"],
                           "passed": r["passed"], "violations": r["violations"],
                           "notifications": r.get("notifications"), "expected": r.get("expected"),
                           "tagged_out_of_order": r.get("tagged"),
                           "examples": r.get("examples", [])})
    (out / "claims.json").write_text(json.dumps({"scale": scale, "figures": figs, "claims": claims}, indent=1))
    (out / "checks.json").write_text(json.dumps({"scale": scale, "checks": checks}, indent=1))
    timings["total_s"] = round(time.monotonic() - t_start, 1)
    report = write_report(out, scale, figs, rows7, rate_rows, subs_rows, bwv, claims, checks, timings)
    progress(f"ordering: report {report}")
    return report


def write_report(out: Path, scale: str, figs: list[int], rows7, rate_rows, subs_rows, bwv, claims, checks,
                 timings) -> Path:
    L: list[str] = [f"# Reproduction: Baldoni et al., notification ordering ({scale} scale)", ""]
    L.append(f"Figures {figs}. Wall time: {timings}. Setups: `topologies/ordering/fig*-{scale}.yaml`; "
             "method and deviations: `docs/ordering.md`.")
    L += ["", "## Claims", "", "| fig | claim (paper) | measured | holds |", "|---|---|---|---|"]
    for c in claims:
        L.append(f"| {c['figure']} | {c['claim']} | `{json.dumps(c['measured'])}` | {'yes' if c['holds'] else '**no**'} |")
    L += ["", "## Property checks", "", "| run | property | passed | violations | notifications |",
          "|---|---|---|---|---|"]
    for c in checks:
        L.append(f"| {c['run']} ({c['run_dir']}) | {c['property']} | {c['passed']} | {c['violations']} | "
                 f"{c['notifications']} |")
    if rows7:
        L += ["", "## Figs 7-8: timestamp size (paper at 10 topics/subscriber: 46 for 0.349, 17 for 0.901)", "",
              "| shape | k | total subscribed | mean (per topic) | std | mean (per publication) |", "|---|---|---|---|---|---|"]
        for r in sorted(rows7, key=lambda r: (r["shape"], r["k"])):
            L.append(f"| {r['shape']} | {r['k']} | {r['total_subscribed']} | {r['size_mean']:.1f} | "
                     f"{r['size_std']:.1f} | {r['size_mean_pub']:.1f} |")
    for title, rows in (("Figs 9-10: vs event rate", rate_rows), ("Figs 13-14: vs subscriptions", subs_rows)):
        if rows:
            L += ["", f"## {title}", "", "| shape | rate | total subscribed | timestamps | mean latency ms | p99 ms | "
                  "throughput/s | mean ts size |", "|---|---|---|---|---|---|---|---|"]
            for r in sorted(rows, key=lambda r: (r["shape"], r["rate"] or 0, r["total_subscribed"])):
                def f(v, p=1):
                    return "-" if v is None else f"{v:.{p}f}"
                L.append(f"| {r['shape']} | {r['rate']} | {r['total_subscribed']} | {r['timestamps']} | "
                         f"{f(r['latency_mean_ms'])} | {f(r['latency_p99_ms'])} | {f(r['throughput_per_s'])} | "
                         f"{f(r['size_mean'], 2)} |")
    if bwv:
        L += ["", f"## Figs 11-12: % outgoing bandwidth per server", "", "| server | 0.901 | 0.349 |", "|---|---|---|"]
        for s in sorted(set(bwv.get(0.901, {})) | set(bwv.get(0.349, {}))):
            L.append(f"| {s} | {bwv.get(0.901, {}).get(s, 0):.2f} | {bwv.get(0.349, {}).get(s, 0):.2f} |")
    L += ["", "## Figures", ""]
    for f in figs:
        L.append(f"![Fig {f}](figures/fig{f}.png)")
    L += ["", "Paper's statements per figure:", ""]
    for f in figs:
        if f in PAPER:
            L.append(f"- Fig {f}: {PAPER[f]}")
    path = out / "report.md"
    path.write_text("\n".join(L) + "\n")
    return path
