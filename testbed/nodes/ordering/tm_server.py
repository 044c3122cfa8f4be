"""A TM server process: hosts the topic managers that the placement gives it."""

from __future__ import annotations

from typing import Any

from testbed.nodes.ordering.core import TMHost
from testbed.nodes.ordering.placement import make_placement, rank_table
from testbed.nodes.ordering import events as _events  # noqa: F401  (declares our events)
from testbed.nodes.runtime.api import Node

STATS_INTERVAL_S = 1.0


class TMServer(Node):
    def __init__(self, rt: Any) -> None:
        super().__init__(rt)
        params = self.config.get("params") or {}
        tm = (self.config.get("placement") or {}).get("topic_managers")
        if not tm:
            raise ValueError("ordering: placement.topic_managers is required")
        self.host = TMHost(self.name, make_placement(tm), causal=params.get("order") == "causal",
                           servers=list(tm["servers"]), rank=rank_table(tm))

    async def start(self) -> None:
        self.rt.call_later(STATS_INTERVAL_S, self._tick)

    def _tick(self) -> None:
        self._log_stats()
        self.rt.call_later(STATS_INTERVAL_S, self._tick)

    def _log_stats(self) -> None:
        self.rt.log("o_tm_stats", **self.host.c, tms=len(self.host.tms))

    async def stop(self) -> None:
        self._log_stats()

    def status(self) -> dict[str, Any]:
        return {**self.host.c, "tms": len(self.host.tms)}

    def on_message(self, src: str, msg: dict[str, Any]) -> None:
        send = self.rt.send
        for dst, out in self.host.handle(msg):
            send(dst, out)
