"""Topology rules of the ``mobility`` protocol (Hu et al., transactional client mobility).

Mobile clients live inside the broker processes (a broker crash takes them with it, section
4.1 of the paper), so they are not ``clients:`` groups (each of which is a process): they are
declared under ``params.mobile``. Stationary publishers (and subscribers) are ordinary
``clients:`` groups with the pubsub keys (``testbed/protocols/pubsub/topology.py``).

``params`` (times in seconds once validated; the brokers read the same keys,
``testbed/protocols/mobility/nodes/broker.py``):

``movement``      ``reconfiguration`` (the paper's transactional protocol) or ``covering``
                  (the traditional unsubscribe / resubscribe movement)
``covering``      routing-table covering: default ``off`` for reconfiguration (required) and
                  ``retract`` for covering (``active``/``lazy``/``off`` also allowed there)
``move_timeout``  the 3PC timeout: a source still waiting for (2) after it aborts the move
``quiesce``       no move starts in the last ``quiesce`` of the run (so moves can finish)
``drain``         how long past its duration a run without scheduled actions may wait for the
                  moves still open (a broker reports ``finished`` once its workload time is over
                  and no move it began is open; the run ends when every broker does, plus 2 s)
``settle``        wait after the nodes are up before the workload starts
``tables_interval`` how often brokers log table sizes and per-move traffic
``mobile``        mapping group name -> mobile client group (below)

A mobile group (``params.mobile.<name>``): ``count``; ``workload`` covered | chained | tree |
distinct | random (the filters of ``testbed/protocols/mobility/nodes/workloads.py``); ``assign`` random |
round-robin | single-root (template per client; single-root: client 0 holds template 1, the
others 2..10 round-robin, as Fig 11); ``start`` a list of brokers or ``random``; ``start_by``
client (client i starts at ``start[i % len]``) | template (template k at ``start[(k-1) % len]``:
odd templates at the first broker, even at the second, as Fig 8); ``routes`` a list of broker
pairs (a client moves back and forth between the ends of the route holding its start broker;
without routes it moves to a random other broker); ``pause`` between moves; ``first_move``
(the first move is at a uniform offset in [0, first_move) after the client joined, default
``pause``); ``join`` (a join window: each client connects and subscribes at a uniform time in
[0, join) after t0, then starts its movement pattern; default 0: every client joins at start-up,
before t0); ``moving``
``all`` | N (the first N clients) | ``{templates: [k, ...]}``; ``seed``.

Schedule actions (``faults`` entries, ``SCHEDULE`` below): ``{at, move: {client, to}}`` moves a
mobile client (one that does not move on its own) to broker ``to``; ``{at, reject: bN, for}``
makes broker bN refuse incoming moves for a while (the target's (3)). ``check`` follows every
client along the schedule (its start broker, the scheduled moves, rejects that make a move
fail, crashes that take clients with them) and reports moves that cannot happen.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import Field, StrictInt, field_validator, model_validator

from testbed.protocols.mobility.nodes.workloads import TEMPLATES, WORKLOADS, assign, broker_order
from testbed.topology.protocols import ActionError, HostedClients, ProtocolCall, ScheduleAction
from testbed.protocols.pubsub.topology import ClientParams as _PubsubClientParams
from testbed.protocols.pubsub.topology import check as _pubsub_check
from testbed.topology.schema import Name, StrictModel
from testbed.protocols.pubsub.nodes.clients import parse_generator
from testbed.topology.units import Rate, Time


class Moving(StrictModel):
    templates: list[StrictInt] = Field(min_length=1)

    @field_validator("templates")
    @classmethod
    def _range(cls, v: list[int]) -> list[int]:
        for k in v:
            if not 1 <= k <= TEMPLATES:
                raise ValueError(f"template {k} is not in 1..{TEMPLATES}")
        return v


class MobileGroup(StrictModel):
    count: StrictInt = Field(ge=1)
    role: Literal["subscriber", "publisher"] = "subscriber"
    rate: Rate | None = None  # publishers: publications per second each
    attrs: dict[str, Any] | None = None  # publishers: the attribute generators (default: the spec's)
    workload: Literal[WORKLOADS] = "random"  # type: ignore[valid-type]
    assign: Literal["random", "round-robin", "single-root"] = "random"
    start: list[Name] | Literal["random"] = "random"
    start_by: Literal["client", "template"] = "client"
    routes: list[list[Name]] | None = None
    pause: Time = 10.0
    first_move: Time | None = None
    join: Time = 0.0  # clients join at a uniform time in [0, join) after t0 (0: at start-up, before t0)
    moving: Any = "all"  # "all" | N | {templates: [k, ...]} (checked below, one error each)
    seed: StrictInt = 0

    @field_validator("start")
    @classmethod
    def _start(cls, v):
        if isinstance(v, list) and not v:
            raise ValueError("start needs at least one broker (or 'random')")
        return v

    @field_validator("routes")
    @classmethod
    def _routes(cls, v):
        for r in v or []:
            if len(r) != 2 or r[0] == r[1]:
                raise ValueError(f"a route is two different brokers, e.g. [b1, b13], not {r}")
        return v

    @field_validator("pause")
    @classmethod
    def _pause(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("pause must be > 0")
        return v

    @field_validator("moving")
    @classmethod
    def _moving(cls, v):
        if v == "all" or (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
            return v
        if isinstance(v, dict) and set(v) == {"templates"}:
            return Moving.model_validate(v).model_dump()
        raise ValueError("moving is 'all', a number of clients >= 0, or {templates: [k, ...]}")

    @model_validator(mode="after")
    def _by(self) -> "MobileGroup":
        if self.start_by == "template" and self.start == "random":
            raise ValueError("start_by: template needs a list of start brokers")
        if self.role == "publisher":
            if not self.rate:
                raise ValueError("a mobile publisher group needs rate (publications per second each)")
            for a, v in (self.attrs or {}).items():
                try:
                    parse_generator(v)
                except ValueError as e:
                    raise ValueError(f"attrs.{a}: {e}") from None
        elif self.rate is not None or self.attrs is not None:
            raise ValueError("rate and attrs are for mobile publishers (role: publisher)")
        if self.join > 0 and self.role == "publisher":
            raise ValueError("join is for mobile subscribers (publishers are created at start-up)")
        return self


class Params(StrictModel):
    """Top-level ``params`` of a mobility topology."""

    movement: Literal["reconfiguration", "covering"] = "reconfiguration"
    covering: Literal["off", "active", "lazy", "retract"] | None = None
    move_timeout: Time = 5.0
    quiesce: Time = 3.0
    drain: Time = 30.0
    settle: Time = 1.0
    tables_interval: Time = 1.0
    mobile: dict[Name, MobileGroup] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _covering(self) -> "Params":
        if self.covering is None:
            self.covering = "off" if self.movement == "reconfiguration" else "retract"
        elif self.movement == "reconfiguration" and self.covering != "off":
            raise ValueError("movement: reconfiguration needs covering: off (tentative entries are "
                             "per subscription)")
        if self.move_timeout <= 0:
            raise ValueError("move_timeout must be > 0")
        if self.movement == "covering" and any(g.role == "publisher" for g in self.mobile.values()):
            raise ValueError("mobile publishers move with the reconfiguration protocol only (section 4.4)")
        return self


class Placement(StrictModel):
    """``placement`` of a mobility topology (nothing to place)."""


ClientParams = _PubsubClientParams

NODE_ROLES = {"broker"}
CLIENT_ROLES = {"publisher", "subscriber"}
ACYCLIC = "forest"
BUILDS_ON = ("pubsub",)  # its nodes reuse the pub/sub core (its events appear in the runs)


def check(topology) -> list:
    """Brokers named by mobile groups exist; names do not clash; the overlay is connected; the
    schedule's moves and rejects can happen (``check_schedule``)."""
    problems = list(_pubsub_check(topology))
    problems += check_schedule(topology)
    p = topology.params if hasattr(topology, "params") else {}
    mobile = (p or {}).get("mobile") or {}
    brokers = [n for n, v in topology.nodes.items() if v.role == "broker"]
    bset = set(brokers)
    for g, spec in mobile.items():
        at = ("params", "mobile", g)
        if g in topology.nodes or g in topology.clients:
            problems.append(topology.problem(at, f"mobile group {g!r} has the name of a node or client group"))
        start = spec.get("start", "random")
        if isinstance(start, list):
            for i, b in enumerate(start):
                if b not in bset:
                    problems.append(topology.problem(at + ("start", i), f"unknown broker {b!r}"))
        routes = spec.get("routes") or []
        for i, r in enumerate(routes):
            for j, b in enumerate(r):
                if b not in bset:
                    problems.append(topology.problem(at + ("routes", i, j), f"unknown broker {b!r}"))
        if routes and isinstance(start, list):
            ends = {b for r in routes for b in r}
            for i, b in enumerate(start):
                if b in bset and b not in ends:
                    problems.append(topology.problem(at + ("start", i),
                                                     f"start broker {b!r} is on no route: clients "
                                                     "starting there would not know where to move"))
        if routes and start == "random":
            problems.append(topology.problem(at + ("routes",), "routes need a list of start brokers "
                                             "on them (start: [...])"))
        if len(brokers) < 2 and spec.get("moving", "all") != 0:
            problems.append(topology.problem(at, "moving clients need at least two brokers"))
        vg = (getattr(getattr(topology, "protocol_params", None), "mobile", None) or {}).get(g)
        join = float(getattr(vg, "join", 0.0) or 0.0)
        if join and join >= float(topology.duration):
            problems.append(topology.problem(at + ("join",), f"join window {join:g}s is not shorter than "
                                             f"the run ({float(topology.duration):g}s): some clients would never join"))
    # connected: a move needs a path between any two brokers
    if brokers:
        nb: dict[str, set[str]] = {b: set() for b in brokers}
        for b in brokers:
            for n in topology.nodes[b].neighbors:
                if n in nb:
                    nb[b].add(n)
                    nb[n].add(b)
        seen, stack = {brokers[0]}, [brokers[0]]
        while stack:
            for n in nb[stack.pop()]:
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
        for b in brokers:
            if b not in seen:
                problems.append(topology.problem(("nodes", b), f"broker {b!r} is not connected to "
                                                 f"{brokers[0]!r}: moves need one connected tree"))
    return problems


# -- schedule actions ---------------------------------------------------------------------------
class MoveSpec(StrictModel):
    """``move: {client, to}``: MOVE(client, to), sent to every broker (the one hosting the client
    starts it; the schedule does not know where a client is after a rejected or aborted move)."""

    client: str
    to: Name


def _brokers(roles: dict[str, str]) -> list[str]:
    return broker_order([n for n, r in roles.items() if r == "broker"])


def _move_call(value: MoveSpec, for_s: float | None, roles: dict[str, str]) -> ProtocolCall:
    brokers = _brokers(roles)
    if value.to not in brokers:
        close = difflib.get_close_matches(value.to, brokers, n=1, cutoff=0.6)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        what = f"{value.to!r} is not a broker" if value.to in roles else f"unknown broker {value.to!r}{hint}"
        raise ActionError(what, ("to",))
    return ProtocolCall(targets=tuple(brokers), op="move",
                        args={"client": value.client, "to": value.to, "quiet": True}, any_ok=True,
                        text=f"{value.client} -> {value.to}")


def _reject_call(value: str, for_s: float | None, roles: dict[str, str]) -> ProtocolCall:
    if roles.get(value) != "broker":
        raise ActionError(f"{value!r} is not a broker" if value in roles else f"unknown broker {value!r}")
    return ProtocolCall(targets=(value,), op="reject", args={"for": float(for_s or 0.0)},
                        text=f"{value} refuses moves for {for_s:g}s")


SCHEDULE = {
    "move": ScheduleAction(MoveSpec, _move_call, for_="never", help="{at, move: {client, to}}"),
    "reject": ScheduleAction(Name, _reject_call, for_="required", help="{at, reject: bN, for: DUR}"),
}


def mobile_clients(topology) -> dict[str, dict[str, Any]]:
    """client name -> its assignment (``workloads.assign``: start broker, moves, group, ...), for a
    topology whose params validated ({} otherwise). A topology has no repeat: this is the first
    repeat's assignment, which the schedule's moves are validated against (a later repeat draws
    its own clients; a scheduled move its placement makes void is skipped at run time, recorded)."""
    p = topology.protocol_params
    if p is None:
        return {}
    brokers = broker_order([n for n, v in topology.nodes.items() if v is not None and v.role == "broker"])
    out: dict[str, dict[str, Any]] = {}
    for g, spec in p.mobile.items():
        for c in assign(dict(spec.model_dump(), name=g), brokers):
            out[c["client"]] = dict(c, group=g)
    return out


def check_schedule(topology) -> list:
    """Follow every mobile client along the schedule; report moves and rejects that cannot happen."""
    problems: list = []
    faults = [(f.at, i, f) for i, f in enumerate(topology.faults or []) if f is not None]
    if not any(f.protocol_action for _, _, f in faults):
        return problems
    clients = mobile_clients(topology)
    brokers = {n for n, v in topology.nodes.items() if v is not None and v.role == "broker"}
    # only reconfiguration negotiates ((1), (3)): the covering movement never asks the target
    reconf = topology.protocol_params is None or topology.protocol_params.movement == "reconfiguration"
    where = {c: (a["start"], "it starts there") for c, a in clients.items()}
    lost: dict[str, str] = {}  # client -> why
    rejecting: dict[str, list[tuple[float, float]]] = {}
    for at, i, f in sorted(faults, key=lambda x: (x[0], x[1])):
        kind = f.kind
        if kind == "crash":
            for c, (b, _) in where.items():
                if b == f.crash and c not in lost:
                    lost[c] = f"its broker {b} crashed at {at:g}s (faults[{i}]) and took it along"
        elif kind == "reject":
            b = f.value
            if b not in brokers:
                continue  # reported by the loader (_reject_call)
            rejecting.setdefault(b, []).append((at, at + float(f.for_ or 0.0)))
        elif kind == "move":
            v = f.value
            keys = ("faults", i, "move")
            if v.client not in clients:
                close = difflib.get_close_matches(v.client, sorted(clients), n=1, cutoff=0.6)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                names = ", ".join(sorted(clients)[:6]) + (" ..." if len(clients) > 6 else "")
                problems.append(topology.problem(keys + ("client",), f"unknown mobile client {v.client!r}{hint}"
                                                 + (f"; params.mobile declares {names}" if clients
                                                    else "; params.mobile declares none")))
                continue
            if v.to not in brokers:
                continue  # reported by the loader (_move_call)
            a = clients[v.client]
            if a["moves"]:
                problems.append(topology.problem(keys + ("client",), f"{v.client!r} also moves on its own "
                                                 f"(params.mobile.{a['group']}.moving): a scheduled move "
                                                 "needs a client that does not (e.g. moving: 0)"))
                continue
            if v.client in lost:
                problems.append(topology.problem(keys + ("client",), f"{v.client!r} is gone at {at:g}s: "
                                                 f"{lost[v.client]}"))
                continue
            here, why = where[v.client]
            if here == v.to:
                problems.append(topology.problem(keys + ("to",), f"{v.client!r} is already at {v.to} at "
                                                 f"{at:g}s ({why})"))
                continue
            if reconf and any(lo <= at < hi for lo, hi in rejecting.get(v.to, [])):
                continue  # the target refuses it: the client stays where it is
            where[v.client] = (v.to, f"moved there by faults[{i}]")
    return problems


def placement_at(plan, clients: list[dict[str, Any]], at_s: float) -> dict[str, str | None]:
    """client -> its broker at ``at_s`` as the schedule puts it (None: gone with a crashed broker),
    replaying the plan's actions as ``testbed validate`` follows the topology's schedule: a scheduled
    move puts the client at ``to`` unless ``to`` refuses moves then (reconfiguration), a crash of its
    broker takes it along. Clients that move on their own stay where they start (their moves depend
    on the run's timing)."""
    reconf = (plan.params or {}).get("movement", "reconfiguration") == "reconfiguration"
    where: dict[str, str | None] = {c["client"]: c["start"] for c in clients}
    own = {c["client"] for c in clients if c["moves"]}
    rejecting: dict[str, list[tuple[float, float]]] = {}
    for a in sorted(plan.actions, key=lambda a: a.at_s):
        if a.at_s > at_s:
            break
        call = a.call or {}
        if a.op == "crash":
            for c, b in where.items():
                if b is not None and b in a.target:
                    where[c] = None
        elif call.get("op") == "reject":
            for b in a.target:
                rejecting.setdefault(b, []).append((a.at_s, a.at_s + float(call.get("args", {}).get("for", 0.0))))
        elif call.get("op") == "move":
            args = call.get("args") or {}
            c, to = str(args.get("client", "")), str(args.get("to", ""))
            if c not in where or c in own or where[c] is None or where[c] == to:
                continue
            if reconf and any(lo <= a.at_s < hi for lo, hi in rejecting.get(to, [])):
                continue
            where[c] = to
    return where


def hosted_clients(plan, at_s: float | None = None) -> list[HostedClients]:
    """The mobile client groups (``params.mobile``): where their clients start (with ``at_s``: where
    the schedule puts them then, :func:`placement_at`), their workload and how they move
    (``testbed validate`` and ``testbed graph [--at T]`` show them)."""
    from testbed.topology.units import format_time

    mobile = (plan.params or {}).get("mobile") or {}
    brokers = broker_order([n for n, p in plan.nodes.items() if p.kind == "node" and p.role == "broker"])
    out = []
    for g, spec in mobile.items():
        clients = assign(dict(spec, name=g), brokers, plan.repeat_index)
        at: dict[str, int] = {}
        if at_s is None:
            for c in clients:
                at[c["start"]] = at.get(c["start"], 0) + 1
        else:
            for b in placement_at(plan, clients, at_s).values():
                if b is not None:
                    at[b] = at.get(b, 0) + 1
        movers = sum(1 for c in clients if c["moves"])
        if movers:
            routes = spec.get("routes")
            where = (" on " + ", ".join(f"{a}<->{b}" for a, b in routes)) if routes else " to random brokers"
            how = f"{movers} move every {format_time(float(spec.get('pause', 10.0)))}{where}"
        else:
            how = "move only when the schedule says"
        scheduled = sum(1 for a in plan.actions if a.op == "move"
                        and str(a.call.get("args", {}).get("client", "")).rsplit("-", 1)[0] == g)
        if scheduled:
            how += f"; {scheduled} scheduled move(s)"
        if at_s is not None and sum(at.values()) < len(clients):
            how += f"; {len(clients) - sum(at.values())} gone with crashed brokers by {format_time(at_s)}"
        out.append(HostedClients(name=g, role="mobile", count=len(clients), at_s=at_s,
                                 at={b: at[b] for b in brokers if b in at},
                                 text=(f"subscribers, workload {spec.get('workload', 'random')}; {how}"
                                       if spec.get("role", "subscriber") == "subscriber" else
                                       f"publishers, {float(spec.get('rate') or 0):g}/s each; {how}")))
    return out
