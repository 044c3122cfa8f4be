"""The scenario on the pub/sub core's in-memory runtime (tests/unit/pubsub/harness.py's Sim)."""

from __future__ import annotations

from typing import Any

from tests.unit.pubsub.harness import Sim, base_config

LINE3 = {"b1": ["b2"], "b2": ["b1", "b3"], "b3": ["b2"]}
ATTACH3 = {"e": ["b1"], "d": ["b2"], "a": ["b3", "b1"]}


def scenario(variant: str, brokers: dict[str, list[str]] | None = None,
             attach: dict[str, list[str]] | None = None, **params: Any) -> dict[str, dict[str, Any]]:
    """Node configs: brokers {name: neighbours}, groups e (coordinator), d (dispatcher), a (agent)."""
    brokers = brokers or LINE3
    attach = attach or ATTACH3
    inst = int(params.get("instances", 1))
    p = {"variant": variant, "transactions": 10, "threads": 1, "instances": inst, "wait": 0.2,
         "timeout": 5.0, "regular_rate": None, "round_size": 2000, "round_txs": 4, "settle": 0.5,
         "think": 0.0, **params}
    configs = {}
    for b, nb in brokers.items():
        configs[b] = base_config(b, "node", "broker", neighbors=list(nb), params=p, protocol="transactions")
    for g, role, count in (("e", "coordinator", inst), ("d", "dispatcher", inst), ("a", "agent", 2 * inst)):
        cg = {"name": g, "role": role, "count": count, "attach": list(attach[g]), "rate_per_s": None,
              "size_bytes": None, "filter": None, "extra": {}}
        configs[g] = base_config(g, "clients", role, clients=cg, params=p, protocol="transactions")
    names = list(configs)
    for n in names:
        configs[n]["peers"] = {m: ["127.0.0.1", 0] for m in names if m != n}
        configs[n]["directory"] = {m: {"kind": configs[m]["kind"], "role": configs[m]["role"],
                                       "site": "s", "cell": None,
                                       "neighbors": configs[m]["neighbors"]} for m in names}
    return configs


def simulate(configs: dict[str, dict[str, Any]], seconds: float, delay_ms: float = 5.0) -> Sim:
    """The nodes of ``configs`` on the in-memory runtime: started, 0.5 s, the workload for ``seconds``."""
    sim = Sim(configs, delay_ms=delay_ms)
    sim.start()
    sim.run_for(0.5)
    sim.start_workload(0.0, seconds)
    sim.run_for(seconds)
    sim.shutdown()
    return sim


def run(variant: str, seconds: float = 20.0, delay_ms: float = 5.0, **kw: Any) -> Sim:
    return simulate(scenario(variant, **kw), seconds, delay_ms)


def run_with_crash(variant: str, crash: str = "b2", at_s: float = 1.0, down_s: float = 0.6,
                   seconds: float = 14.0, **kw: Any) -> Sim:
    """The scenario with broker ``crash`` crashed ``at_s`` into the workload and restarted (empty)
    ``down_s`` later; its neighbours and clients re-sync it."""
    sim = Sim(scenario(variant, **kw), delay_ms=5.0)
    sim.start()
    sim.run_for(0.5)
    sim.start_workload(0.0, seconds)
    sim.run_for(at_s)
    sim.crash(crash)
    sim.run_for(down_s)
    sim.restart(crash)
    sim.run_for(seconds - at_s - down_s)
    sim.shutdown()
    return sim


def advpub(variant: str, brokers: dict[str, list[str]] | None = None, c2: list[str] | None = None,
           c1: list[str] | None = None, **params: Any) -> dict[str, dict[str, Any]]:
    """Node configs of ``params.scenario: advpub`` (protocols/transactions/nodes/advpub.py): groups e
    (coordinator C2) and a (agent C1), one of each per instance."""
    brokers = brokers or LINE3
    configs = scenario(variant, brokers=brokers, attach={"e": c2 or ["b1"], "d": c2 or ["b1"], "a": c1 or ["b3"]},
                       scenario="advpub", **params)
    del configs["d"]
    configs["a"]["clients"]["count"] = configs["e"]["clients"]["count"]
    for cfg in configs.values():
        cfg["peers"].pop("d", None)
        cfg["directory"].pop("d", None)
    return configs


def run_advpub(variant: str, seconds: float = 8.0, **kw: Any) -> Sim:
    return simulate(advpub(variant, **kw), seconds)


def run_random(seed: int, variant: str, crash: bool, duration_s: float = 14.0) -> tuple[Sim, dict[str, Any]]:
    """The randomized topology of ``seed`` (testbed.protocols.transactions.analysis.randomized)
    on the in-memory runtime, as scripts/transactions_sweep.py --runtime sim runs it: the sim
    (logs in ``sim.logs``) and the drawn choices."""
    from testbed.protocols.transactions.analysis.randomized import THINK_S, adjacency, draw

    d = draw(seed, crash)
    cfgs = scenario(variant, brokers=adjacency(d), attach=d["attach"], instances=d["instances"],
                    threads=d["threads"], transactions=d["transactions"], timeout=2.0, settle=1.0, think=THINK_S,
                    conflict=variant != "blwait")
    for c in cfgs.values():
        c["seed"] = seed
    sim = Sim(cfgs, delay_ms=5.0)
    sim.start()
    sim.run_for(1.0)
    sim.start_workload(0.0, duration_s)
    c = d["crash"]
    if c:
        sim.run_for(c["at_s"])
        sim.crash(c["victim"])
        sim.run_for(c["down_s"])
        sim.restart(c["victim"])
        sim.run_for(duration_s - c["at_s"] - c["down_s"])
    else:
        sim.run_for(duration_s)
    sim.shutdown()
    return sim, d


def lost_commits(logs: list[dict[str, Any]]) -> list[str]:
    """The committed transactions of a scenario history (no Spark) whose publications did not
    reach the clients they must reach: a dispatch's op5 delivered to its agent and not to its
    dispatcher, a probe's op6 delivered to exactly one client, every participant's outcome
    committed. One line per such transaction."""
    begins = {r["tx"]: r for r in logs if r["ev"] == "tx_begin"}
    committed = {r["tx"] for r in logs if r["ev"] == "tx_end" and r["outcome"] == "committed"}
    deliv: dict[str, list[tuple[str, int]]] = {}
    for r in logs:
        if r["ev"] == "tx_deliver":
            deliv.setdefault(r["tx"], []).append((r["client"], int(r["n"])))
    bad = []
    for tx in sorted(committed):
        b, got = begins[tx], deliv.get(tx, [])
        if b["kind"] == "dispatch":
            ok = (b["agent"], 5) in got and (b["dispatcher"], 5) not in got
        else:
            ok = len([c for c, n in got if n == 6]) == 1
        if not ok:
            bad.append(f"{tx} ({b['kind']}): delivered {sorted(got)}")
    return bad


def stale_routes(logs: list[dict[str, Any]]) -> list[str]:
    """P5 without Spark, on the subscriptions the scenario's clients touch in transactions: a
    subscription whose last committed operation (by the TXC's end of its transaction) is a
    ``usub`` must be in no broker's final PRT; one whose last committed operation is a ``sub``
    must be in the final PRT of every broker that processed that ``sub``. One line per broker
    and subscription that differs."""
    ended = {r["tx"]: r["t"] for r in logs if r["ev"] == "tx_end" and r["outcome"] == "committed"}
    last: dict[str, tuple[int, str, str]] = {}  # sub id -> (end ns, kind, tx)
    for r in logs:
        if r["ev"] == "tx_op" and r["kind"] in ("sub", "usub") and r["tx"] in ended and r["client"] != r["node"]:
            k = (ended[r["tx"]], r["kind"], r["tx"])
            if r["sub_id"] not in last or k > last[r["sub_id"]]:
                last[r["sub_id"]] = k
    tables: dict[str, dict[str, str]] = {}
    for r in logs:
        if r["ev"] == "tx_tables":
            tables[r["node"]] = r["prt"]
    at: dict[tuple[str, str], set[str]] = {}  # (tx, sub id) -> brokers that processed its sub
    ops = {(r["tx"], r["op_id"]): r["sub_id"] for r in logs if r["ev"] == "tx_op" and r["kind"] == "sub"}
    for r in logs:
        if r["ev"] == "tx_proc" and r["kind"] == "sub" and (r["tx"], r["op_id"]) in ops:
            at.setdefault((r["tx"], ops[(r["tx"], r["op_id"])]), set()).add(r["node"])
    bad = []
    for sid, (_, kind, tx) in sorted(last.items()):
        for node, prt in sorted(tables.items()):
            if kind == "usub" and sid in prt:
                bad.append(f"{node}: {sid} removed by committed {tx} but still in the PRT")
            elif kind == "sub" and node in at.get((tx, sid), ()) and sid not in prt:
                bad.append(f"{node}: {sid} added by committed {tx} but missing from the PRT")
    return bad
