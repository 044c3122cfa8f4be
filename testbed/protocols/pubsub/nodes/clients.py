"""A client process hosting ``count`` logical pub/sub clients of one group.

Client ``i`` is named ``<group>-<i>`` and attached to ``attach[i % len(attach)]``.

Config (``config["clients"]``): ``name``, ``role`` (publisher | subscriber),
``count``, ``attach``, ``rate_per_s`` (per client), ``size_bytes``, ``filter``
(subscribers) and ``extra`` = the group's validated params, times in seconds:

* publisher: ``attrs`` {attr: literal | "uniform(a,b)" | "choice(x,y,...)"},
  ``advertise`` (filter text; derived from attrs when absent: ``[a,eq,v]`` for a
  literal, ``[a,>=,lo],[a,<=,hi]`` for uniform/numeric choice, ``[a,isPresent,'']``
  for a choice of strings);
* subscriber: ``unsubscribe_at``, ``resubscribe_at`` (seconds after the workload start).

Publishers advertise at start, then publish from the workload start for
``duration`` at ``rate_per_s`` each, evenly spread over the clients (one
:class:`testbed.nodes.runtime.workload.PacedWorkload` drives the whole group; it
catches up in batches when the loop falls behind, so the average rate is kept,
and a process restarted mid-run resumes the schedule where it stands). Subscribers subscribe at start. When the connection
to a broker comes back (``on_peer_up`` after the first), the clients attached
to it re-issue their current advertisements and subscriptions with the same
ids (logged once as ``client_resync``; brokers ignore ids they know), framed by the re-sync
markers ``rsb``/``rse`` (``broker.py``) so that the broker logs when it has applied them.

Publication ids are ``<client>:<seq>``. seq starts at ``incarnation * 10**9 + 1``
where the incarnation counts this process's starts in its stable ``state_dir``,
so a restarted publisher never reuses an id and its seqs keep increasing (the
per-publisher FIFO check stays meaningful across restarts).
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable

from testbed.protocols.pubsub.nodes.filters import parse
from testbed.protocols.pubsub.nodes import events as _events  # noqa: F401  (registers the pubsub events)
from testbed.nodes.runtime.api import Node
from testbed.nodes.runtime.workload import PacedWorkload

_GEN = re.compile(r"^\s*(uniform|choice)\s*\((.*)\)\s*$")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_STRING = re.compile(r"'[^']*'|\"[^\"]*\"")


def parse_generator(value: Any) -> tuple[str, list[Any]]:
    """A publisher attribute: ("const", [v]), ("uniform", [a, b]) or ("choice", [x, ...]).

    The one parser of attribute generators: ``testbed validate`` checks topology files with it.
    Raises ValueError with a one-line reason.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("an attribute value is a number, a string, uniform(a,b) or choice(x,y,...)")
    if not isinstance(value, str):
        return ("const", [value])
    m = _GEN.match(value)
    if not m:
        return ("const", [value])
    kind, inner = m.group(1), m.group(2)
    items = [s.strip() for s in inner.split(",")] if inner.strip() else []
    if kind == "uniform":
        try:
            a, b = (float(x) for x in items)
        except ValueError:
            raise ValueError(f"{value!r}: uniform takes two numbers, uniform(a,b)") from None
        if not a < b:
            raise ValueError(f"{value!r}: uniform(a,b) needs a < b")
        return ("uniform", [a, b])
    if not items:
        raise ValueError(f"{value!r}: choice needs at least one value")
    out: list[Any] = []
    for item in items:
        if _NUMBER.fullmatch(item):
            out.append(int(item) if re.fullmatch(r"[+-]?\d+", item) else float(item))
        elif _STRING.fullmatch(item):
            out.append(item[1:-1])
        elif re.fullmatch(r"[A-Za-z0-9_.\-]+", item):
            out.append(item)
        else:
            raise ValueError(f"{value!r}: choice values are numbers or words, got {item!r}")
    return ("choice", out)


def _lit(v: Any) -> str:
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))  # 100.0 -> 100: exact, and what a user would write
    return repr(v)


def advertisement_for(gens: dict[str, tuple[str, list[Any]]]) -> str:
    preds = []
    for attr, (kind, args) in gens.items():
        if kind == "const":
            preds.append(f"[{attr},eq,{_lit(args[0])}]")
        elif kind == "uniform":
            preds += [f"[{attr},>=,{_lit(min(args))}]", f"[{attr},<=,{_lit(max(args))}]"]
        elif all(isinstance(a, (int, float)) for a in args):
            preds += [f"[{attr},>=,{_lit(min(args))}]", f"[{attr},<=,{_lit(max(args))}]"]
        elif all(isinstance(a, str) for a in args):
            preds.append(f"[{attr},isPresent,'']")
        # a choice mixing numbers and strings: no predicate (any value)
    return ",".join(preds)


def make_attr_source(gens: dict[str, tuple[str, list[Any]]], rng: Any) -> Callable[[], dict[str, Any]]:
    """A function drawing one publication's attributes."""
    consts = {a: args[0] for a, (k, args) in gens.items() if k == "const"}
    uni = [(a, args[0], args[1]) for a, (k, args) in gens.items() if k == "uniform"]
    cho = [(a, args) for a, (k, args) in gens.items() if k == "choice"]
    uniform, choice = rng.uniform, rng.choice

    def draw() -> dict[str, Any]:
        d = dict(consts)
        for a, lo, hi in uni:
            d[a] = uniform(lo, hi)
        for a, args in cho:
            d[a] = choice(args)
        return d

    return draw


SEQ_STRIDE = 10**9


def next_incarnation(state_dir: str | None) -> int:
    """0 on the first start, then 1, 2, ... (counted in ``state_dir/incarnation``, fsync'd)."""
    if not state_dir:
        return 0
    path = os.path.join(state_dir, "incarnation")
    try:
        with open(path) as f:
            n = int(f.read().strip() or 0) + 1
    except (OSError, ValueError):
        n = 0
    os.makedirs(state_dir, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(n))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return n


class ClientHost(Node):
    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        g = self.config.get("clients") or {}
        self.group: str = g.get("name") or self.name
        self.role: str = g.get("role", "")
        count = int(g.get("count") or 0)
        attach = list(g.get("attach") or [])
        if count > 0 and not attach:
            raise ValueError(f"clients {self.group}: attach names no broker")
        if self.role not in ("publisher", "subscriber"):
            raise ValueError(f"clients {self.group}: role must be publisher or subscriber, not {self.role!r}")
        extra = g.get("extra") or {}
        self.clients = [f"{self.group}-{i}" for i in range(count)]
        self.broker_of = {c: attach[i % len(attach)] for i, c in enumerate(self.clients)} if count else {}
        self.by_broker: dict[str, list[str]] = {}
        for c, b in self.broker_of.items():
            self.by_broker.setdefault(b, []).append(c)
        self.rate = float(g.get("rate_per_s") or 0.0)
        self.size = int(g.get("size_bytes") or 0)
        self.payload = b"\x00" * self.size
        self.advs: dict[str, dict[str, str]] = {c: {} for c in self.clients}  # client -> adv_id -> text
        self.subs: dict[str, dict[str, str]] = {c: {} for c in self.clients}  # client -> sub_id -> text
        self._nsub = dict.fromkeys(self.clients, 0)
        self._born_ns = self.rt.wall_ns()
        self.incarnation = next_incarnation(self.config.get("state_dir"))
        self.seq = dict.fromkeys(self.clients, self.incarnation * SEQ_STRIDE)
        self._seen_up: set[str] = set()
        self.published = 0
        self.delivered = 0
        self._timers: list[Any] = []
        self.workload = PacedWorkload(self.rt, self._publish_k)
        if self.role == "publisher":
            attrs = extra.get("attrs") or {"class": "STOCK", "price": "uniform(0,100)"}
            self.gens = {a: parse_generator(s) for a, s in attrs.items()}
            self.adv_text = extra.get("advertise") or advertisement_for(self.gens)
            parse(self.adv_text)  # fail early with the filter's column
            self.draw = make_attr_source(self.gens, self.rt.rng)
        else:
            self.filter_text = g.get("filter")
            if not self.filter_text:
                raise ValueError(f"clients {self.group}: a subscriber group needs a filter")
            parse(self.filter_text)
            self.unsubscribe_at = extra.get("unsubscribe_at")
            self.resubscribe_at = extra.get("resubscribe_at")

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        for c in self.clients:
            if self.role == "publisher":
                adv_id = f"{c}:a1"
                self.advs[c][adv_id] = self.adv_text
                self.rt.send(self.broker_of[c], {"k": "adv", "id": adv_id, "f": self.adv_text, "c": c})
                self.rt.log("advertise", client=c, adv_id=adv_id, filter=self.adv_text, broker=self.broker_of[c])
            else:
                self._subscribe(c)

    def _subscribe(self, c: str) -> None:
        self._nsub[c] += 1
        sub_id = f"{c}:s{self._nsub[c]}"
        self.subs[c][sub_id] = self.filter_text
        b = self.broker_of[c]
        self.rt.send(b, {"k": "sub", "id": sub_id, "f": self.filter_text, "c": c})
        self.rt.log("subscribe", client=c, sub_id=sub_id, filter=self.filter_text, broker=b)

    def _unsubscribe_all(self, c: str) -> None:
        b = self.broker_of[c]
        for sub_id in list(self.subs[c]):
            del self.subs[c][sub_id]
            self.rt.send(b, {"k": "unsub", "id": sub_id, "c": c})
            self.rt.log("unsubscribe", client=c, sub_id=sub_id, broker=b)

    def on_link_up(self, peer: str) -> None:
        """A silent cut to a broker healed: re-send this process's advertisements and
        subscriptions there, as after a reconnect (what was sent meanwhile was dropped)."""
        self._seen_up.add(peer)
        self.on_peer_up(peer)

    def on_peer_up(self, peer: str) -> None:
        if peer not in self.by_broker:
            return
        if peer not in self._seen_up:
            self._seen_up.add(peer)
            return
        nadv = nsub = 0
        wave = f"{self.name}>{peer}@{self.rt.wall_ns()}"
        self.rt.send(peer, {"k": "rsb", "rw": wave})
        for c in self.by_broker[peer]:
            for adv_id, text in self.advs[c].items():
                self.rt.send(peer, {"k": "adv", "id": adv_id, "f": text, "c": c})
                nadv += 1
            for sub_id, text in self.subs[c].items():
                self.rt.send(peer, {"k": "sub", "id": sub_id, "f": text, "c": c})
                nsub += 1
        self.rt.send(peer, {"k": "rse", "rw": wave})  # the broker logs broker_resync_applied on it
        self.rt.log("client_resync", broker=peer, advs=nadv, subs=nsub)

    async def start_workload(self, t0_wall_ns: int, duration_s: float) -> None:
        # The runtime calls this at t0, a little late at times: then the loop catches up. A
        # process restarted mid-run (born after t0) instead resumes the schedule where it stands
        # now -- what fell due while it was down is not sent -- and still ends at t0 + duration.
        if self.role == "publisher":
            self.workload.start(self.rate * len(self.clients), t0_wall_ns, duration_s,
                                born_wall_ns=self._born_ns)
        else:
            offset_s = (t0_wall_ns - self.rt.wall_ns()) / 1e9
            for at, tick in ((self.unsubscribe_at, self._unsub_tick), (self.resubscribe_at, self._resub_tick)):
                if at is not None and offset_s + float(at) >= 0:  # not already past (a restart)
                    self._timers.append(self.rt.call_later(offset_s + float(at), tick))

    async def stop_workload(self) -> None:
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        self.workload.stop()

    async def stop(self) -> None:
        await self.stop_workload()

    def _unsub_tick(self) -> None:
        for c in self.clients:
            self._unsubscribe_all(c)

    def _resub_tick(self) -> None:
        for c in self.clients:
            self._subscribe(c)

    # -- publishing ---------------------------------------------------------------
    def _publish_k(self, k: int) -> None:
        self._publish(self.clients[k % len(self.clients)])

    def _publish(self, c: str) -> None:
        seq = self.seq[c] + 1
        self.seq[c] = seq
        attrs = self.draw()
        pub_id = f"{c}:{seq}"
        b = self.broker_of[c]
        self.rt.send(b, {"k": "pub", "id": pub_id, "c": c, "s": seq, "a": attrs, "p": self.payload,
                         "t": self.rt.wall_ns(), "h": 0})
        self.rt.log("publish", client=c, pub_id=pub_id, seq=seq, attrs=attrs, size=self.size, broker=b)
        self.published += 1

    # -- receiving ----------------------------------------------------------------
    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        if msg.get("k") != "pub":
            return
        log = self.rt.log
        pub_id, publisher, seq, pub_t, hops = msg["id"], msg["c"], msg["s"], msg["t"], msg["h"]
        for c in msg.get("to") or ():
            log("deliver", client=c, pub_id=pub_id, publisher=publisher, seq=seq, pub_t=pub_t, hops=hops)
            self.delivered += 1

    def status(self) -> dict[str, Any]:
        return {"clients": len(self.clients), "role": self.role, "published": self.published,
                "delivered": self.delivered,
                "subscriptions": sum(len(v) for v in self.subs.values())}
