"""The ordering protocol of Baldoni et al., as pure state machines (no I/O).

Pseudocode: ``papers/ordering-baldoni-supplement-pseudocode.txt`` (Figs 1-5).
Section references (Sec 3.4, Sec 4) are to ``papers/ordering-baldoni-main.txt``.

Topics are integers; the precedence relation ``->`` is given by a ``rank`` table
(``T -> T'`` iff ``rank[T] < rank[T']``; the processes rank topics by (TM server position,
id), see :func:`testbed.protocols.ordering.nodes.placement.rank_table` and :class:`TMHost`); without
one it is the topic id order (topic 0 has the highest rank). A timestamp is a
``dict[int, int]`` topic -> sequence number (``BOTTOM`` = 0 stands for the
pseudocode's bottom: sequence numbers start at 1).

Two classes carry the protocol:

* :class:`TopicManager` -- one per topic (``TM_T``): LC, LLC, externalSubs,
  SG, and the handlers of CREATE_PUB_TS, FILL_IN_PUB_TS, FILL_IN_SUB_TS,
  UPDATE_SUB (Figs 2b, 4b, 5b). Each handler returns the ``(next topic or None)``
  the message goes to next; :class:`TMHost` runs many of them and routes.
* :class:`OrderingModule` -- the ordering module of one logical client
  (publisher and subscriber sides, Figs 2a, 3, 4a, 5a, and the Sec 4 variants),
  talking to the world through an :class:`Env`.

Interpretations (documented in docs/ordering.md):

* ``isNext(ts, sub_LC)`` for an event of topic T: ``ts[T] == sub_LC[T] + 1`` and
  ``ts[T'] <= sub_LC[T']`` for every other subscribed topic T' in ts (Def. 4's
  ``sub_LC <= ts``; entries of topics the subscriber does not hold are ignored).
  Strict equality on the other entries deadlocks when a subscription's
  timestamp overtakes an event's in one topic (they are incomparable); ``<=``
  is the weakest condition that keeps every preceding event first.
* a subscriptionUpdate (dummy) event published on topic T_j is applied when
  ``ts[T_j] <= sub_LC[T_j] + 1`` (everything of T_j before the subscription has
  been notified) and then advances ``sub_LC[T_j]`` only. Lines 02-05 of Fig 3
  check and merge every entry at once; that deadlocks when two concurrent
  subscriptions cross (their FILL_IN_SUB_TS chains reach two TMs in opposite
  orders through different intermediate TMs, so their timestamps are
  incomparable and each dummy waits for the other). One dummy per topic of the
  subscription is published anyway (line 11), so each topic's increment is
  covered by the dummy on that topic.
* at COMPLETED_SUB_VC only the new topic's entry is taken from the
  subscription timestamp; the entries of topics already subscribed advance
  through the subscriber's own dummy events like everyone else's, so events
  in flight on those topics are not skipped (line 09 overwriting them would
  lose them).
* retransmission (Sec 4): a TM remembers what it did for a request id and
  answers a repeated request with the same result, so a retried timestamp
  never consumes a second sequence number.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

BOTTOM = 0

# --------------------------------------------------------------------------- timestamps


def next_topic(ts: Mapping[int, int], topic: int | None,
               rank: Sequence[int] | None = None) -> int | None:
    """``next(ts, T)``: the topic preceding ``topic`` in ``ts`` by the precedence ``->``.

    ``rank[t]`` is topic t's position (smaller = higher rank); without it the topic id
    (the largest id below ``topic``). With ``topic=None``: the last topic of ``ts``. None if none.
    """
    if rank is None:
        best = None
        for t in ts:
            if (topic is None or t < topic) and (best is None or t > best):
                best = t
        return best
    best = None
    limit = None if topic is None else rank[topic]
    br = -1
    for t in ts:
        r = rank[t]
        if (limit is None or r < limit) and r > br:
            best, br = t, r
    return best


def ts_to_wire(ts: Mapping[int, int]) -> list[int]:
    """A timestamp as a flat list ``[t0, sn0, t1, sn1, ...]`` sorted by topic."""
    out: list[int] = []
    for t in sorted(ts):
        out.append(t)
        out.append(ts[t])
    return out


def ts_from_wire(flat: Iterable[int]) -> dict[int, int]:
    it = iter(flat)
    return {int(t): int(sn) for t, sn in zip(it, it)}


def ts_less(a: Mapping[int, int], b: Mapping[int, int]) -> bool:
    """Definition 4: ``a < b`` iff comparable, ``<=`` on every common entry, ``<`` on one."""
    common = a.keys() & b.keys()
    if not common:
        return False
    strict = False
    for t in common:
        if a[t] > b[t]:
            return False
        if a[t] < b[t]:
            strict = True
    return strict


# --------------------------------------------------------------------------- sequencing groups


def sg_threshold(causal: bool) -> int:
    """How many subscriptions must contain both T and T' for T' to be in SG_T.

    Definition 1 (TNO): at least two. Sec 4 causal variant: at least one.
    """
    return 1 if causal else 2


def sg_from_counts(topic: int, counts: Mapping[int, int], causal: bool = False) -> set[int]:
    """SG_T from co-occurrence counts ``counts[T'] = |{s in externalSubs_T : T' in s}|``.

    The single decision rule shared by :class:`TopicManager` (incremental counts)
    and the controller-side timestamp-size analysis (counts from a matrix product).
    """
    k = sg_threshold(causal)
    sg = {t for t, c in counts.items() if c >= k}
    sg.add(topic)
    return sg


def update_sequencing_group(topic: int, external_subs: Iterable[Iterable[int]],
                            causal: bool = False) -> set[int]:
    """Fig. 1 literally: union of the subscriptions, minus topics in at most one of them.

    ``causal=True`` is the Sec 4 variant (one shared subscription suffices).
    Quadratic; the TM keeps counts instead (:func:`sg_from_counts`), tests check both agree.
    """
    subs = [frozenset(s) for s in external_subs]
    sg: set[int] = set()
    for s in subs:  # (01)
        sg |= s
    for tj in list(sg):  # (02)
        if tj == topic:
            continue
        n = sum(1 for s in subs if tj in s)  # (03)
        if n < sg_threshold(causal):  # (04)
            sg.discard(tj)
    sg.add(topic)
    return sg


# --------------------------------------------------------------------------- topic manager


@dataclass
class TopicManager:
    """``TM_T``: the state of Figs 2b, 4b, 5b for one topic."""

    topic: int
    causal: bool = False
    lc: int = 0  # LC_T
    llc: dict[int, int] = field(default_factory=dict)  # LLC_T: lower-ranked topics (ids > topic)
    external_subs: dict[str, frozenset[int]] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)  # co-occurrence counts over external_subs
    sg: set[int] = field(default_factory=set)
    rank: Sequence[int] | None = None  # the precedence (see next_topic); None: topic ids

    def __post_init__(self) -> None:
        if not self.sg:
            self.sg = {self.topic}

    def _lower(self, t: int) -> bool:
        """``T -> t``: t has a lower rank than this TM's topic."""
        r = self.rank
        return t > self.topic if r is None else r[t] > r[self.topic]

    # -- subscriptions (Fig 4b lines 02-03, Fig 5b lines 01-05) --------------------
    def _set_sub(self, cid: str, sub: frozenset[int] | None) -> None:
        old = self.external_subs.pop(cid, None)
        if old is not None:
            for t in old:
                c = self.counts[t] - 1
                if c:
                    self.counts[t] = c
                else:
                    del self.counts[t]
        if sub:
            self.external_subs[cid] = sub
            for t in sub:
                self.counts[t] = self.counts.get(t, 0) + 1
        self.sg = sg_from_counts(self.topic, self.counts, self.causal)  # updateSequencingGroup

    # -- Fig 2b -------------------------------------------------------------------
    def create_pub_ts(self) -> tuple[dict[int, int], int | None]:
        """CREATE_PUB_TS (lines 01-13): a fresh timestamp and where it goes next."""
        ts = {t: BOTTOM for t in self.sg}  # (02)
        for t, sn in self.llc.items():  # (03-05) update() only changes existing pairs
            if t in ts:
                ts[t] = sn
        self.lc += 1  # (06)
        ts[self.topic] = self.lc  # (07)
        return ts, next_topic(ts, self.topic, self.rank)  # (08)

    def fill_in_pub_ts(self, ts: dict[int, int]) -> int | None:
        """FILL_IN_PUB_TS (lines 14-24): record lower-ranked entries, put LC_T, forward."""
        for t, sn in ts.items():  # (15-17)
            if sn > self.llc.get(t, BOTTOM) and self._lower(t):
                self.llc[t] = sn
        ts[self.topic] = self.lc  # (18)
        return next_topic(ts, self.topic, self.rank)  # (19)

    # -- Fig 4b -------------------------------------------------------------------
    def fill_in_sub_ts(self, ts: dict[int, int], sub: Iterable[int], cid: str) -> int | None:
        self._set_sub(cid, frozenset(sub))  # (02-03)
        for t, sn in ts.items():  # (04-06)
            if t in self.sg and sn > self.llc.get(t, BOTTOM) and self._lower(t):
                self.llc[t] = sn
        self.lc += 1  # (07)
        ts[self.topic] = self.lc  # (08)
        return next_topic(ts, self.topic, self.rank)  # (09)

    # -- Fig 5b -------------------------------------------------------------------
    def update_sub(self, cid: str, sub: Iterable[int]) -> None:
        s = frozenset(sub)
        self._set_sub(cid, s if s else None)  # (01-05)
        for t in [t for t in self.llc if t not in self.sg]:  # (06-08)
            del self.llc[t]


# --------------------------------------------------------------------------- TM host (server)

# Message kinds (the "k" field on the wire).
CREATE_PUB_TS = "o.create_pub_ts"
FILL_IN_PUB_TS = "o.fill_in_pub_ts"
EVENT_TS = "o.event_ts"
FILL_IN_SUB_TS = "o.fill_in_sub_ts"
COMPLETED_SUB_VC = "o.completed_sub_vc"
UPDATE_SUB = "o.update_sub"


def ts_bytes(ts_flat: list[int]) -> int:
    """Bytes of a timestamp on the wire (msgpack encoding of the flat list), computed exactly."""
    n = len(ts_flat)
    size = 1 if n < 16 else (3 if n < 65536 else 5)
    for v in ts_flat:
        if 0 <= v < 128:
            size += 1
        elif v < 256:
            size += 2
        elif v < 65536:
            size += 3
        elif v < 2**32:
            size += 5
        else:
            size += 9
    return size


class TMHost:
    """The topic managers hosted by one TM server, plus routing between them.

    ``placement(topic) -> server name``. :meth:`handle` takes one inbound message
    and returns the outbound ``(destination process, message)`` pairs; chains
    through topic managers of this same server run here without the network.
    Counters feed the throughput and outgoing-bandwidth metrics.

    **The pipeline** (``servers``, the placement's server list, and ``rank``, from
    :func:`testbed.protocols.ordering.nodes.placement.rank_table`): topics are ranked by their
    server's position, so a chain visits servers from the last towards the first, each
    at most once; a chain message for a server further down is relayed through every
    server in between. Two chains that pass one topic manager in some order then pass
    every later one in the same order (FIFO links, one process per server): a chain
    cannot overtake another on a shorter path, which would make two timestamps each
    claim to follow the other (docs/ordering.md, deviation 9: the pipeline). Without
    ``servers`` (a single server, tests) chains go straight to the next topic's server.
    """

    def __init__(self, name: str, placement: Callable[[int], str], *, causal: bool = False,
                 dedupe: int = 100_000, servers: Sequence[str] | None = None,
                 rank: Sequence[int] | None = None) -> None:
        self.name = name
        self.placement = placement
        self.causal = causal
        self.rank = rank
        self.servers = list(servers) if servers else None
        self._pos = {s: i for i, s in enumerate(self.servers or ())}
        self.tms: dict[int, TopicManager] = {}
        self._done: OrderedDict[tuple, tuple[str, dict[str, Any]]] = OrderedDict()
        self._dedupe = dedupe
        self.c = {"created": 0, "filled": 0, "completed": 0, "sub_steps": 0, "update_subs": 0,
                  "ts_bytes_handled": 0, "ts_bytes_remote": 0, "msgs_remote": 0,
                  "local_hops": 0, "retries_answered": 0, "relayed": 0}

    def tm(self, topic: int) -> TopicManager:
        tm = self.tms.get(topic)
        if tm is None:
            if self.placement(topic) != self.name:
                raise ValueError(f"topic {topic} is not managed by {self.name}")
            tm = self.tms[topic] = TopicManager(topic, causal=self.causal, rank=self.rank)
        return tm

    def handle(self, msg: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        k = msg["k"]
        out: list[tuple[str, dict[str, Any]]] = []
        if k == UPDATE_SUB:
            self.c["update_subs"] += 1
            self.tm(msg["to"]).update_sub(msg["cid"], msg["sub"])
            return out
        c = self.c
        if (k == FILL_IN_PUB_TS or k == FILL_IN_SUB_TS) and self.placement(msg["to"]) != self.name:
            c["relayed"] += 1  # passing through towards a server further down the pipeline
            return [(self._toward(self.placement(msg["to"])), msg)]
        while True:  # follow the chain while it stays on this server
            dst, nxt = self._step(msg)
            nk = nxt["k"]
            if nk == FILL_IN_PUB_TS or nk == EVENT_TS:  # a publication timestamp handled here
                b = ts_bytes(nxt["ts"])
                c["ts_bytes_handled"] += b
                if nk == FILL_IN_PUB_TS and dst != self.name:
                    c["ts_bytes_remote"] += b
            if dst == self.name and (nk == FILL_IN_PUB_TS or nk == FILL_IN_SUB_TS):
                c["local_hops"] += 1
                msg = nxt
                continue
            if nk == FILL_IN_PUB_TS or nk == FILL_IN_SUB_TS:
                c["msgs_remote"] += 1
                dst = self._toward(dst)
            out.append((dst, nxt))
            return out

    def _toward(self, server: str) -> str:
        """The next server on the pipeline towards ``server`` (itself if adjacent or unknown)."""
        pos = self._pos
        if not pos:
            return server
        i, j = pos[self.name], pos.get(server)
        if j is None or j >= i - 1:
            return server
        return self.servers[i - 1]  # type: ignore[index]

    def _step(self, msg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        k = msg["k"]
        key = (k, msg.get("to"), msg["host"], msg.get("cid"), msg.get("eid", msg.get("rid")))
        cached = self._done.get(key)
        if cached is not None:  # a retransmitted request: same answer, no new sequence number
            self.c["retries_answered"] += 1
            return cached
        if k == CREATE_PUB_TS:
            tm = self.tm(msg["T"])
            ts, nt = tm.create_pub_ts()
            self.c["created"] += 1
            res = self._route_pub(msg, ts, nt, hops=1)
        elif k == FILL_IN_PUB_TS:
            tm = self.tm(msg["to"])
            ts = ts_from_wire(msg["ts"])
            nt = tm.fill_in_pub_ts(ts)
            self.c["filled"] += 1
            res = self._route_pub(msg, ts, nt, hops=msg["hops"] + 1)
        elif k == FILL_IN_SUB_TS:
            tm = self.tm(msg["to"])
            ts = ts_from_wire(msg["ts"])
            nt = tm.fill_in_sub_ts(ts, msg["sub"], msg["cid"])
            self.c["sub_steps"] += 1
            flat = ts_to_wire(ts)
            if nt is None:
                res = (msg["host"], {"k": COMPLETED_SUB_VC, "ts": flat, "cid": msg["cid"],
                                     "rid": msg["rid"], "host": msg["host"]})
            else:
                res = (self.placement(nt), {**msg, "ts": flat, "to": nt})
        else:
            raise ValueError(f"TM server {self.name}: unknown message kind {k!r}")
        self._done[key] = res
        if len(self._done) > self._dedupe:
            self._done.popitem(last=False)
        return res

    def _route_pub(self, msg: dict[str, Any], ts: dict[int, int], nt: int | None,
                   hops: int) -> tuple[str, dict[str, Any]]:
        flat = ts_to_wire(ts)
        servers = msg.get("servers", [])
        if not servers or servers[-1] != self.name:
            servers = servers + [self.name]
        base = {"eid": msg["eid"], "cid": msg["cid"], "host": msg["host"], "T": msg["T"],
                "ts": flat, "hops": hops, "servers": servers}
        if nt is None:
            self.c["completed"] += 1
            return msg["host"], {"k": EVENT_TS, **base}
        return self.placement(nt), {"k": FILL_IN_PUB_TS, "to": nt, **base}


# --------------------------------------------------------------------------- ordering module


class Env(Protocol):
    """What an :class:`OrderingModule` needs from its host process."""

    def send_tm(self, topic: int, msg: dict[str, Any]) -> None: ...
    def ens_publish(self, topic: int, msg: dict[str, Any]) -> None: ...
    def ens_subscribe(self, topic: int, done: Callable[[], None]) -> None: ...
    def ens_unsubscribe(self, topic: int) -> None: ...
    def now(self) -> float: ...
    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> Any: ...
    def notify(self, cid: str, ev: dict[str, Any], out_of_order: bool, buffered_s: float) -> None: ...
    def timestamp_done(self, cid: str, eid: str, topic: int, ts: dict[int, int],
                       latency_s: float, hops: int, servers: list[str], tries: int) -> None: ...
    def subscribed(self, cid: str, topic: int, ts: dict[int, int], latency_s: float) -> None: ...


@dataclass(eq=False)  # one buffered entry is itself: list.remove / `in` by identity, not by field equality
class _Buffered:
    ev: dict[str, Any]
    ts: dict[int, int]
    topic: int
    at: float
    seq: int


class _Buffer:
    """``to_deliver``: the buffered entries in arrival order, indexed per topic by sequence number.

    Iteration, ``len``, ``in`` (by identity) and ``remove`` behave as on the list it replaces.
    ``by_topic[T]`` holds T's entries sorted by ``(ts[T], seq)``: an entry of T can only be
    ready when ``ts[T] <= sub_LC[T] + 1`` (a dummy: ``<=``; an event: ``==``; an overtaken
    one: ``<=``), so the drain looks at a prefix of each topic's list instead of sorting the
    whole buffer on every pass (issue #12: the subscription phase of 200 co-subscribers
    buffers thousands of dummies, over at most ``k`` topics per client).
    """

    __slots__ = ("_all", "by_topic")

    def __init__(self) -> None:
        self._all: dict[int, _Buffered] = {}  # seq -> entry, arrival order
        self.by_topic: dict[int, list[tuple[int, int, _Buffered]]] = {}

    def __iter__(self):
        return iter(list(self._all.values()))

    def __len__(self) -> int:
        return len(self._all)

    def __bool__(self) -> bool:
        return bool(self._all)

    def __contains__(self, b: object) -> bool:
        return isinstance(b, _Buffered) and self._all.get(b.seq) is b

    def append(self, b: _Buffered) -> None:
        self._all[b.seq] = b
        bisect.insort(self.by_topic.setdefault(b.topic, []), (b.ts.get(b.topic, BOTTOM), b.seq, b))

    def remove(self, b: _Buffered) -> None:
        if self._all.get(b.seq) is not b:
            raise ValueError("not buffered")
        del self._all[b.seq]
        lst = self.by_topic[b.topic]
        i = bisect.bisect_left(lst, (b.ts.get(b.topic, BOTTOM), b.seq))
        del lst[i]
        if not lst:
            del self.by_topic[b.topic]

    def drop_topic(self, topic: int) -> None:
        for _, seq, _b in self.by_topic.pop(topic, ()):
            del self._all[seq]


class OrderingModule:
    """The ordering module of one logical client (publisher + subscriber sides).

    ``reliable=True``: Sec 3.4 (buffer until isNext). ``reliable=False``: Sec 4
    optimistic mode with a buffer of ``buffer_size`` events and a ``ttl_s`` per event;
    late events are notified at once, tagged out-of-order. ``retry_s`` > 0 re-sends
    timestamp and subscription requests that got no answer (Sec 4, Reliability).
    """

    def __init__(self, cid: str, host: str, env: Env, *, reliable: bool = True,
                 buffer_size: int = 64, ttl_s: float = 1.0, retry_s: float = 0.0,
                 late_window: int = 1024, rank: Sequence[int] | None = None) -> None:
        self.cid = cid
        self.rank = rank  # the TMs' precedence: a subscription chain starts at its last topic
        self.host = host
        self.env = env
        self.reliable = reliable
        self.buffer_size = buffer_size
        self.ttl_s = ttl_s
        self.retry_s = retry_s
        self._next_eid = 0
        self.outgoing: dict[str, tuple[dict[str, Any], int, float, int]] = {}  # eid -> (payload, T, t0, tries)
        self.subs: set[int] = set()  # subs_i (active)
        self.sub_lc: dict[int, int] = {}  # sub_LC_i
        self.to_deliver = _Buffer()  # to_deliver_i
        self._pending_sub: dict[int, list[tuple[dict[str, Any], dict[int, int]]]] = {}
        self._sub_queue: list[tuple[str, int]] = []  # serialised subscribe/unsubscribe ops
        self._sub_busy: dict[str, Any] | None = None
        self._seen: set[str] = set()  # event ids notified (dedupe under retransmission)
        self.sub_floor: dict[int, int] = {}  # T -> ts[T] of the subscription to T
        # unreliable mode: timestamps of the last notified events, to tag late ones
        self._recent: deque[dict[int, int]] = deque(maxlen=late_window)
        self._bseq = 0
        self._changes = 0  # bumped whenever sub_LC or the notified set changes (see on_ens_notify)
        # the drain's work list (see _drain): topics whose sub_LC, notified events or buffered
        # entries changed since they were last examined, and topics whose first candidate is
        # an event with ts[T] = sub_LC[T] + 1 waiting for another topic
        self._dirty: set[int] = set()
        self._blocked: set[int] = set()
        self.stats = {"published": 0, "notified": 0, "ooo": 0, "dropped_old": 0, "retries": 0,
                      "forced": 0, "dummies": 0}

    # ------------------------------------------------------------------ PUBLISH (Fig 2a)
    def publish(self, payload: dict[str, Any], topic: int) -> str:
        eid = f"{self.cid}:{self._next_eid}"  # (01)
        self._next_eid += 1
        self.outgoing[eid] = (payload, topic, self.env.now(), 1)  # (02)
        self._send_create(eid, topic)  # (03-04)
        return eid

    def _send_create(self, eid: str, topic: int) -> None:
        self.env.send_tm(topic, {"k": CREATE_PUB_TS, "eid": eid, "cid": self.cid,
                                 "host": self.host, "T": topic, "to": topic})
        if self.retry_s > 0:
            self.env.call_later(self.retry_s, self._retry_create, eid)

    def _retry_create(self, eid: str) -> None:
        entry = self.outgoing.get(eid)
        if entry is None:
            return
        payload, topic, t0, tries = entry
        self.outgoing[eid] = (payload, topic, t0, tries + 1)
        self.stats["retries"] += 1
        self._send_create(eid, topic)

    def on_event_ts(self, msg: dict[str, Any]) -> None:  # (05-09)
        entry = self.outgoing.pop(msg["eid"], None)
        if entry is None:
            return  # a duplicate answer to a retried request
        payload, topic, t0, tries = entry
        ts = ts_from_wire(msg["ts"])
        self.env.timestamp_done(self.cid, msg["eid"], topic, ts, self.env.now() - t0,
                                msg.get("hops", 0), msg.get("servers", []), tries)
        self.stats["published"] += 1
        self.env.ens_publish(topic, {"k": "o.ev", "eid": msg["eid"], "T": topic,
                                     "ts": msg["ts"], "pl": payload})

    # ------------------------------------------------------------------ SUBSCRIBE (Fig 4a)
    def subscribe(self, topic: int) -> None:
        self.subscribe_many([topic])

    def subscribe_many(self, topics: Iterable[int]) -> None:
        """SUBSCRIBE of several topics in one operation: one ENSsubscribe per topic, then one
        FILL_IN_SUB_TS carrying ``subs | topics`` (Fig 4a with a set instead of one topic)."""
        self._sub_queue.append(("sub", tuple(topics)))
        self._pump()

    def unsubscribe(self, topic: int) -> None:
        self._sub_queue.append(("unsub", topic))
        self._pump()

    def _pump(self) -> None:
        while self._sub_busy is None and self._sub_queue:
            op, arg = self._sub_queue.pop(0)
            if op == "sub":
                new = sorted(set(arg) - self.subs)
                if not new:
                    continue
                self._sub_busy = {"topics": new, "t0": self.env.now(), "rid": None,
                                  "waiting": len(new)}
                for topic in new:
                    self._pending_sub[topic] = []  # buffer events of T from now on
                for topic in new:
                    self.env.ens_subscribe(topic, self._ens_subscribed)  # (01)
            else:
                self._do_unsubscribe(arg)

    def _ens_subscribed(self) -> None:  # (02-07), once every ENSsubscribe returned
        busy = self._sub_busy
        busy["waiting"] -= 1
        if busy["waiting"]:
            return
        sub = sorted(self.subs | set(busy["topics"]))
        ts = {t: BOTTOM for t in sub}
        rid = f"{self.cid}/s{self._bseq}"
        self._bseq += 1
        busy["rid"] = rid
        busy["sub"] = sub
        self._send_fill_sub(rid, ts, sub)

    def _send_fill_sub(self, rid: str, ts: dict[int, int], sub: list[int]) -> None:
        last = next_topic(ts, None, self.rank)  # (05)
        self.env.send_tm(last, {"k": FILL_IN_SUB_TS, "ts": ts_to_wire(ts), "sub": sub,
                                "cid": self.cid, "host": self.host, "rid": rid, "to": last})
        if self.retry_s > 0:
            self.env.call_later(self.retry_s, self._retry_sub, rid, ts, sub)

    def _retry_sub(self, rid: str, ts: dict[int, int], sub: list[int]) -> None:
        if self._sub_busy is not None and self._sub_busy.get("rid") == rid:
            self.stats["retries"] += 1
            self._send_fill_sub(rid, ts, sub)

    def on_completed_sub_vc(self, msg: dict[str, Any]) -> None:  # (08-12)
        busy = self._sub_busy
        if busy is None or busy.get("rid") != msg["rid"]:
            return  # duplicate answer
        ts = ts_from_wire(msg["ts"])
        for topic in busy["topics"]:
            self.subs.add(topic)  # (03) takes effect with the completed timestamp
            self.sub_lc[topic] = ts[topic]  # (09), new topics only (see module doc)
            self._dirty.add(topic)
            self.sub_floor[topic] = ts[topic]
        for t in busy["sub"]:  # (10-11) subscriptionUpdate dummy on every subscribed topic
            self.env.ens_publish(t, {"k": "o.ev", "eid": f"{msg['rid']}@{t}", "T": t,
                                     "ts": msg["ts"], "dummy": True})
        self._sub_busy = None
        for topic in busy["topics"]:
            self.env.subscribed(self.cid, topic, ts, self.env.now() - busy["t0"])  # (12)
        for topic in busy["topics"]:
            for ev, ets in self._pending_sub.pop(topic, []):  # flush what was buffered for T
                self._on_notify(ev, ets)
        self._drain()
        self._pump()

    # ------------------------------------------------------------------ UNSUBSCRIBE (Fig 5a)
    def _do_unsubscribe(self, topic: int) -> None:
        if topic not in self.subs:
            return
        self.subs.discard(topic)  # (01)
        self.sub_lc.pop(topic, None)
        self.to_deliver.drop_topic(topic)
        # events of other topics that waited for T's entries no longer do (isNext ignores a
        # topic not subscribed): every buffered topic is examined again
        self._dirty.update(self.to_deliver.by_topic)
        sub = sorted(self.subs)
        for t in sub:  # (02-05)
            self.env.send_tm(t, {"k": UPDATE_SUB, "cid": self.cid, "sub": sub, "to": t,
                                 "host": self.host})
        self.env.send_tm(topic, {"k": UPDATE_SUB, "cid": self.cid, "sub": [], "to": topic,
                                 "host": self.host})  # (06-07)
        self.env.ens_unsubscribe(topic)  # (08)
        self._drain()

    # ------------------------------------------------------------------ NOTIFY (Fig 3)
    def on_ens_notify(self, ev: dict[str, Any], ts: dict[int, int] | None = None) -> None:
        """An ENS notification; ``ts``: ``ev["ts"]`` already decoded (a client host decodes a
        notification for many of its clients once; the module only reads it)."""
        topic = ev["T"]
        if ts is None:
            ts = ts_from_wire(ev["ts"])
        if topic in self._pending_sub:  # subscribing to T: buffer until COMPLETED_SUB_VC
            self._pending_sub[topic].append(({**ev, "_at": self.env.now()}, ts))
            return
        before = self._changes
        self._on_notify(ev, ts)
        if self._changes != before:
            # After every drain no buffered event is ready; one that was only buffered
            # changed nothing another one waits for, so the scan is skipped (the subscription
            # phase of many co-subscribers buffers thousands of dummies: a scan per
            # notification was quadratic, issue #12).
            self._drain()

    def _on_notify(self, ev: dict[str, Any], ts: dict[int, int]) -> None:
        topic = ev["T"]
        if topic not in self.subs:
            return
        if ev.get("dummy"):  # (01-08)
            self.stats["dummies"] += 1
            if self._dummy_ready(ts, topic):
                self._apply_dummy(ts, topic)
            else:
                self._buffer(ev, ts, topic)
            return
        if ev["eid"] in self._seen:
            return
        cur = self.sub_lc.get(topic, BOTTOM)
        if ts[topic] <= cur:  # older than what the subscription clock already covers
            if self.reliable or self._is_pre_subscription(ts, topic):
                self.stats["dropped_old"] += 1
                return
            self._notify(ev, ts, out_of_order=True, at=self.env.now())  # Sec 4: late, tagged
            return
        if self._is_next(ts, topic):  # (09-16)
            self._notify(ev, ts, out_of_order=False, at=self.env.now())
        else:  # (17)
            self._buffer(ev, ts, topic)

    def _is_pre_subscription(self, ts: dict[int, int], topic: int) -> bool:
        return ts[topic] <= self.sub_floor.get(topic, BOTTOM)

    def _is_next(self, ts: dict[int, int], topic: int) -> bool:
        lc = self.sub_lc
        if ts[topic] != lc.get(topic, BOTTOM) + 1:
            return False
        for t, sn in ts.items():
            if t != topic and t in lc and sn > lc[t]:
                return False
        return True

    def _dummy_ready(self, ts: dict[int, int], topic: int) -> bool:
        return ts[topic] <= self.sub_lc.get(topic, BOTTOM) + 1

    def _apply_dummy(self, ts: dict[int, int], topic: int) -> None:
        if topic in self.sub_lc and ts[topic] > self.sub_lc[topic]:
            self.sub_lc[topic] = ts[topic]
            self._changes += 1
            self._dirty.add(topic)

    def _merge(self, ts: dict[int, int]) -> None:  # updateSubLC over the common entries
        lc = self.sub_lc
        for t, sn in ts.items():
            if t in lc and sn > lc[t]:
                lc[t] = sn
                self._changes += 1
                self._dirty.add(t)

    def _late(self, ts: dict[int, int]) -> bool:
        """Sec 4: an event is late when one already notified has a larger timestamp (Def. 4)."""
        return any(ts_less(ts, prev) for prev in self._recent)

    def _notify(self, ev: dict[str, Any], ts: dict[int, int], out_of_order: bool, at: float) -> None:
        if not self.reliable:  # the tag is decided against what this subscriber notified
            out_of_order = self._late(ts)
            self._recent.append(ts)
        self._seen.add(ev["eid"])
        self._changes += 1
        self._dirty.add(ev["T"])
        self.stats["notified"] += 1
        if out_of_order:
            self.stats["ooo"] += 1
        else:
            self._merge(ts)
        self.env.notify(self.cid, ev, out_of_order, self.env.now() - at)

    def _buffer(self, ev: dict[str, Any], ts: dict[int, int], topic: int) -> None:
        b = _Buffered(ev, ts, topic, self.env.now(), self._bseq)
        self._bseq += 1
        if not self.reliable:
            if len([x for x in self.to_deliver if not x.ev.get("dummy")]) >= self.buffer_size:
                self._force_head()
            self.env.call_later(self.ttl_s, self._ttl_expired, b.seq)
        self.to_deliver.append(b)
        self._dirty.add(topic)

    def _drain(self) -> None:  # (20-26)
        """Notify every buffered event that is next, apply every ready dummy, until none is.

        The paper's lines 20-26 pick any ready entry. An entry of topic T can only be ready
        when ``ts[T] <= sub_LC[T] + 1`` (a dummy needs ``<=``, an event ``==``, an overtaken
        one ``<=``), so a topic is examined along its index (sorted by ``ts[T]``) up to
        ``sub_LC[T] + 1`` only, and only when it can have changed: its ``sub_LC`` moved, one of
        its events was notified or buffered (``_dirty``), or it ends at an event that is
        waiting for other topics (``_blocked``: examined again whenever anything moved). A
        topic neither dirty nor blocked has no entry with ``ts[T] <= sub_LC[T] + 1``. So a
        drain costs what changed plus what it releases, not a sort of the whole buffer
        (issue #12: the subscription phase of 200 co-subscribers buffers thousands of dummies).
        A chain of entries of one topic buffered in reverse order resolves in one pass. The
        buffer keeps its arrival order (the unreliable mode's head is "smallest timestamp,
        then arrival").
        """
        buf = self.to_deliver
        lc = self.sub_lc
        while self._dirty:
            todo = sorted(self._dirty | self._blocked)
            self._dirty = set()
            self._blocked.difference_update(todo)
            for topic in todo:
                lst = buf.by_topic.get(topic)
                if lst is None:
                    continue
                if topic not in self.subs:
                    buf.drop_topic(topic)
                    continue
                i = 0
                while lst and i < len(lst):
                    sn, _, b = lst[i]
                    cur = lc.get(topic, BOTTOM)
                    if sn > cur + 1:
                        break
                    if b.ev.get("dummy"):  # sn <= cur + 1: ready
                        buf.remove(b)
                        self._apply_dummy(b.ts, topic)
                    elif sn <= cur or b.ev["eid"] in self._seen:
                        buf.remove(b)  # overtaken (forced delivery skipped past it)
                        if not self.reliable and b.ev["eid"] not in self._seen:
                            self._notify(b.ev, b.ts, out_of_order=True, at=b.at)
                    elif self._is_next(b.ts, topic):
                        buf.remove(b)
                        self._notify(b.ev, b.ts, out_of_order=False, at=b.at)
                    else:
                        self._blocked.add(topic)  # sn = cur + 1, waiting for another topic
                        i += 1
                        continue
                    lst = buf.by_topic.get(topic)  # removed: the list shifted (or is gone)
                    i = 0

    # -- liveness: what the buffered events wait for ---------------------------------
    def waits_for(self, ts: Mapping[int, int], topic: int, dummy: bool = False) -> list[list[int]]:
        """What keeps an event of ``topic`` with timestamp ``ts`` in the buffer.

        ``[[T', have, need], ...]``: this subscriber's ``sub_LC[T']`` is ``have`` and must reach
        ``need`` first. For the event's own topic ``need = ts[T] - 1`` (the predecessor with
        sequence number ``have + 1`` has not been notified); for another subscribed topic
        ``need = ts[T']`` (Def. 4: every event of T' up to ``ts[T']`` precedes it).
        """
        lc = self.sub_lc
        have = lc.get(topic, BOTTOM)
        out: list[list[int]] = []
        if ts.get(topic, BOTTOM) > have + 1:
            out.append([topic, have, ts[topic] - 1])
        if not dummy:
            for t in sorted(ts):
                if t != topic and t in lc and ts[t] > lc[t]:
                    out.append([t, lc[t], ts[t]])
        return out

    def buffered(self, select: Callable[[str, float], bool] | None = None) -> list[dict[str, Any]]:
        """Every event held back: in ``to_deliver`` (waiting for predecessors) or waiting for
        this client's own subscription to complete (``sub``: the pending request id).
        ``select(eid, at)``: only those it accepts (decided before ``waits`` is computed: the
        client host asks every second for the few held back too long)."""
        rows = []
        for b in self.to_deliver:
            if select is not None and not select(b.ev["eid"], b.at):
                continue
            rows.append({"eid": b.ev["eid"], "topic": b.topic, "ts": b.ts, "at": b.at,
                         "dummy": bool(b.ev.get("dummy")),
                         "waits": self.waits_for(b.ts, b.topic, bool(b.ev.get("dummy")))})
        busy = self._sub_busy
        for topic, evs in self._pending_sub.items():
            for ev, ts in evs:
                if select is not None and not select(ev["eid"], ev.get("_at", 0.0)):
                    continue
                rows.append({"eid": ev["eid"], "topic": topic, "ts": ts, "at": ev.get("_at", 0.0),
                             "dummy": bool(ev.get("dummy")), "waits": [],
                             "sub": (busy or {}).get("rid") or "ens_subscribe"})
        return rows

    # -- Sec 4 unreliable mode: TTL expiry and full buffer force the head out ---------
    def _head(self) -> _Buffered | None:
        """The buffered event that precedes the others (smallest timestamp, then arrival)."""
        evs = [b for b in self.to_deliver if not b.ev.get("dummy")]
        if not evs:
            return None
        head = evs[0]
        for b in evs[1:]:
            if ts_less(b.ts, head.ts):
                head = b
        return head

    def _force(self, b: _Buffered) -> None:
        self.to_deliver.remove(b)
        if b.ev.get("dummy"):
            self._apply_dummy(b.ts, b.topic)
            self._drain()
            return
        self.stats["forced"] += 1
        # The gap before it is given up: deliver it in order and move the clock past it.
        self._notify(b.ev, b.ts, out_of_order=False, at=b.at)
        self._drain()

    def _force_head(self) -> None:
        head = self._head()
        if head is not None:
            self._force(head)

    def _ttl_expired(self, seq: int) -> None:
        for b in self.to_deliver:
            if b.seq == seq:
                if b.ev.get("dummy"):
                    self._force(b)
                    return
                # deliver whatever precedes it first, then it
                while True:
                    head = self._head()
                    if head is None or head is b or not ts_less(head.ts, b.ts):
                        break
                    self._force(head)
                if b in self.to_deliver:
                    self._force(b)
                return
