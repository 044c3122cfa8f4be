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
