"""Content-based pub/sub core (PADRES model): SRT/PRT routing, covering, clients.

The public API for protocols built on the core (import these names from
``testbed.protocols.pubsub.nodes``; names starting with ``_`` in its modules are private):

Broker            the PADRES broker node; extend it by subclassing: add message kinds
                  with ``HANDLERS = {"kind": "method"}`` (merged along the MRO), use
                  ``origin(src, msg)``/``hop_of``, ``emit(outs)``, ``table``
ClientHost        the pub/sub client process (publishers, subscribers)
RoutingTable      pure routing tables (advertise/subscribe/... -> [Out]); ``clone()``
Out, Entry, MatchIndex, COVERING_MODES
Filter, Pred, FilterError, parse, parse_cached, make, topic, matches, intersects,
covers, value_type, OPS, CANON_OP     the filter language
parse_generator, advertisement_for    publisher attribute generators

Exports are imported lazily, so a node that only needs ``NODE_CLASSES`` loads nothing else.
"""

from __future__ import annotations

import importlib
from typing import Any

NODE_CLASSES = {
    ("node", "broker"): "testbed.protocols.pubsub.nodes.broker:Broker",
    ("clients", "*"): "testbed.protocols.pubsub.nodes.clients:ClientHost",
}

_EXPORTS = {
    "Broker": "broker", "ClientHost": "clients", "parse_generator": "clients",
    "advertisement_for": "clients", "next_incarnation": "clients",
    "RoutingTable": "routing", "Out": "routing", "Entry": "routing", "MatchIndex": "routing",
    "COVERING_MODES": "routing", "Tentative": "routing", "Change": "routing",
    **{n: "filters" for n in ("Filter", "Pred", "FilterError", "parse", "parse_cached", "make", "topic",
                              "matches", "intersects", "covers", "value_type", "OPS", "CANON_OP")},
}

__all__ = ["NODE_CLASSES", *_EXPORTS]


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value
