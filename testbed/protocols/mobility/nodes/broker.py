"""The mobility broker: a PADRES broker with a mobile container and a move coordinator.

Mobile clients live inside this process (``params.mobile``, see
``testbed/protocols/mobility/topology.py``): a broker crash takes its clients with it
(section 4.1 of Hu et al.). Every broker computes the same client assignment
(``workloads.assign``) and hosts the clients that start at it. A client's local routing
hop is ``@<client>``.

Reconfiguration movement (``params.movement: reconfiguration``, covering ``off``); every
message travels hop by hop along the overlay path S = p0 ... pk = T (so every message is
counted per link):

    (1) mneg   S -> T   mid, client, subs        T accepts (or rejects with (3))
    (2) mrec   T -> S   mid, subs                PREPARE at every path broker (tentative hop suc,
                                                 at T the local copy, queued)
    (3) mrej   T -> S   mid                      S resumes the client; outcome reject
    (4) mxfer  S -> T   mid, subs, delivered ids, queued notifications, state
                                                 S stops its copy, commits; COMMIT at every hop;
                                                 T merges and starts its copy
    (5) mdone  T -> S   mid                      S cleans its copy; outcome commit
    ABORT mabort S -> T mid, subs                S timed out in wait (``move_timeout``): rollback

A broker that has seen ABORT for a mid ignores a later (2) for it (it never prepares);
S answers a late (2) with ABORT.

Lost (4) (beyond the paper, which assumes reliable FIFO links): once S has sent (4) it has
stopped and committed, so it cannot abort; it re-sends (4) every ``move_timeout`` until (5)
arrives (a cut or a crashed path broker dropped it). (4) is idempotent: a hop that committed
already only relays it; a hop that lost its PREPARE (it crashed and restarted after (2) passed)
prepares and commits the entry from (4); a target that merged it already answers (5) again;
a restarted target without the queued copy starts the client from (4) (its queue died with
it). A (4) of a move older than one the hop has handled for the client is only relayed.
ABORT is re-sent to a neighbour whenever its connection comes back (``on_peer_up``: it restarted,
or a cut healed), since one may have been dropped meanwhile; it is idempotent.

The merge at T: the payload notifications in order, then T's own queue in arrival order skipping
ids the source delivered since the move began.

Covering movement (``movement: covering``, covering ``retract`` by default): S stops its
copy and unsubscribes (a wave ``<mid>/u``); it sends the client's state along the path
(``cxfer``); T starts a copy at once and subscribes with a new id (a wave ``<mid>/s``).
Each wave's end is detected with Dijkstra-Scholten acknowledgements (``mack``, counted as
move traffic); T sends ``cdone`` to S when its wave ended, and S ends the move when both
waves ended. Publications between the unsubscription and the new subscription are lost:
that is the protocol (no transactional guarantee).

A crash takes the broker's clients with it; a restarted broker (its ``state_dir`` counts
incarnations) hosts no clients and re-learns its routing state from its neighbours.

Control ops: ``move {client, to}`` (MOVE now), ``reject {for}`` (refuse incoming moves for
``for`` seconds: exercises (3)), ``copies`` (the container).
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from testbed.protocols.mobility.nodes import events as _events  # noqa: F401  (registers the mobility events)
from testbed.protocols.mobility.nodes.workloads import assign, broker_order
from testbed.protocols.pubsub.nodes.broker import Broker
from testbed.protocols.pubsub.nodes.clients import advertisement_for, make_attr_source, next_incarnation, parse_generator
from testbed.protocols.pubsub.nodes.filters import FilterError, parse_cached
from testbed.protocols.pubsub.nodes.routing import Out

PUBLISHER_ATTRS = {"w": "choice(cov,tree,chain,dist)", "x": "uniform(0,100)"}  # the spec's publishers
RECONF_KINDS = ("mneg", "mrec", "mrej", "mxfer", "mdone", "mabort")
COVER_KINDS = ("cxfer", "cdone", "mack")
REQS_KEPT = 16


class Copy:
    """One copy of a mobile client in this broker's container."""

    __slots__ = ("client", "filter", "subs", "state", "mid", "moves", "queue", "tracking", "route",
                 "moving", "offset", "pause", "timer", "group", "nsub", "advs", "rate", "seq", "ptimer",
                 "attrs", "reqs")

    def __init__(self, client: str, filter_text: str, subs: dict[str, str], state: str, mid: str,
                 moves: int, spec: dict[str, Any], advs: dict[str, str] | None = None) -> None:
        self.client = client
        self.advs = dict(advs or {})  # a mobile publisher's advertisements: adv_id -> filter text
        self.rate = float(spec.get("rate") or 0.0)  # publications/s (publishers)
        self.attrs = spec.get("attrs") or {}
        self.seq = int(spec.get("seq", 0))
        self.ptimer: Any = None  # a publisher publishes only while started (none while it moves)
        self.filter = filter_text
        self.subs = subs  # sub_id -> filter text
        self.state = state  # started | queued | stopped
        self.mid = mid  # the move that made this copy ("" for the initial one)
        self.moves = moves  # moves begun so far (the next mid is <client>#<moves+1>)
        self.queue: list[tuple[Any, ...]] = []  # notifications received while queued
        self.tracking: set[str] | None = None  # ids delivered since the current move began
        self.route = spec.get("route")
        self.moving = bool(spec.get("moves", True))
        self.offset = float(spec.get("offset", 0.0))
        self.pause = float(spec.get("pause", 10.0))
        self.group = spec.get("group", "")
        self.timer: Any = None
        self.nsub = int(spec.get("nsub", 1))
        # the ids of the scheduled move requests this client already moved for (the last REQS_KEPT),
        # travelling with it: a late copy of a broadcast request reaching its new broker is not a new move
        self.reqs: list[str] = list(spec.get("reqs") or [])[-REQS_KEPT:]

    def state_msg(self) -> dict[str, Any]:
        return {"filter": self.filter, "moves": self.moves, "route": self.route, "moving": self.moving,
                "pause": self.pause, "group": self.group, "nsub": self.nsub, "rate": self.rate,
                "attrs": self.attrs, "seq": self.seq, "reqs": self.reqs}


class Coord:
    """A coordinator: one per move and role at the source / target."""

    __slots__ = ("mid", "role", "state", "client", "path", "dst", "t0", "timer", "udone", "sdone", "subs", "advs",
                 "xfer")

    def __init__(self, mid: str, role: str, client: str, path: list[str], t0: int,
                 subs: dict[str, str], advs: dict[str, str] | None = None) -> None:
        self.mid, self.role, self.client, self.path, self.t0 = mid, role, client, path, t0
        self.dst = path[-1]
        self.state = "init"
        self.timer: Any = None
        self.udone = False
        self.sdone = False
        self.subs = subs
        self.advs = dict(advs or {})
        self.xfer: dict[str, Any] | None = None  # the source's (4), re-sent until (5) arrives


def owner_of(entry_id: str) -> str:
    """The client an adv/sub id belongs to (ids are ``<client>:<suffix>``)."""
    return entry_id.rsplit(":", 1)[0]


class MobilityBroker(Broker):
    RESYNC_SWEEP = False  # no full re-syncs or sweeps: moves commit routes silently on both sides of a hop (pubsub broker.py)

    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        p = self.config.get("params") or {}
        self.movement: str = p.get("movement", "reconfiguration")
        self.move_timeout = float(p.get("move_timeout", 5.0))
        self.quiesce = float(p.get("quiesce", 3.0))
        self.table.changes = []
        d = self.config.get("directory") or {}
        self.brokers = [n for n, v in d.items() if v.get("kind") == "node" and v.get("role") == "broker"]
        if self.name not in self.brokers:
            self.brokers.append(self.name)
        self.graph = {n: list((d.get(n) or {}).get("neighbors") or []) for n in self.brokers}
        self.graph[self.name] = list(self.table.neighbors)
        self._paths: dict[str, list[str]] = {}
        self.copies: dict[str, Copy] = {}
        self.coords: dict[str, Coord] = {}
        self.aborted: set[str] = set()
        self.src_cleaned: set[str] = set()  # covering moves whose source copy was replaced before they ended
        self.seen_move: dict[str, int] = {}  # client -> the highest move number it handled here
        self.abort_out: dict[str, tuple[str, dict[str, Any]]] = {}  # mid -> (next hop, the ABORT sent there)
        self.reject_until = 0
        # wave -> [{neighbour: its messages not acknowledged yet} (the deficit), parent (None = root), mid]
        self.waves: dict[str, list[Any]] = {}
        self.down_peers: set[str] = set()  # neighbours whose connection is lost (until it is back)
        self.traffic: dict[str, dict[str, dict[str, int]]] = {}
        self.mcount = dict.fromkeys(("moves_begun", "moves_committed", "moves_aborted", "moves_rejected",
                                     "merged", "skipped", "local_unmatched"), 0)
        self._running = False
        self._end_mono = 0
        # a restarted broker starts empty: its clients died with it (section 4.1) and the ones that
        # started here may live elsewhere now, so only the first incarnation creates them
        self.incarnation = next_incarnation(self.config.get("state_dir"))
        self.joining: list[dict[str, Any]] = []  # clients that connect after t0 (their spec; ``join_at``)
        self._join_timers: list[Any] = []
        for gname, g in (p.get("mobile") or {}).items() if self.incarnation == 0 else ():
            spec = dict(g, name=gname)
            for c in assign(spec, broker_order(self.brokers), int(self.config.get("repeat_index") or 0)):
                if c["start"] != self.name:
                    continue
                c = dict(c, pause=float(g.get("pause", 10.0)), group=gname)
                if g.get("role", "subscriber") == "publisher":  # section 4.4: a mobile publisher
                    attrs = g.get("attrs") or PUBLISHER_ATTRS
                    adv = advertisement_for({a: parse_generator(v) for a, v in attrs.items()})
                    c.update(rate=g.get("rate"), attrs=attrs)
                    self.copies[c["client"]] = Copy(c["client"], "", {}, "started", "", 0, c,
                                                    advs={f"{c['client']}:a1": adv})
                    continue
                if c.get("join_at", 0.0) > 0:  # joins during the run (the group's ``join`` window)
                    self.joining.append(c)
                    continue
                self.copies[c["client"]] = self._initial_copy(c)

    @staticmethod
    def _initial_copy(spec: dict[str, Any]) -> Copy:
        """A subscriber's first copy, at the broker it starts at (at start-up or when it joins)."""
        sub_id = f"{spec['client']}:s1"
        return Copy(spec["client"], spec["filter"], {sub_id: spec["filter"]}, "started", "", 0, spec)

    def _connect(self, c: Copy) -> None:
        """A hosted client connects: its copy starts and its subscriptions enter the routing table."""
        self.rt.log("client_state", mid="", client=c.client, copy="init", state="started")
        for sid, text in c.subs.items():
            self.rt.log("subscribe", client=c.client, sub_id=sid, filter=text, broker=self.name)
            self.emit(self.table.subscribe(sid, parse_cached(text), "@" + c.client))

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        await super().start()
        for c in list(self.copies.values()):
            self._connect(c)
        self._drain_changes("")
        if any(c.advs for c in self.copies.values()):
            self.rt.call_later(0.0, self._advertise_hosted)  # once start() returned (peers come up)

    def _advertise_hosted(self) -> None:
        for c in list(self.copies.values()):
            for aid, text in c.advs.items():
                self.rt.log("advertise", client=c.client, adv_id=aid, filter=text, broker=self.name)
                self.emit(self.table.advertise(aid, parse_cached(text), "@" + c.client))
        self._drain_changes("")

    async def start_workload(self, t0_wall_ns: int, duration_s: float) -> None:
        offset_s = (t0_wall_ns - self.rt.wall_ns()) / 1e9
        self._running = True
        self._end_mono = self.rt.mono_ns() + int((offset_s + duration_s) * 1e9)
        for c in self.copies.values():
            if c.moving and c.state == "started":
                c.timer = self.rt.call_later(max(0.0, offset_s + c.offset), self._move_tick, c.client, c)
            if c.rate > 0:
                self._start_publishing(c, max(0.0, offset_s))
        for spec in self.joining:
            self._join_timers.append(self.rt.call_later(max(0.0, offset_s + spec["join_at"]), self._join, spec))

    def _join(self, spec: dict[str, Any]) -> None:
        """A client of a join window connects here: its copy starts and subscribes (as the ones made at
        start-up do), then its movement pattern begins (first move ``offset`` after joining)."""
        if not self._running or spec["client"] in self.copies:
            return
        c = self.copies[spec["client"]] = self._initial_copy(spec)
        self._connect(c)
        self._drain_changes("")
        if c.moving:
            c.timer = self.rt.call_later(c.offset, self._move_tick, c.client, c)

    async def stop_workload(self) -> None:
        self._running = False
        for h in self._join_timers:
            h.cancel()
        self._join_timers = []
        for c in self.copies.values():
            if c.timer is not None:
                c.timer.cancel()
                c.timer = None
            if c.ptimer is not None:
                c.ptimer.cancel()
                c.ptimer = None

    # -- mobile publishers (section 4.4) ------------------------------------------
    def _start_publishing(self, c: Copy, delay_s: float) -> None:
        if c.ptimer is None and c.rate > 0 and self._running:
            c.ptimer = self.rt.call_later(delay_s, self._publish_tick, c.client, c)

    def _publish_tick(self, client: str, c: Copy) -> None:
        c.ptimer = None
        if self.copies.get(client) is not c or not self._running:
            return
        if self.rt.mono_ns() >= self._end_mono:
            return
        if c.state == "started":
            self._publish(c, self._draw(c))
            c.ptimer = self.rt.call_later(1.0 / c.rate, self._publish_tick, client, c)
        # a stopped copy stops publishing; the target's copy goes on after the merge

    def _draw(self, c: Copy) -> dict[str, Any]:
        gens = {a: parse_generator(v) for a, v in c.attrs.items()}
        return make_attr_source(gens, self.rt.rng)()

    def _publish(self, c: Copy, attrs: dict[str, Any]) -> None:
        """Issue one publication of a mobile publisher hosted here: logged as the pub/sub core's
        ``publish`` (broker = this one), routed from the local hop ``@<client>``."""
        c.seq += 1
        pub_id = f"{c.client}:{c.seq}"
        self.rt.log("publish", client=c.client, pub_id=pub_id, seq=c.seq, attrs=attrs, size=0, broker=self.name)
        msg = {"k": "pub", "id": pub_id, "c": c.client, "s": c.seq, "a": attrs, "p": b"",
               "t": self.rt.wall_ns(), "h": 0}
        self._route(msg, "@" + c.client)

    async def stop(self) -> None:
        await self.stop_workload()
        self._flush_traffic()
        self.rt.log("rt_dump", **self.table.dump())
        await super().stop()

    def _log_tables(self) -> None:
        super()._log_tables()
        self._flush_traffic()

    def status(self) -> dict[str, Any]:
        s = super().status()
        moving = sum(1 for c in self.coords.values() if c.role == "src")
        s.update(self.mcount, copies=len(self.copies), movement=self.movement, moving=moving)
        # the run-end condition the controller watches (faults/schedule.py all_finished): the
        # workload's time is over and no move this broker began is still open, so a run whose moves
        # outlast ``quiesce`` (saturated brokers) waits for them, up to ``params.drain``
        s["finished"] = self._end_mono > 0 and self.rt.mono_ns() >= self._end_mono and moving == 0
        return s

    def on_control(self, op: str, args: dict[str, Any]) -> dict[str, Any] | None:
        if op == "move":
            # the schedule sends a move to every broker (it does not know where the client is now):
            # with ``quiet`` a broker that does not host the client says so without logging a skip;
            # so does the target when the request reaches it after the move already brought the
            # client there (the calls go out together; under load the target's can come last)
            client, to = str(args.get("client", "")), str(args.get("to", ""))
            c = self.copies.get(client)
            if args.get("quiet") and (c is None or c.state != "started"):
                return {"ok": False, "error": "client not started here", "reason": "client not started here"}
            if args.get("quiet") and to == self.name:
                return {"ok": False, "error": "client already at the target", "reason": "client already at the target"}
            req = str(args.get("req") or "")
            if req and c is not None and req in c.reqs:
                # the client moved here for this very request (a copy of it came late), and perhaps
                # moved on by itself since: acting on it again would be a second move
                return {"ok": False, "error": "request already served", "reason": "request already served"}
            reason = self.start_move(client, to, scheduled=True, req=req)
            out = {"ok": reason is None, "reason": reason or ""}
            if reason is not None:
                out["error"] = reason
            return out
        if op == "reject":
            secs = float(args.get("for", 0.0))
            self.reject_until = self.rt.mono_ns() + int(secs * 1e9)
            return {"ok": True, "until_mono_ns": self.reject_until}
        if op == "copies":
            return {"copies": {c.client: c.state for c in self.copies.values()}}
        return None

    # -- paths and sending --------------------------------------------------------
    def path_to(self, dst: str) -> list[str]:
        p = self._paths.get(dst)
        if p is None:
            prev: dict[str, str | None] = {self.name: None}
            q = deque([self.name])
            while q:
                x = q.popleft()
                for y in self.graph.get(x, ()):
                    if y not in prev:
                        prev[y] = x
                        q.append(y)
            if dst not in prev:
                return []
            p = [dst]
            while p[-1] != self.name:
                p.append(prev[p[-1]])  # type: ignore[arg-type]
            p.reverse()
            self._paths[dst] = p
        return p

    def _count(self, mid: str, dst: str, kind: str) -> None:
        t = self.traffic.get(mid)
        if t is None:
            t = self.traffic[mid] = {"kind": {}, "link": {}}
        t["kind"][kind] = t["kind"].get(kind, 0) + 1
        t["link"][dst] = t["link"].get(dst, 0) + 1

    def _flush_traffic(self) -> None:
        for mid, t in self.traffic.items():
            self.rt.log("move_traffic", mid=mid, msgs=sum(t["kind"].values()), by_kind=t["kind"],
                        by_link=t["link"])
        self.traffic = {}

    def _send_m(self, dst: str, msg: dict[str, Any]) -> None:
        self._count(msg["mid"], dst, msg["k"])
        self.rt.send(dst, msg)

    def _along(self, msg: dict[str, Any], toward_target: bool) -> None:
        """Relay a move message one hop along its path."""
        path = msg["path"]
        i = path.index(self.name)
        j = i + 1 if toward_target else i - 1
        if 0 <= j < len(path):
            self._send_m(path[j], msg)

    def _drain_changes(self, default_mid: str) -> None:
        ch = self.table.changes
        if not ch:
            return
        log = self.rt.log
        for c in ch:
            log("rt_change", mid=c.cause or default_mid, id=c.id, owner=owner_of(c.id), op=c.op,
                table=c.table, hop=c.hop)
        ch.clear()

    # -- moves: initiation --------------------------------------------------------
    def _move_tick(self, client: str, copy: Copy) -> None:
        if self.copies.get(client) is not copy:
            return
        copy.timer = None
        if not self._running:
            return
        if copy.route:
            a, b = copy.route
            dst = b if self.name == a else a
        else:
            others = [b for b in self.brokers if b != self.name]
            if not others:
                return
            dst = self.rt.rng.choice(broker_order(others))
        self.start_move(client, dst)

    def _schedule_next(self, copy: Copy) -> None:
        if copy.moving and self._running and copy.timer is None:
            copy.timer = self.rt.call_later(copy.pause, self._move_tick, copy.client, copy)

    def start_move(self, client: str, dst: str, scheduled: bool = False, req: str = "") -> str | None:
        """MOVE(client, dst) at this (source) broker; the reason it could not start, or None.
        ``req``: the id of the scheduled request it serves (kept in the client's state, sent on)."""
        c = self.copies.get(client)
        reason = None
        if c is None or c.state != "started":
            reason = "client not started here"
        elif any(co.client == client and co.role == "src" for co in self.coords.values()):
            reason = "client already moving"
        elif dst == self.name:
            reason = "client already at the target"
        elif dst not in self.graph or not self.path_to(dst):
            reason = "unknown or unreachable broker"
        elif not scheduled and self.rt.mono_ns() + int(self.quiesce * 1e9) > self._end_mono:
            reason = "the run is ending (quiesce)"
        if reason is not None:
            self.rt.log("move_skipped", client=client, dst=dst, reason=reason)
            if c is not None and c.state == "started" and reason == "unknown or unreachable broker":
                self._schedule_next(c)
            return reason
        assert c is not None
        if req:
            c.reqs = (c.reqs + [req])[-REQS_KEPT:]
        if c.timer is not None:
            c.timer.cancel()
            c.timer = None
        c.moves += 1
        mid = f"{client}#{c.moves}"
        self._note_move(client, c.moves)
        path = self.path_to(dst)
        co = Coord(mid, "src", client, path, self.rt.mono_ns(), dict(c.subs), c.advs)
        self.coords[mid] = co
        self.mcount["moves_begun"] += 1
        self.rt.log("move_begin", mid=mid, client=client, src=self.name, dst=dst, movement=self.movement,
                    path=path)
        c.tracking = set()
        if self.movement == "reconfiguration":
            co.state = "wait"
            self._send_m(path[1], {"k": "mneg", "mid": mid, "c": client, "path": path, "subs": c.subs,
                                   "advs": c.advs})
            co.timer = self.rt.call_later(self.move_timeout, self._src_timeout, mid)
        else:
            self._cover_start(c, co)
        return None

    def _note_move(self, client: str, n: int) -> None:
        if n > self.seen_move.get(client, 0):
            self.seen_move[client] = n

    @staticmethod
    def _move_no(mid: str) -> int:
        return int(mid.rsplit("#", 1)[1])

    def _end_move(self, co: Coord, outcome: str) -> None:
        dur_ms = (self.rt.mono_ns() - co.t0) / 1e6
        self.rt.log("move_end", mid=co.mid, client=co.client, src=self.name, dst=co.dst,
                    movement=self.movement, outcome=outcome, dur_ms=dur_ms, path_len=len(co.path) - 1)
        self.mcount["moves_" + {"commit": "committed", "abort": "aborted", "reject": "rejected"}[outcome]] += 1
        if co.timer is not None:
            co.timer.cancel()
        self.coords.pop(co.mid, None)

    def _resume(self, co: Coord) -> None:
        c = self.copies.get(co.client)
        if c is not None:
            c.state = "started"
            c.tracking = None
            self.rt.log("client_state", mid=co.mid, client=co.client, copy="src", state="started")
            self._schedule_next(c)
            self._start_publishing(c, 0.0)

    # -- messages -----------------------------------------------------------------
    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        k = msg.get("k")
        if k in RECONF_KINDS or k in COVER_KINDS:
            try:
                getattr(self, "_on_" + k)(src, msg)
            except (KeyError, TypeError, ValueError, FilterError) as e:
                self._bad(src, msg, f"malformed {k}: {e}")
            return
        if "w" in msg and src in self._nset and k in ("sub", "unsub"):
            self._on_wave(src, msg)
            return
        super().on_message(src, msg)
        if self.table.changes:
            self._drain_changes("")

    # (1) negotiate
    def _on_mneg(self, src: str, msg: dict[str, Any]) -> None:
        path, mid, client = msg["path"], msg["mid"], msg["c"]
        if path[-1] != self.name:
            self._along(msg, True)
            return
        here = self.copies.get(client)
        if self.rt.mono_ns() < self.reject_until or (here is not None and here.state != "stopped"):
            self.rt.log("move_step", mid=mid, client=client, step="reject_sent")
            self._along({"k": "mrej", "mid": mid, "path": path}, False)
            return
        subs, advs = dict(msg["subs"]), dict(msg.get("advs") or {})
        self._note_move(client, self._move_no(mid))
        c = Copy(client, next(iter(subs.values()), ""), subs, "queued", mid, int(mid.rsplit("#", 1)[1]), {},
                 advs=advs)
        self.copies[client] = c
        co = Coord(mid, "tgt", client, path, self.rt.mono_ns(), subs, advs)
        co.state = "ready"
        self.coords[mid] = co
        self.rt.log("client_state", mid=mid, client=client, copy="tgt", state="queued")
        for sid, text in subs.items():
            self.table.prepare_sub(mid, sid, parse_cached(text), "@" + client)
        for aid, text in advs.items():
            self.table.prepare_adv(mid, aid, parse_cached(text), "@" + client)
        self._drain_changes(mid)
        self._along({"k": "mrec", "mid": mid, "c": client, "path": path, "subs": subs, "advs": advs}, False)

    # (2) reconfig: PREPARE hop by hop toward S
    def _on_mrec(self, src: str, msg: dict[str, Any]) -> None:
        path, mid = msg["path"], msg["mid"]
        if mid in self.aborted:
            if path[0] == self.name:  # a late (2) at the source: answer with ABORT
                self._send_abort(mid, msg["c"], path, msg["subs"], msg.get("advs"))
            return
        i = path.index(self.name)
        if i > 0:
            self._note_move(msg["c"], self._move_no(mid))
            for sid, text in msg["subs"].items():
                self.table.prepare_sub(mid, sid, parse_cached(text), path[i + 1])
            for aid, text in (msg.get("advs") or {}).items():
                self.table.prepare_adv(mid, aid, parse_cached(text), path[i + 1])
            self._drain_changes(mid)
            self._along(msg, False)
            return
        co = self.coords.get(mid)
        c = self.copies.get(msg["c"])
        if co is None or co.state != "wait" or c is None:
            self._send_abort(mid, msg["c"], path, msg["subs"], msg.get("advs"))
            return
        for sid, text in c.subs.items():
            self.table.prepare_sub(mid, sid, parse_cached(text), path[1])
        for aid, text in c.advs.items():
            self.table.prepare_adv(mid, aid, parse_cached(text), path[1])
        # stop the copy, ship its state (4), then commit here
        c.state = "stopped"
        self.rt.log("client_state", mid=mid, client=c.client, copy="src", state="stopped")
        delivered = sorted(c.tracking or ())
        payload = [list(q) for q in c.queue]
        c.queue = []
        self.rt.log("move_step", mid=mid, client=c.client, step="xfer_sent")
        # a publisher's COMMIT first: the subscriptions it now attracts toward path[1] go ahead of (4)
        for aid in c.advs:
            self.emit(self.table.commit_adv(mid, aid, None))
        xfer = {"k": "mxfer", "mid": mid, "c": c.client, "path": path, "subs": dict(c.subs),
                "advs": dict(c.advs), "delivered": delivered, "payload": payload, "state": c.state_msg()}
        self._send_m(path[1], xfer)
        for sid in c.subs:
            self.table.commit_sub(mid, sid, None)
        self._drain_changes(mid)
        co.state = "commit"
        if co.timer is not None:
            co.timer.cancel()
        co.xfer = xfer
        co.timer = self.rt.call_later(self.move_timeout, self._xfer_retry, mid)

    def _xfer_retry(self, mid: str) -> None:
        """No (5) within ``move_timeout`` of sending (4): (4) or (5) may have been dropped (a cut, a
        crashed path broker or target); S has committed, so it re-sends (4) (idempotent on the path)."""
        co = self.coords.get(mid)
        if co is None or co.state != "commit" or co.xfer is None:
            return
        self.rt.log("move_step", mid=mid, client=co.client, step="xfer_resent")
        self._send_m(co.path[1], co.xfer)
        co.timer = self.rt.call_later(self.move_timeout, self._xfer_retry, mid)

    # (3) reject
    def _on_mrej(self, src: str, msg: dict[str, Any]) -> None:
        path, mid = msg["path"], msg["mid"]
        if path[0] != self.name:
            self._along(msg, False)
            return
        co = self.coords.get(mid)
        if co is None or co.state != "wait":
            return
        self._end_move(co, "reject")
        self._resume(co)

    # (4) transfer: COMMIT hop by hop; the merge at T
    def _on_mxfer(self, src: str, msg: dict[str, Any]) -> None:
        path, mid, client = msg["path"], msg["mid"], msg["c"]
        i = path.index(self.name)
        last = i == len(path) - 1
        stale = self.seen_move.get(client, 0) > self._move_no(mid)  # a re-sent (4) overtaken by a later move
        if not stale:
            self._note_move(client, self._move_no(mid))
            hop = "@" + client if last else path[i + 1]
            for sid, text in msg["subs"].items():
                if (mid, sid) not in self.table.tentative:
                    e = self.table.prt.get(sid)
                    if e is not None and e.hop == hop:
                        continue  # committed here already: a re-sent (4)
                    # this broker lost its PREPARE (it restarted after (2) passed): the entry comes from (4)
                    self.table.prepare_sub(mid, sid, parse_cached(text), hop)
                self.table.commit_sub(mid, sid, path[i - 1])
            for aid, text in (msg.get("advs") or {}).items():  # section 4.4: SRT (adv, pre) becomes (adv, suc)
                if (mid, aid) not in self.table.tentative_adv:
                    a = self.table.srt.get(aid)
                    if a is not None and a.hop == hop:
                        continue
                    self.table.prepare_adv(mid, aid, parse_cached(text), hop)
                self.emit(self.table.commit_adv(mid, aid, path[i - 1]))
            self._drain_changes(mid)
        if not last:
            self._along(msg, True)
            return
        c = self.copies.get(client)
        if stale or (c is not None and c.mid == mid and c.state != "queued"):
            # merged here already: (5) may have been lost, answer it again (nothing is delivered again)
            self.rt.log("move_step", mid=mid, client=client, step="xfer_dup")
            if not stale:
                self._along({"k": "mdone", "mid": mid, "path": path}, False)
            return
        self.rt.log("move_step", mid=mid, client=client, step="xfer_recv")
        self.coords.pop(mid, None)
        if c is None or c.mid != mid:
            # a restarted target: the queued copy (and its queue) died with the crash; start the client
            # from (4), which carries everything the source had
            subs, advs = dict(msg["subs"]), dict(msg.get("advs") or {})
            c = Copy(client, next(iter(subs.values()), ""), subs, "queued", mid, self._move_no(mid), {}, advs=advs)
            self.copies[client] = c
            self.rt.log("move_step", mid=mid, client=client, step="xfer_adopt")
        st = msg.get("state") or {}
        c.moves = int(st.get("moves", c.moves))
        c.reqs = list(st.get("reqs") or c.reqs)[-REQS_KEPT:]
        c.route, c.moving = st.get("route"), bool(st.get("moving", True))
        c.pause, c.group = float(st.get("pause", 10.0)), st.get("group", "")
        c.filter = st.get("filter", c.filter)
        c.nsub = int(st.get("nsub", c.nsub))
        c.rate, c.attrs, c.seq = float(st.get("rate") or 0.0), st.get("attrs") or {}, int(st.get("seq", 0))
        # the copy starts with the merge: its first deliveries are the payload, then its own queue
        c.state = "started"
        self.rt.log("client_state", mid=mid, client=client, copy="tgt", state="started")
        delivered = set(msg.get("delivered") or ())
        payload = msg.get("payload") or []
        for q in payload:
            self._deliver(c, tuple(q))
            delivered.add(q[0])
        skipped = 0
        for q in c.queue:
            if q[0] in delivered:
                skipped += 1
            else:
                self._deliver(c, q)
                delivered.add(q[0])
        self.rt.log("move_merge", mid=mid, client=client, payload=len(payload), queued=len(c.queue),
                    skipped=skipped)
        self.mcount["merged"] += 1
        self.mcount["skipped"] += skipped
        c.queue = []
        self._along({"k": "mdone", "mid": mid, "path": path}, False)
        self._schedule_next(c)
        self._start_publishing(c, 0.0)

    # (5) done
    def _at_source(self, msg: dict[str, Any]) -> "Coord | None":
        """A message travelling back to the move's source: relayed on, or (at the source) its
        coordinator (None when the move is unknown here)."""
        if msg["path"][0] != self.name:
            self._along(msg, False)
            return None
        return self.coords.get(msg["mid"])

    def _on_mdone(self, src: str, msg: dict[str, Any]) -> None:
        co = self._at_source(msg)
        if co is None:
            return
        c = self.copies.get(co.client)
        if c is not None and c.state == "stopped":
            del self.copies[co.client]
        self.rt.log("client_state", mid=co.mid, client=co.client, copy="src", state="clean")
        self.rt.log("move_step", mid=co.mid, client=co.client, step="done_recv")
        self._end_move(co, "commit")

    # abort (3PC timeout at the source)
    def _src_timeout(self, mid: str) -> None:
        co = self.coords.get(mid)
        if co is None or co.state != "wait":
            return
        co.timer = None
        co.state = "abort"
        self._send_abort(mid, co.client, co.path, co.subs, co.advs)
        self._end_move(co, "abort")
        self._resume(co)

    def _send_abort(self, mid: str, client: str, path: list[str], subs: dict[str, str],
                    advs: dict[str, str] | None = None) -> None:
        self.aborted.add(mid)
        for sid in subs:
            self.table.abort_sub(mid, sid)
        for aid in advs or {}:
            self.table.abort_adv(mid, aid)
        self._drain_changes(mid)
        self.rt.log("move_step", mid=mid, client=client, step="abort_sent")
        msg = {"k": "mabort", "mid": mid, "c": client, "path": path, "subs": subs, "advs": dict(advs or {})}
        self.abort_out[mid] = (path[1], msg)
        self._send_m(path[1], msg)

    def on_peer_down(self, peer: str) -> None:
        """A lost neighbour acknowledges nothing any more: the waves stop waiting for it (a wave would
        otherwise never end, and a covering move never end at its source, the client refusing every
        later move). What the neighbour missed reaches it with the re-sync when it is back."""
        super().on_peer_down(peer)
        self.down_peers.add(peer)
        for wave, st in list(self.waves.items()):
            if st[0].pop(peer, 0):
                self.rt.log("move_step", mid=st[2], client=st[2].rsplit("#", 1)[0], step="wave_peer_lost")
                self._wave_check(wave)

    def on_peer_up(self, peer: str) -> None:
        """The pub/sub core's re-sync, and the ABORTs this broker sent toward ``peer`` again: one may
        have been dropped while the connection was down (a crashed and restarted neighbour, a healed
        cut); ABORT is idempotent (a hop without the tentative entry, a target without the queued copy:
        nothing happens)."""
        super().on_peer_up(peer)
        self.down_peers.discard(peer)
        for mid, (hop, msg) in list(self.abort_out.items()):
            if hop == peer:
                self.rt.log("move_step", mid=mid, client=msg["c"], step="abort_resent")
                self._send_m(peer, msg)

    def _on_mabort(self, src: str, msg: dict[str, Any]) -> None:
        path, mid, client = msg["path"], msg["mid"], msg["c"]
        self.aborted.add(mid)
        self._note_move(client, self._move_no(mid))
        for sid in msg["subs"]:
            self.table.abort_sub(mid, sid)
        for aid in msg.get("advs") or {}:
            self.table.abort_adv(mid, aid)
        self._drain_changes(mid)
        if path[-1] != self.name:
            self.abort_out[mid] = (path[path.index(self.name) + 1], msg)
            self._along(msg, True)
            return
        self.coords.pop(mid, None)
        c = self.copies.get(client)
        if c is not None and c.mid == mid and c.state == "queued":
            del self.copies[client]
            self.rt.log("client_state", mid=mid, client=client, copy="tgt", state="discarded")
            self.rt.log("move_step", mid=mid, client=client, step="discard")

    # -- covering movement --------------------------------------------------------
    def _cover_start(self, c: Copy, co: Coord) -> None:
        mid, path = co.mid, co.path
        c.state = "stopped"
        self.rt.log("client_state", mid=mid, client=c.client, copy="src", state="stopped")
        co.state = "wait"
        wave = mid + "/u"
        self.waves[wave] = [{}, None, mid]
        self.table.cause = mid
        for sid in list(c.subs):
            self.rt.log("unsubscribe", client=c.client, sub_id=sid, broker=self.name)
            self.rt.log("rt_change", mid=mid, id=sid, owner=c.client, op="del", table="prt", hop="@" + c.client)
            self._wave_emit(wave, self.table.unsubscribe(sid, "@" + c.client))
        self.table.cause = None
        self._drain_changes(mid)
        self.rt.log("move_step", mid=mid, client=c.client, step="xfer_sent")
        self._send_m(path[1], {"k": "cxfer", "mid": mid, "c": c.client, "path": path,
                               "state": c.state_msg()})
        self._wave_check(wave)

    def _on_cxfer(self, src: str, msg: dict[str, Any]) -> None:
        path, mid, client = msg["path"], msg["mid"], msg["c"]
        if path[-1] != self.name:
            self._along(msg, True)
            return
        self.rt.log("move_step", mid=mid, client=client, step="xfer_recv")
        st = msg["state"]
        n = int(mid.rsplit("#", 1)[1])
        sid = f"{client}:s{int(st.get('nsub', 1)) + 1}"
        spec = {"route": st.get("route"), "moves": st.get("moving", True), "pause": st.get("pause", 10.0),
                "group": st.get("group", ""), "nsub": int(st.get("nsub", 1)) + 1, "reqs": st.get("reqs")}
        old = self.copies.get(client)
        if old is not None and old.state == "stopped":
            # the client comes back while its earlier covering move from here has not ended (its waves
            # are still acknowledged: under congestion a move can outlast the pause): that stopped
            # copy is replaced now, so it is clean now, before the new copy starts (#30)
            for co in self.coords.values():
                if co.role == "src" and co.client == client and co.mid not in self.src_cleaned:
                    self.src_cleaned.add(co.mid)
                    self.rt.log("client_state", mid=co.mid, client=client, copy="src", state="clean")
        c = Copy(client, st["filter"], {sid: st["filter"]}, "started", mid, max(n, int(st.get("moves", n))), spec)
        self.copies[client] = c
        self.rt.log("client_state", mid=mid, client=client, copy="tgt", state="started")
        self.rt.log("subscribe", client=client, sub_id=sid, filter=c.filter, broker=self.name)
        self.rt.log("rt_change", mid=mid, id=sid, owner=client, op="add", table="prt", hop="@" + client)
        wave = mid + "/s"
        self.waves[wave] = [{}, None, mid]
        self.coords[mid] = Coord(mid, "tgt", client, path, self.rt.mono_ns(), {})
        self.table.cause = mid
        self._wave_emit(wave, self.table.subscribe(sid, parse_cached(c.filter), "@" + client))
        self.table.cause = None
        self._drain_changes(mid)
        self._schedule_next(c)
        self._wave_check(wave)

    def _on_cdone(self, src: str, msg: dict[str, Any]) -> None:
        co = self._at_source(msg)
        if co is None:
            return
        co.sdone = True
        self._cover_finish(co)

    def _cover_finish(self, co: Coord) -> None:
        if co.udone and co.sdone and co.mid in self.coords:
            c = self.copies.get(co.client)
            if c is not None and c.state == "stopped":
                del self.copies[co.client]
            if co.mid in self.src_cleaned:  # its copy was replaced (and logged clean) when the client came back
                self.src_cleaned.discard(co.mid)
            else:
                self.rt.log("client_state", mid=co.mid, client=co.client, copy="src", state="clean")
            self.rt.log("move_step", mid=co.mid, client=co.client, step="done_recv")
            self._end_move(co, "commit")

    def _wave_emit(self, wave: str, outs: list[Out]) -> None:
        st = self.waves[wave]
        mid = st[2]
        for o in outs:
            if o.kind == "sub":
                m = {"k": "sub", "id": o.id, "f": o.filter.text, "w": wave, "mid": mid}  # type: ignore[union-attr]
            elif o.kind == "unsub":
                m = {"k": "unsub", "id": o.id, "w": wave, "mid": mid}
            else:  # adv/unadv do not occur in subscriber moves; send them untagged
                self.emit([o])
                continue
            self.counters[o.kind + "_out"] += 1
            self._send_m(o.dst, m)
            if o.dst not in self.down_peers:  # to a lost neighbour the message is dropped: no ack will come
                st[0][o.dst] = st[0].get(o.dst, 0) + 1

    def _wave_check(self, wave: str) -> None:
        st = self.waves.get(wave)
        if st is None or st[0]:
            return
        del self.waves[wave]
        parent, mid = st[1], st[2]
        if parent is not None:
            self._send_m(parent, {"k": "mack", "w": wave, "mid": mid})
            return
        co = self.coords.get(mid)
        if co is None:
            return
        if wave.endswith("/u"):
            co.udone = True
            self._cover_finish(co)
        else:  # the target's subscription wave ended: tell the source
            self.coords.pop(mid, None)
            self._along({"k": "cdone", "mid": mid, "path": co.path}, False)

    def _on_wave(self, src: str, msg: dict[str, Any]) -> None:
        wave, mid, k = msg["w"], msg.get("mid", ""), msg["k"]
        first = wave not in self.waves
        if first:
            self.waves[wave] = [{}, src, mid]
        self.table.cause = mid
        try:
            if k == "sub":
                self.counters["sub_in"] += 1
                if msg["id"] not in self.table.prt:
                    self.rt.log("rt_change", mid=mid, id=msg["id"], owner=owner_of(msg["id"]), op="add",
                                table="prt", hop=src)
                outs = self.table.subscribe(msg["id"], parse_cached(msg["f"]), src)
            else:
                self.counters["unsub_in"] += 1
                e = self.table.prt.get(msg["id"])
                if e is not None and e.hop == src:
                    self.rt.log("rt_change", mid=mid, id=msg["id"], owner=owner_of(msg["id"]), op="del",
                                table="prt", hop=src)
                outs = self.table.unsubscribe(msg["id"], src)
        finally:
            self.table.cause = None
        self._wave_emit(wave, outs)
        self._drain_changes(mid)
        if not first:
            self._send_m(src, {"k": "mack", "w": wave, "mid": mid})
        self._wave_check(wave)

    def _on_mack(self, src: str, msg: dict[str, Any]) -> None:
        st = self.waves.get(msg["w"])
        if st is None:
            self._bad(src, msg, "ack of an unknown wave")
            return
        n = st[0].get(src, 0)
        if n <= 0:
            return  # a late ack from a neighbour the wave stopped waiting for (its connection was lost)
        if n == 1:
            del st[0][src]
        else:
            st[0][src] = n - 1
        self._wave_check(msg["w"])

    # -- publications -------------------------------------------------------------
    def _deliver(self, c: Copy, q: tuple[Any, ...]) -> None:
        pub_id, publisher, seq, pub_t, hops = q
        self.rt.log("deliver", client=c.client, pub_id=pub_id, publisher=publisher, seq=seq, pub_t=pub_t,
                    hops=hops)
        self._deliver_out += 1
        if c.tracking is not None:
            c.tracking.add(pub_id)

    def on_pub(self, src: str, msg: dict[str, Any]) -> None:
        """The pub/sub core's forwarding, plus the mobile clients hosted here (hops ``@<client>``)."""
        hops = self.pub_next_hops(src, msg)
        if hops:
            self._dispatch(hops, msg)

    def _route(self, msg: dict[str, Any], frm: str) -> None:
        """A publication issued here by a hosted publisher (hop ``frm``)."""
        hops = self.table.index.hops(msg["a"])
        hops.discard(frm)
        if hops:
            msg["h"] = 1
            self._dispatch(hops, msg)

    def _dispatch(self, hops: set[str], msg: dict[str, Any]) -> None:
        mine = [h[1:] for h in self.forward_pub(hops, msg) if h[0] == "@"]
        if mine:
            q = (msg["id"], msg["c"], msg["s"], msg["t"], msg["h"])
            for cid in mine:
                c = self.copies.get(cid)
                if c is None:
                    self.mcount["local_unmatched"] += 1
                elif c.state == "started":
                    self._deliver(c, q)
                elif c.state == "queued":
                    c.queue.append(q)
                else:
                    self.mcount["local_unmatched"] += 1


def dumps(x: Any) -> str:  # pragma: no cover - debugging aid
    return json.dumps(x, default=str)
