"""The Gryphon broker process: PHB, intermediate broker and SHB in one (Sec 3).

Per pubend P a broker keeps ``ist[P]`` (istream) and ``ost[P][c]`` for every
downstream cell c of P's tree (filter edges), plus a subend stream when it
hosts subscribers. A PHB's istream is the pubend's own stream. Messages
(msgpack maps, key ``k``):

  pub     client -> PHB      a publication for pubend ``pe``
  sub     client -> SHB      a subscription (client id, filter spec)
  km      down               knowledge: F intervals ``f``, D ticks ``d``, ``rt`` retransmission
  ack     up                 ``T``: ticks below are A at the sender's cell (``cell`` when relayed)
  nack    up                 ``[lo, hi)`` C ticks
  ackexp  down               AckExpected ``T``
  side    sideways           ``{"to": cell, "msg": km|ackexp}`` forward to a cell I cannot reach
  ls      any neighbour      link status: reachable cells, filter summary of my subtree
  dlv     SHB -> client      a delivery
"""

from __future__ import annotations

import math
import os
from typing import Any

from testbed.protocols.gryphon.nodes import events as _events  # noqa: F401  (registers the gryphon events)
from testbed.protocols.gryphon.nodes.cells import CellMap, bundle_pick, pubend_id
from testbed.protocols.gryphon.nodes.summary import Summary, SubscriberIndex, filter_from_wire
from testbed.protocols.gryphon.nodes.pubend import LOG_FORCE_S, Pubend, PubendLog
from testbed.protocols.gryphon.nodes.streams import (CuriousSet, KnowledgeStream, OStream, SubendStream,
                                           project, silence_before)
from testbed.nodes.runtime.api import Node

DEFAULTS = {
    "mode": "gd",  # gd | best-effort
    "gct": 0.2,
    "nrt": 0.6,  # the minimum nack repetition interval
    "nrt_max": 10.0,
    "aet": 10.0,
    "dct": None,  # None / inf: no delay curiosity
    "ack_interval": 0.1,
    "ls_interval": 0.2,
    "link_timeout": 1.0,
    "log_sync": 0.005,  # group-commit interval of the pubend log
    "log_force": LOG_FORCE_S,  # how long a log force takes (Sec 4.1: the ~100 ms GD cost)
    "silence": 0.5,
    "nack_chunk": 0.5,  # seconds of ticks per nack message
}


def params_of(config: dict[str, Any]) -> dict[str, Any]:
    p = dict(DEFAULTS)
    for k, v in (config.get("params") or {}).items():
        if k in p and v is not None:
            p[k] = v
    dct = p["dct"]
    if isinstance(dct, str) or (isinstance(dct, float) and math.isinf(dct)):
        p["dct"] = None
    if p["mode"] not in ("gd", "best-effort"):
        raise ValueError(f"gryphon params.mode: {p['mode']!r} is not gd or best-effort")
    return p


def _wire_f(f: list[tuple[int, int]]) -> list[list[int]]:
    return [[a, b] for a, b in f]


def _key(m: dict[str, Any]) -> int:
    k = (m.get("a") or {}).get("k", -1)
    return k if isinstance(k, int) else -1


class GryphonBroker(Node):
    def __init__(self, rt) -> None:
        super().__init__(rt)
        self.p = params_of(self.config)
        self.gd = self.p["mode"] == "gd"
        self.cells = CellMap(self.config.get("directory") or {})
        self.cell = self.cells.cell_of.get(self.name, self.name)
        self.peers = sorted(self.cells.neighbors.get(self.name, set()) | set(self.cells.cell_peers(self.name)))
        self.pubends: dict[str, Pubend] = {}
        self.log: PubendLog | None = None
        self.ist: dict[str, KnowledgeStream] = {}
        self.icur: dict[str, CuriousSet] = {}
        self.ost: dict[str, dict[str, OStream]] = {}
        self.sub: dict[str, SubendStream] = {}
        self.subs = SubscriberIndex()
        self.client_proc: dict[str, str] = {}
        self.lanes: set[str] = set()  # subscribers on a dedicated connection (their lane's name)
        self.local_summary = Summary([])
        self.summary_dirty = False
        self.last_sender: dict[str, str] = {}
        self.ack_sent: dict[str, int] = {}
        self.heard: dict[str, float] = {}
        self.alive: set[str] = set()
        self.disconnected: set[str] = set()
        self.reach: dict[str, set[str]] = {}
        self.filt: dict[str, Summary] = {}
        self.routes: dict[tuple[str, str], str] = {}
        self.sync_scheduled = False
        self.counters = {"delivered": 0, "nacks": 0, "retx": 0}
        self.stopped = False
        self._forcing: dict[str, int] = {}  # pubend -> pending records in a log force under way

    # ------------------------------------------------------------------ helpers
    def now(self) -> float:
        return self.rt.mono_ns() / 1e9

    def now_ms(self) -> int:
        return self.rt.wall_ns() // 1_000_000

    def every(self, interval: float, fn) -> None:
        def tick() -> None:
            if self.stopped:
                return
            fn()
            self.rt.call_later(interval, tick)

        self.rt.call_later(interval, tick)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        now = self.now()
        for n in self.peers:  # optimistic until the link timeout says otherwise
            self.heard[n] = now
            self.alive.add(n)
        if self.gd:
            self._recover()
        self.every(self.p["ls_interval"], self._link_status)
        if self.gd:
            self.every(self.p["ack_interval"], self._acks)
            self.every(min(0.05, self.p["gct"] / 4), self._subend_timers)
            self.every(self.p["silence"], self._silence)
            self.every(max(0.5, self.p["aet"] / 4), self._ack_expected)
        self.every(1.0, self._stats)

    async def stop(self) -> None:
        self.stopped = True
        if self.log is not None:
            self.log.sync()
            self.log.close()

    def _log_path(self) -> str:
        return os.path.join(self.config.get("state_dir") or ".", "pubends.log")

    def _recover(self) -> None:
        path = self._log_path()
        recs = PubendLog.recover(path)
        if not recs:
            return
        by: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for pe, t, m in recs:
            by.setdefault(pe, []).append((t, m))
        now_ms = self.now_ms()
        for pe, rs in by.items():
            pb = Pubend.recovered(pe, rs, now_ms)
            self._install_pubend(pb)
            self.rt.log("g_recover", pubend=pe, records=len(rs), last_tick=pb.last_d, horizon=pb.horizon)
            for i in range(0, len(rs), 500):
                chunk = rs[i:i + 500]
                self.rt.log("g_logged", pubend=pe, ticks=[t for t, _ in chunk],
                            seqs=[int(m.get("seq", -1)) for _, m in chunk],
                            keys=[_key(m) for _, m in chunk], recovered=True)
        # "first send an AckExpected message with the timestamp of the last message it logged"
        self.rt.call_later(max(2 * self.p["ls_interval"], 0.3), self._ack_expected, True)

    def _install_pubend(self, pb: Pubend) -> None:
        self.pubends[pb.id] = pb
        self.ist[pb.id] = pb.k
        self._streams(pb.id)

    def _streams(self, pe: str) -> dict[str, OStream]:
        """Create (once) the istream and the ostreams of pubend ``pe`` at this broker."""
        o = self.ost.get(pe)
        if o is None:
            o = {c: OStream(c, self._cell_filter(c)) for c in self.cells.children(pe, self.cell)}
            self.ost[pe] = o
            self.ist.setdefault(pe, KnowledgeStream())
            self.icur[pe] = CuriousSet()
        return o

    # ------------------------------------------------------------------ link status, routing
    def on_peer_down(self, peer: str) -> None:
        """The connection to ``peer`` was lost (a crash is detected at once): until it is back,
        the runtime would drop what we send, so the peer is not a usable link."""
        if peer not in self.heard:
            return
        self.disconnected.add(peer)
        if peer in self.alive:
            self.alive.discard(peer)
            self.routes = {k: v for k, v in self.routes.items() if v != peer}
            self.rt.log("g_peer", peer=peer, up=False, reason="connection")

    def on_peer_up(self, peer: str) -> None:
        if peer not in self.heard or peer not in self.disconnected:
            return
        self.disconnected.discard(peer)
        if self.now() - self.heard[peer] <= self.p["link_timeout"] and peer not in self.alive:
            self.alive.add(peer)
            self.routes.clear()
            self.rt.log("g_peer", peer=peer, up=True, reason="connection")

    def _link_status(self) -> None:
        now = self.now()
        if self.summary_dirty:
            self.summary_dirty = False
            self.local_summary = self.subs.summary()
        for n in self.peers:
            if n in self.alive and now - self.heard.get(n, 0.0) > self.p["link_timeout"]:
                self.alive.discard(n)
                self.routes = {k: v for k, v in self.routes.items() if v != n}
                self.rt.log("g_peer", peer=n, up=False, reason="timeout")
        reach = sorted({self.cells.cell_of[n] for n in self.alive if n in self.cells.neighbors[self.name]})
        for n in self.peers:
            self.rt.send(n, {"k": "ls", "reach": reach, "filt": self._summary_for(n).to_wire()})

    def _summary_for(self, n: str) -> Summary:
        s = Summary([])
        s.update(self.local_summary)
        skip = {self.cells.cell_of[n], self.cell}
        for m in self.cells.neighbors[self.name]:
            if self.cells.cell_of[m] in skip:
                continue
            f = self.filt.get(m)
            s.update(f if f is not None else Summary(None))
            if s.everything:
                break
        return s

    def _cell_filter(self, cell: str):
        """The filter edge towards ``cell``: the OR of what its members reported (unknown: all)."""
        sums = [self.filt[m] for m in self.cells.members.get(cell, ()) if m in self.filt]
        if not sums:
            return None
        s = Summary([])
        for x in sums:
            s.update(x)
        if s.everything:
            return None
        return s.matches

    def _on_ls(self, src: str, msg: dict[str, Any]) -> None:
        reach = set(msg.get("reach") or ())
        if self.reach.get(src) != reach:
            self.reach[src] = reach
            self.routes.clear()
        new = Summary.from_wire(msg.get("filt"))
        if self.filt.get(src) != new:
            self.filt[src] = new
            c = self.cells.cell_of.get(src)
            for os_ in self.ost.values():
                if c in os_:
                    os_[c].filter = self._cell_filter(c)

    def _heard(self, src: str) -> None:
        if src in self.heard:
            self.heard[src] = self.now()
            if src not in self.alive and src not in self.disconnected:
                self.alive.add(src)
                self.routes.clear()
                self.rt.log("g_peer", peer=src, up=True, reason="heard")

    def route(self, pe: str, cell: str) -> tuple[str, bool] | None:
        """(next hop, sideways?) for pubend ``pe``'s traffic towards ``cell``."""
        key = (pe, cell)
        r = self.routes.get(key)
        if r is not None:
            return r, self.cells.cell_of.get(r) == self.cell
        direct = [n for n in self.cells.links_to(self.name, cell) if n in self.alive]
        need = self.cells.children(pe, cell)
        full = [n for n in direct if all(c in self.reach.get(n, set(need)) for c in need)]
        hop = bundle_pick(pe, full or direct)
        side = False
        if hop is None:
            side_peers = [m for m in self.cells.cell_peers(self.name)
                          if m in self.alive and cell in self.reach.get(m, ())]
            hop = bundle_pick(pe, side_peers)
            side = True
        if hop is None:
            return None
        self.routes[key] = hop
        self.rt.log("g_route", pubend=pe, cell=cell, via=hop, sideways=side)
        return hop, side

    def send_down(self, pe: str, cell: str, msg: dict[str, Any]) -> None:
        r = self.route(pe, cell)
        if r is None:
            return
        hop, side = r
        if side:
            self.rt.send(hop, {"k": "side", "to": cell, "msg": msg})
        else:
            self.rt.send(hop, msg)

    def upstream(self, pe: str, *, all_members: bool = False) -> list[str]:
        """Where acks/nacks for ``pe`` go: the broker that last sent it down, else all of
        the upstream cell."""
        last = self.last_sender.get(pe)
        if not all_members and last is not None and last in self.alive:
            return [last]
        pc = self.cells.parent(pe, self.cell)
        if pc is None:
            return []
        ms = [m for m in self.cells.members.get(pc, ()) if m in self.alive]
        if last is not None and last in self.alive and last not in ms:
            ms.append(last)
        return ms

    # ------------------------------------------------------------------ messages
    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        k = msg.get("k")
        self._heard(src)
        if k == "km":
            self._on_km(src, msg)
        elif k == "pub":
            self._on_pub(src, msg)
        elif k == "ack":
            self._on_ack(src, msg)
        elif k == "nack":
            self._on_nack(src, msg)
        elif k == "ackexp":
            self._on_ackexp(src, msg)
        elif k == "side":
            inner = msg["msg"]
            r = [n for n in self.cells.links_to(self.name, msg["to"]) if n in self.alive]
            hop = bundle_pick(inner.get("pe", ""), r)
            if hop is not None:
                self.rt.send(hop, inner)
        elif k == "ls":
            self._on_ls(src, msg)
        elif k == "sub":
            self._on_sub(src, msg)

    # -- publishers / pubends
    def _on_pub(self, src: str, msg: dict[str, Any]) -> None:
        pe = msg.get("pe") or pubend_id(self.name, msg["c"])
        m = {"seq": msg["seq"], "c": msg["c"], "a": msg.get("a") or {}, "pt": msg["pt"],
             "pl": msg.get("pl", b"")}
        pb = self.pubends.get(pe)
        if pb is None:
            pb = Pubend(pe)
            self._install_pubend(pb)
        t = pb.assign(self.now_ms(), m)
        if pb.last_d < 0 and pb.k.acked == 0:
            pb.first_publication_prefix(t)
        if not self.gd:  # best effort: no logging, straight down (g_logged = "tick assigned")
            pb.pending.clear()
            self.rt.log("g_logged", pubend=pe, ticks=[t], seqs=[int(m["seq"])], keys=[_key(m)],
                        recovered=False)
            self._forward_be(pe, [(t, m)])
            return
        if self.log is None:
            self.log = PubendLog(self._log_path(), float(self.p["log_force"]))
        self.log.append(pe, t, m)
        if not self.sync_scheduled:
            self.sync_scheduled = True
            self.rt.call_later(self.p["log_sync"], self._sync)

    def _sync(self) -> None:
        self.sync_scheduled = False
        if self.log is None:
            return
        self.log.sync()
        batch = {}
        for pe, pb in self.pubends.items():  # records not yet part of a force under way
            n = len(pb.pending) - self._forcing.get(pe, 0)
            if n > 0:
                batch[pe] = n
                self._forcing[pe] = self._forcing.get(pe, 0) + n
        if not batch:
            return
        if self.log.force_s > 0:
            self.rt.call_later(self.log.force_s, self._forced, batch)
        else:
            self._forced(batch)

    def _forced(self, batch: dict[str, int]) -> None:
        """The log force of ``batch`` (pubend -> records) completed: publish them."""
        if self.stopped:
            return
        for pe, n in batch.items():
            self._forcing[pe] = max(0, self._forcing.get(pe, 0) - n)
            pb = self.pubends.get(pe)
            if pb is None or not pb.pending:
                continue
            f, d = pb.stable(n)
            self.rt.log("g_logged", pubend=pe, ticks=[t for t, _ in d],
                        seqs=[int(m["seq"]) for _, m in d], keys=[_key(m) for _, m in d],
                        recovered=False)
            self._dispatch(pe, f, d, rt=False, new_f=f, new_d=d)

    def _silence(self) -> None:
        now_ms = self.now_ms() - int(self.p["silence"] * 1000)
        for pe, pb in self.pubends.items():
            s = pb.silence(now_ms)
            if s is not None:
                f = [(0, pb.k.acked), s] if pb.k.acked else [s]
                self._dispatch(pe, f, [], rt=False, new_f=[s], new_d=[])

    def _ack_expected(self, recovery: bool = False) -> None:
        now_ms = self.now_ms()
        for pe, pb in self.pubends.items():
            t = pb.last_d + 1 if recovery else min(now_ms - int(self.p["aet"] * 1000), pb.horizon)
            if t <= pb.k.acked:
                continue
            ist = pb.k
            cells = []
            for c, o in self.ost.get(pe, {}).items():
                if o.effective_ack(ist) < t:
                    cells.append(c)
                    self.send_down(pe, c, {"k": "ackexp", "pe": pe, "T": t})
            sub = self.sub.get(pe)
            if sub is not None and sub.td < t:
                cells.append(self.cell)
                self._send_nacks(pe, sub.expect(t, self.now(), "aet"))
            if cells:
                self.rt.log("g_ackexp", pubend=pe, tick=t, cells=cells)

    # -- knowledge
    def _on_km(self, src: str, msg: dict[str, Any]) -> None:
        pe = msg["pe"]
        if self.cells.cell_of.get(src) != self.cell:
            self.last_sender[pe] = src
        f = [(a, b) for a, b in msg.get("f") or ()]
        d = [(int(t), m) for t, m in msg.get("d") or ()]
        if not self.gd:
            self._forward_be(pe, d)
            return
        rt = bool(msg.get("rt"))
        os_ = self._streams(pe)
        if os_:
            ist = self.ist[pe]
            nf, nd = ist.accumulate(f, d)
            cur = self.icur[pe]
            for a, b in nf:
                cur.clear(a, b)
            for t, _ in nd:
                cur.clear(t, t + 1)
        else:
            nf, nd = f, d
        self._dispatch(pe, f, d, rt=rt, new_f=nf, new_d=nd)

    def _dispatch(self, pe: str, f, d, *, rt: bool, new_f, new_d) -> None:
        """Send knowledge down every filter edge (Sec 3.1) and into the local subend."""
        for c, o in self.ost.get(pe, {}).items():
            if rt:
                out = project(o, f, d, True)
            else:
                out = project(o, new_f if not new_d else f, new_d, False) if (new_f or new_d) else None
            if out is not None:
                if not rt and out[1]:
                    # bracket the D with the silence of this edge since its previous D
                    out[0].extend(silence_before(o, self.ist[pe], out[1][0][0]))
                    o.last_d = max(o.last_d, out[1][-1][0])
                self.send_down(pe, c, {"k": "km", "pe": pe, "f": _wire_f(out[0]),
                                       "d": [[t, m] for t, m in out[1]], "rt": rt})
        if len(self.subs):
            sub = self.sub.get(pe)
            if sub is None:
                sub = self.sub[pe] = SubendStream(gct=self.p["gct"], nrt_min=self.p["nrt"],
                                                  nrt_max=self.p["nrt_max"], dct=self.p["dct"],
                                                  chunk=int(self.p["nack_chunk"] * 1000))
            self._deliver(pe, sub.accumulate(f, d))

    def _deliver(self, pe: str, items) -> None:
        lanes = self.lanes
        send = self.rt.send
        for t, m in items:
            for c in self.subs.match(m.get("a") or {}):
                dlv = {"k": "dlv", "c": c, "pe": pe, "t": t, "s": m["seq"], "pt": m["pt"], "pl": m.get("pl", b"")}
                if c in lanes:  # a subscriber on a dedicated connection gets its deliveries on it
                    send(self.client_proc[c], dlv, c)
                else:
                    send(self.client_proc[c], dlv)
                self.counters["delivered"] += 1

    def _forward_be(self, pe: str, d) -> None:
        """Best effort: only D ticks, sent down the filter edges; delivered on arrival."""
        os_ = self.ost.get(pe)
        if os_ is None:
            os_ = self._streams(pe)
        for c, o in os_.items():
            dd = [[t, m] for t, m in d if o.passes(m)]
            if dd:
                self.send_down(pe, c, {"k": "km", "pe": pe, "d": dd})
        if len(self.subs):
            self._deliver(pe, d)

    # -- curiosity
    def _on_ack(self, src: str, msg: dict[str, Any]) -> None:
        if not self.gd:
            return
        pe = msg["pe"]
        c = msg.get("cell") or self.cells.cell_of.get(src)
        os_ = self._streams(pe)
        o = os_.get(c)
        if o is None or msg["T"] <= o.acked:
            return
        o.acked = msg["T"]
        o.curious.remove_below(o.acked)
        if "cell" not in msg:  # relay to the replicas in my cell
            for m in self.cells.cell_peers(self.name):
                if m in self.alive:
                    self.rt.send(m, {"k": "ack", "pe": pe, "T": msg["T"], "cell": c})

    def _acks(self) -> None:
        """Ack consolidation: a tick is A upstream once every downstream edge is A."""
        for pe in set(self.ost) | set(self.sub):
            os_ = self._streams(pe)
            ist = self.ist[pe]
            marks = [o.effective_ack(ist) for o in os_.values()]
            sub = self.sub.get(pe)
            if sub is not None:
                marks.append(sub.td)
            if not marks:
                marks.append(ist.known.run_end(ist.acked))
            t = min(marks)
            pb = self.pubends.get(pe)
            if pb is not None:
                ist.ack(min(t, pb.horizon))
                continue
            if t > ist.acked:
                ist.ack(t)
                self.icur[pe].below(t)
            if t > self.ack_sent.get(pe, 0):
                self.ack_sent[pe] = t
                for n in self.upstream(pe):
                    self.rt.send(n, {"k": "ack", "pe": pe, "T": t})

    def _on_nack(self, src: str, msg: dict[str, Any]) -> None:
        if not self.gd:
            return
        pe, lo, hi = msg["pe"], int(msg["lo"]), int(msg["hi"])
        c = self.cells.cell_of.get(src)
        os_ = self._streams(pe)
        o = os_.get(c)
        if o is None:
            o = os_[c] = OStream(c, self._cell_filter(c))
        ist = self.ist[pe]
        f, d, q = ist.lookup(lo, hi)
        if f or d:
            fo = list(f)
            do = []
            for t, m in d:
                if o.passes(m):
                    do.append([t, m])
                else:
                    fo.append((t, t + 1))
            self.rt.send(src, {"k": "km", "pe": pe, "f": _wire_f(fo), "d": do, "rt": True})
            self.counters["retx"] += 1
            self.rt.log("g_retx", pubend=pe, to=src, lo=lo, hi=hi, d_count=len(do))
        if not q or pe in self.pubends:
            return  # a pubend's Q ticks are the future (or pending the log): first-time will come
        cur = self.icur[pe]
        now = self.now()
        cur.forget_older(now, self.p["nrt"])
        fresh: list[tuple[int, int]] = []
        for a, b in q:
            o.curious.add(a, b)
            fresh.extend(cur.add(a, b, now))
        if fresh:
            self._send_nacks(pe, [(a, b, "consolidated") for a, b in fresh], origin="broker")

    def _send_nacks(self, pe: str, nacks, origin: str = "subend") -> None:
        for a, b, reason in nacks:
            to = self.upstream(pe, all_members=(reason == "nrt"))
            for n in to:
                self.rt.send(n, {"k": "nack", "pe": pe, "lo": a, "hi": b})
            self.counters["nacks"] += 1
            self.rt.log("g_nack", pubend=pe, lo=a, hi=b, range_ms=b - a, to=to, origin=origin,
                        reason=reason)

    def _on_ackexp(self, src: str, msg: dict[str, Any]) -> None:
        if not self.gd:
            return
        pe, t = msg["pe"], int(msg["T"])
        if self.cells.cell_of.get(src) != self.cell:
            self.last_sender.setdefault(pe, src)
        os_ = self._streams(pe)
        ist = self.ist[pe]
        for c, o in os_.items():
            if o.effective_ack(ist) < t:
                self.send_down(pe, c, {"k": "ackexp", "pe": pe, "T": t})
        sub = self.sub.get(pe)
        if sub is None and len(self.subs):
            sub = self.sub[pe] = SubendStream(gct=self.p["gct"], nrt_min=self.p["nrt"],
                                              nrt_max=self.p["nrt_max"], dct=self.p["dct"],
                                              chunk=int(self.p["nack_chunk"] * 1000))
        if sub is not None:
            self._send_nacks(pe, sub.expect(t, self.now(), "aet"))

    def _subend_timers(self) -> None:
        now, now_ms = self.now(), self.now_ms()
        for pe, sub in self.sub.items():
            nacks = sub.check(now, now_ms)
            if nacks:
                self._send_nacks(pe, nacks)

    # -- subscribers
    def _on_sub(self, src: str, msg: dict[str, Any]) -> None:
        c = msg["c"]
        try:
            f = filter_from_wire(msg.get("f"))
        except ValueError:
            return  # not a filter (clients parse theirs with the same language)
        self.client_proc[c] = src
        if msg.get("ln"):
            if c not in self.lanes:
                self.lanes.add(c)
                self.rt.open_lane(src, c)  # opened now, before the workload, not at the first delivery
        else:
            self.lanes.discard(c)
        self.subs.add(c, f)
        self.summary_dirty = True  # rebuilt once per link status round, not per subscription

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        return {"mode": self.p["mode"], "pubends": len(self.pubends), "subscribers": len(self.subs),
                "alive": sorted(self.alive), **self.counters}

    def _stats(self) -> None:
        self.rt.log("g_stats", mode=self.p["mode"], pubends=len(self.pubends), istreams=len(self.ist),
                    ostreams=sum(len(o) for o in self.ost.values()), subends=len(self.sub),
                    subscribers=len(self.subs),
                    gap_ticks=sum(s.gap_ticks() for s in self.sub.values()),
                    delivered=self.counters["delivered"], nacks=self.counters["nacks"],
                    retx=self.counters["retx"], held_d=sum(len(k.data) for k in self.ist.values()))
