"""A synthetic pub/sub run directory (plan.json, manifest.json, logs/) for tests and benchmarks.

Deterministic: two sites (``ny``, ``rome``) on two hosts whose clocks differ
(the ``rome`` host runs ``rome_offset_ms`` ahead; the manifest records it),
brokers ``b1`` (ny) and ``b2`` (rome), a publisher process ``pubs`` in ny and
subscriber processes ``subs`` (rome) and ``locs`` (ny). Every publication is
delivered to every matching subscriber with a fixed one-way latency per site
pair, except inside the stall window of ``b2`` (deliveries to rome are lost
there, and the fault timeline explains it). Optional injected anomalies:
``duplicate`` (one publication delivered twice), ``lost`` (one delivery
missing outside every fault window), ``lost_off_route`` (one delivery to ``locs``, whose route
``pubs``-``b1``-``locs`` the stall of ``b2`` does not touch, missing inside the stall window),
``torn`` (a killed node's torn last line),
``unknown_event`` (a line of an undeclared event type).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.topology.plan import Action, ClientGroupPlan, HostPlan, LinkSpec, NodePlan, Plan

T0 = 1_750_000_000_000_000_000
LATENCY_MS = {("ny", "ny"): 4.0, ("ny", "rome"): 40.0}


@dataclass
class Synthetic:
    path: Path
    publications: int
    deliveries: int  # lines of deliver events written
    lost_in_fault: int  # deliveries suppressed inside the stall window
    events: int  # valid event lines written


def make_plan(duration_s: float, publishers: int, subscribers: int, stall: tuple[float, float] | None) -> Plan:
    hosts = {"h1": HostPlan("h1", site="ny"), "h2": HostPlan("h2", site="rome")}
    nodes = {
        "b1": NodePlan("b1", "node", "broker", "ny", "h1", neighbors=("b2",)),
        "b2": NodePlan("b2", "node", "broker", "rome", "h2", neighbors=("b1",)),
        "pubs": NodePlan("pubs", "clients", "publisher", "ny", "h1",
                         clients=ClientGroupPlan("pubs", "publisher", publishers, ("b1",), rate_per_s=10.0,
                                                 size_bytes=100)),
        "subs": NodePlan("subs", "clients", "subscriber", "rome", "h2",
                         clients=ClientGroupPlan("subs", "subscriber", subscribers, ("b2",),
                                                 filter="[class,eq,'STOCK']")),
        "locs": NodePlan("locs", "clients", "subscriber", "ny", "h1",
                         clients=ClientGroupPlan("locs", "subscriber", 1, ("b1",),
                                                 filter="[class,eq,'STOCK'],[price,>=,50]")),
    }
    links = {f"{a}->{b}": LinkSpec(delay_ms=1.0) for a in nodes for b in nodes if a != b}
    actions: tuple[Action, ...] = ()
    if stall:
        src = f"{{at: {stall[0]:g}s, stall: b2, for: {stall[1] - stall[0]:g}s}}"
        actions = (Action(stall[0], "stall", 0, ("b2",), window=stall, source=src),
                   Action(stall[1], "unstall", 0, ("b2",), window=stall, source=src))
    return Plan(name="synthetic", protocol="pubsub", provider="local", duration_s=duration_s, seed=1,
                sites=("ny", "rome"), hosts=hosts, nodes=nodes, links=links, actions=actions,
                params={"settle": 1.0})


def make_run_dir(root: Path, *, run_id: str = "synthetic-run", duration_s: float = 20.0, publishers: int = 2,
                 subscribers: int = 2, rate_per_s: float = 5.0, stall: tuple[float, float] | None = (8.0, 10.0),
                 rome_offset_ms: float = 50.0, actual_delay_ms: float = 12.0, duplicate: bool = False,
                 lost: bool = False, lost_off_route: bool = False, torn: bool = True, unknown_event: bool = True,
                 stream: bool = False) -> Synthetic:
    """Write the run directory; returns what was written.

    ``stream``: write each node's lines as they are generated (buffered files, constant memory:
    for runs of millions of events) instead of collecting and time-sorting them per node first.
    The lines are the same; only their order within a file differs (deliveries of different
    publishers interleave as generated). The analysis orders by ``t``/``m``, never by line order.
    """
    path = Path(root) / run_id
    (path / "logs").mkdir(parents=True)
    plan = make_plan(duration_s, publishers, subscribers, stall)
    (path / "plan.json").write_text(json.dumps(plan.to_dict()))
    off_ns = {"h1": 0, "h2": int(rome_offset_ms * 1e6)}
    host_of = {n.name: n.host for n in plan.nodes.values()}
    site_of = {n.name: n.site for n in plan.nodes.values()}
    logs: dict[str, list[tuple[int, dict[str, Any]]]] = {n: [] for n in plan.nodes}
    files = {n: open(path / "logs" / f"{n}.jsonl", "w", buffering=1 << 20) for n in plan.nodes} if stream else {}
    written = {n: 0 for n in plan.nodes}

    def log(node: str, t_true_s: float, ev: str, **f: Any) -> None:
        t = T0 + int(round(t_true_s * 1e9)) + off_ns[host_of[node]]  # the host's (skewed) wall clock
        row = {"t": t, "m": int(t_true_s * 1e9) + 10**12, "node": node, "ev": ev, **f}
        if stream:
            files[node].write(json.dumps(row) + "\n")
            written[node] += 1
        else:
            logs[node].append((t, row))

    for n in plan.nodes:
        log(n, -2.0, "node_start", pid=1000, restarted=False, role=plan.nodes[n].role,
            kind=plan.nodes[n].kind, emulation="userspace")
    subs = [("subs", f"subs-{i}", "[class,eq,'STOCK']") for i in range(subscribers)]
    subs.append(("locs", "locs-0", "[class,eq,'STOCK'],[price,>=,50]"))
    for proc, client, flt in subs:
        log(proc, -1.0, "subscribe", client=client, sub_id=f"{client}/s1", filter=flt,
            broker="b2" if proc == "subs" else "b1")
    pubs = deliveries = lost_in_fault = 0
    lost_done = dup_done = off_done = False
    n_per_pub = int(duration_s * rate_per_s)
    for p in range(publishers):
        client = f"pubs-{p}"
        log("pubs", -0.5, "advertise", client=client, adv_id=f"{client}/a1", filter="[class,isPresent,'']",
            broker="b1")
        for seq in range(1, n_per_pub + 1):
            t = (seq - 1) / rate_per_s + p * 0.01
            attrs = {"class": "STOCK" if seq % 3 else "BOND", "price": (seq * 7) % 100, "sym": f"S{seq % 5}"}
            pub_id = f"{client}:{seq}"
            log("pubs", t, "publish", client=client, pub_id=pub_id, seq=seq, attrs=attrs, size=100, broker="b1")
            pubs += 1
            pub_t = T0 + int(round(t * 1e9)) + off_ns["h1"]
            for proc, sub, flt in subs:
                match = attrs["class"] == "STOCK" and (proc == "subs" or attrs["price"] >= 50)
                if not match:
                    continue
                arrive = t + LATENCY_MS[("ny", site_of[proc])] / 1000.0
                if stall and proc == "subs" and stall[0] <= t <= stall[1]:
                    lost_in_fault += 1
                    continue
                if lost and not lost_done and proc == "subs" and t > duration_s / 2 + 3 and \
                        not (stall and t <= stall[1] + 3):
                    lost_done = True
                    continue
                if lost_off_route and not off_done and proc == "locs" and stall and stall[0] <= t <= stall[1]:
                    off_done = True
                    continue
                times = 2 if duplicate and not dup_done and proc == "locs" else 1
                dup_done = dup_done or times == 2
                for k in range(times):
                    log(proc, arrive + k * 0.001, "deliver", client=sub, pub_id=pub_id, publisher=client, seq=seq,
                        pub_t=pub_t, hops=2 if proc == "subs" else 1)
                    deliveries += 1
    if stall:
        log("b2", stall[0], "stall", on=True, held=0)
        log("b2", stall[1], "stall", on=False, held=37)
    for b in ("b1", "b2"):
        for s in range(int(duration_s)):
            log(b, s + 0.5, "broker_tables", srt=3, prt=len(subs), covered=0)
    if unknown_event:
        log("b1", 1.0, "mystery_event", x=1)
    log("b1", duration_s + 1, "link_set", peer="b2", spec={"delay_ms": 1.0, "loss": 0.0})
    for n in plan.nodes:  # a graceful stop ends every log, as `down` leaves it (node_lives checks it)
        log(n, duration_s + 2, "node_stop", reason="shutdown")
    n_events = 0
    torn_line = '{"t": 1, "m": 2, "node": "b2", "ev": "broker_tab'  # killed mid-write
    for node, rows in logs.items():
        if stream:
            if torn and node == "b2":
                files[node].write(torn_line)
            files[node].close()
            n_events += written[node]
            continue
        rows.sort(key=lambda r: r[0])
        text = "".join(json.dumps(r) + "\n" for _, r in rows)
        if torn and node == "b2":
            text += torn_line
        (path / "logs" / f"{node}.jsonl").write_text(text)
        n_events += len(rows)
    timeline = []
    for a in plan.actions:
        timeline.append({"fault": a.fault, "op": a.op, "target": list(a.target), "groups": [],
                         "planned_s": a.at_s, "actual_s": a.at_s + actual_delay_ms / 1000.0, "status": "done",
                         "error": None, "window": list(a.window), "source": a.source})
    manifest = {
        "run_id": run_id, "provider": "local", "emulation": "userspace",
        "versions": {"testbed": "0.1.0", "python": "3.11"},
        "t0_wall_ns": T0, "clock_offsets": {"h1": {"offset_ns": 0, "rtt_ns": 100000},
                                            "h2": {"offset_ns": off_ns["h2"], "rtt_ns": 120000}},
        "timeline": timeline,
    }
    (path / "manifest.json").write_text(json.dumps(manifest))
    return Synthetic(path, pubs, deliveries, lost_in_fault, n_events - (1 if unknown_event else 0))
