"""Topology rules of the ``transactions`` protocol (Jergler et al., multi-client transactions).

See protocols/__init__.py for the interface and docs/transactions.md for the
protocol; every key is documented in docs/topology.md.

The scenario of the paper's Fig 1b is three client groups, one of each role:

``coordinator``  E, the transaction coordinator (TXC), ``count`` = ``params.instances``
``dispatcher``   D, ``count`` = ``params.instances``
``agent``        A1/A2, ``count`` = 2 x ``params.instances``

Instance ``i`` is ``<coordinator>-i``, ``<dispatcher>-i`` and the agents
``<agent>-2i``, ``<agent>-2i+1`` (clients attach round-robin to ``attach``, as
for every protocol). Brokers are ``role: broker`` on a forest.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictInt

from testbed.topology.schema import StrictModel
from testbed.topology.units import Rate, Time

VARIANTS = ("dtx", "dtxni", "stx", "blwait")


class Params(StrictModel):
    """Top-level ``params`` of a transactions topology.

    ``variant``       dtx (snapshot isolation, Algs 1-3), dtxni (no isolation, undo log),
                      stx (dependency-driven, Alg 4) or blwait (plain pub/sub + a wait).
    ``transactions``  transactions in the run, split evenly over instances x threads.
    ``threads``       concurrent transactions per coordinator (TXC threads), each in its own
                      event space.
    ``instances``     scenario instances (one E, one D, two agents each).
    ``wait``          BL-WAIT: time E waits between op1 and op5.
    ``timeout``       a transaction not ended after this long is aborted by its TXC
                      (BL-WAIT: counted as failed).
    ``regular_rate``  Fig 9: regular workflow events per second published by every E to its
                      agents (alternating); unset = none.
    ``round_size``    Fig 9: regular events between two dispatch rounds.
    ``round_txs``     Fig 9: transactions dispatched (sequentially) per round.
    ``settle``        time between the standing subscriptions and the first transaction.
    ``think``         pause a TXC thread makes between two transactions.
    ``abort_every``   the TXC aborts (explicitly, instead of committing) every transaction whose
                      number is a multiple of this; 0 = never (tests the abort paths).
    ``conflict``      the §3.3 conflict workload: while a dispatch is open, its TXC thread runs
                      probe transactions, each a publication into the dispatch's event space
                      (overlapping the dispatch's sub/usub); checked by P6's second half. Not
                      for ``blwait``.
    ``snapshot_keep`` D-TX: how long a broker keeps a routing-table version after a commit
                      superseded it (an init that took it at a broker the commit had not reached
                      yet may still come; a missing one aborts the transaction, logged).
    ``hold_timeout``  S-TX: a commit or abort held this long for dependencies that do not come
                      is applied without them, logged (``tx_hold_timeout``).
    ``scenario``      ``dispatch`` (Fig 1b, the default) or ``advpub``: transactional
                      advertisements through the TXManager library (protocols/transactions/nodes/advpub.py):
                      groups ``coordinator`` (C2) and ``agent`` (C1), ``count`` = ``instances``
                      each; D-TX, D-TXNI or S-TX; one TXC thread; no conflict workload, no
                      regular events.
    """

    variant: Literal["dtx", "dtxni", "stx", "blwait"]
    transactions: StrictInt = Field(default=20, ge=1)
    threads: StrictInt = Field(default=1, ge=1)
    instances: StrictInt = Field(default=1, ge=1)
    wait: Time = 0.2
    timeout: Time = 5.0
    regular_rate: Rate | None = None
    round_size: StrictInt = Field(default=2000, ge=1)
    round_txs: StrictInt = Field(default=4, ge=1)
    settle: Time = 1.0
    think: Time = 0.0
    abort_every: StrictInt = Field(default=0, ge=0)
    conflict: StrictBool = False
    scenario: Literal["dispatch", "advpub"] = "dispatch"
    snapshot_keep: Time = 30.0
    hold_timeout: Time = 10.0


class Placement(StrictModel):
    """``placement`` of a transactions topology (nothing to place: clients use ``attach``)."""


ClientParams = None

NODE_ROLES = {"broker"}
CLIENT_ROLES = {"coordinator", "dispatcher", "agent"}
ACYCLIC = "forest"
BUILDS_ON = ("pubsub",)  # its nodes reuse the pub/sub core (its events appear in the runs)

_PER_INSTANCE = {"coordinator": 1, "dispatcher": 1, "agent": 2}
_ADVPUB = {"coordinator": 1, "agent": 1}  # params.scenario advpub: C2 (the TXC) and C1


def check(topology) -> list:
    """One client group per role, counts that match ``params.instances``, no pub/sub keys."""
    problems = []
    p = topology.protocol_params
    per_instance = _PER_INSTANCE
    if p.scenario == "advpub":
        per_instance = _ADVPUB
        for key, bad, why in (("variant", p.variant == "blwait", "needs a transactional variant (dtx, dtxni, stx)"),
                              ("threads", p.threads != 1, "runs one TXC thread (threads: 1)"),
                              ("conflict", p.conflict, "has no conflict workload"),
                              ("regular_rate", p.regular_rate is not None, "has no regular events")):
            if bad:
                problems.append(topology.problem(("params", key), f"scenario advpub {why}"))
    by_role: dict[str, list[str]] = {}
    for name, g in topology.clients.items():
        by_role.setdefault(g.role, []).append(name)
        for key in ("rate", "filter", "size"):
            if getattr(g, key, None) is not None:
                hint = " (regular events: params.regular_rate)" if key == "rate" else ""
                problems.append(topology.problem(("clients", name, key),
                                                 f"transactions clients take no {key}{hint}"))
    for name, g in topology.clients.items():
        if p.scenario == "advpub" and g.role in CLIENT_ROLES and g.role not in per_instance:
            problems.append(topology.problem(("clients", name, "role"), f"scenario {p.scenario} has no "
                                             f"{g.role} role (roles: {', '.join(per_instance)})"))
    for role, per in per_instance.items():
        names = by_role.get(role, [])
        if not names:
            problems.append(topology.problem(("clients",), f"the scenario needs one client group "
                                             f"with role {role}"))
            continue
        for extra in names[1:]:
            problems.append(topology.problem(("clients", extra, "role"),
                                             f"only one {role} group (already {names[0]!r}); "
                                             f"use params.instances for more scenario instances"))
        g = topology.clients[names[0]]
        want = per * p.instances
        if g.count != want:
            problems.append(topology.problem(("clients", names[0], "count"),
                                             f"{'an' if role[0] in 'aeiou' else 'a'} {role} group needs count {want} "
                                             f"({per} per instance, params.instances = {p.instances})"))
    if p.variant != "blwait" and p.transactions < p.instances * p.threads:
        problems.append(topology.problem(("params", "transactions"),
                                         f"at least one transaction per TXC thread "
                                         f"(instances x threads = {p.instances * p.threads})"))
    if p.variant == "blwait" and p.wait >= p.timeout:
        problems.append(topology.problem(("params", "wait"), "wait must be shorter than timeout"))
    return problems
