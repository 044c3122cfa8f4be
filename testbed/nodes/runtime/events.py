"""The event registry: every event type a node may log, declared once.

Every line of a node's log is one JSON object with the common fields
``t`` (wall clock, ns since the epoch), ``m`` (monotonic clock, ns), ``node``
(process name) and ``ev`` (event type), plus the fields declared here for that
event type. The Spark ingest builds its explicit schemas from these
declarations (``testbed.analysis.ingest``), so an undeclared field never
reaches an analysis.

Field types: ``str``, ``int``, ``float``, ``bool``, ``json`` (any JSON value,
kept as a JSON string in Parquet), ``list[str]``, ``list[int]``.

Protocols declare their events in ``<nodes package>/events.py`` with
:func:`declare` (found by convention: no list names them). :func:`all_events`
imports every built-in ``testbed/nodes/<protocol>/events.py`` it finds and
returns what is declared; the controller's protocol registry
(``testbed.registry.all_events``) adds external protocols' events modules
first. Stdlib only: this module runs inside node processes.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

FIELD_TYPES = ("str", "int", "float", "bool", "json", "list[str]", "list[int]")
COMMON_FIELDS: dict[str, str] = {"t": "int", "m": "int", "node": "str", "ev": "str"}

@dataclass(frozen=True)
class EventType:
    name: str
    fields: dict[str, str]
    doc: str
    protocol: str


_REGISTRY: dict[str, EventType] = {}


def declare(name: str, protocol: str, doc: str, **fields: str) -> EventType:
    """Declare an event type. Re-declaring the same name with other fields is an error."""
    for f, ty in fields.items():
        if ty not in FIELD_TYPES:
            raise ValueError(f"event {name}: field {f}: unknown type {ty!r}")
        if f in COMMON_FIELDS:
            raise ValueError(f"event {name}: field {f} is a common field")
    et = EventType(name, dict(fields), doc, protocol)
    old = _REGISTRY.get(name)
    if old is not None and old != et:
        raise ValueError(f"event {name} declared twice with different fields")
    _REGISTRY[name] = et
    return et


def get(name: str) -> EventType | None:
    return _REGISTRY.get(name)


def builtin_event_modules() -> list[str]:
    """``testbed.protocols.<p>.nodes.events`` for every built-in protocol package that has one (by
    convention: the folders beside this runtime, ``testbed/protocols/<p>/nodes/events.py``)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "protocols"
    out = []
    for info in pkgutil.iter_modules([str(root)]):
        if info.ispkg and not info.name.startswith("_") and (root / info.name / "nodes" / "events.py").is_file():
            out.append(f"testbed.protocols.{info.name}.nodes.events")
    return sorted(out)


def all_events() -> dict[str, EventType]:
    """Every declared event type: the runtime's, every built-in protocol's, and any other
    events module imported so far (an external protocol's)."""
    for mod in builtin_event_modules():
        importlib.import_module(mod)
    return dict(_REGISTRY)


# --- runtime events (every node) ------------------------------------------------
declare("node_start", "runtime", "The process started (or restarted) and is listening.",
        pid="int", restarted="bool", role="str", kind="str", emulation="str")
declare("node_stop", "runtime", "Graceful shutdown; the last line of a cleanly stopped log.",
        reason="str")
declare("peer_up", "runtime", "An outbound connection to a peer was established.", peer="str")
declare("peer_down", "runtime", "An outbound connection to a peer was lost.", peer="str")
declare("link_set", "runtime", "Egress emulation for a destination changed.",
        peer="str", spec="json")
declare("link_state", "runtime", "A link went down or up (cut/heal/partition).",
        peer="str", up="bool", reason="str")
declare("stall", "runtime", "The node began (on=true) or ended (on=false) holding all egress.",
        on="bool", held="int")
declare("drop", "runtime", "Messages dropped at egress (emulated loss, link down, no connection).",
        peer="str", reason="str", count="int")
declare("workload", "runtime", "The workload phase began or ended at this node.",
        phase="str", t0="int", duration_s="float")
declare("cpu", "runtime", "Periodic sample of this process's CPU time and memory.",
        user_s="float", sys_s="float", rss_kb="int")
declare("service", "runtime",
        "Periodic sample of the node's service queue (only with a service time, docs/topology.md): the "
        "queue now and its longest since the last sample, messages served, the fraction of the interval "
        "the server was busy (service time drawn / interval, at most 1) and the mean wait in the queue.",
        queued="int", max_queued="int", served="int", busy="float", wait_ms="float")
declare("stats", "runtime", "Periodic transport counters.",
        sent="int", received="int", bytes_out="int", bytes_in="int", dropped="int")
declare("conns", "runtime",
        "Periodic, on a node configured for lanes (``connections`` > 0): its lanes up now (the "
        "connections of its own it opened, e.g. one per dedicated subscriber) and its inbound "
        "connections now (all peers' main connections and lanes).",
        lanes_up="int", inbound="int")
declare("node_error", "runtime",
        "An uncaught exception ended the node (exit status non-zero): in protocol code or escaping "
        "the event loop (``where``), with the refusal counts so far (``rejected``).",
        error="str", where="str", rejected="json")
declare("sched", "runtime",
        "Egress scheduling error (release - due) of one link over the node's life, at shutdown.",
        peer="str", n="int", p50_us="float", p99_us="float", max_us="float")
declare("conn_rejected", "runtime",
        "Connections or control requests refused (no proof of the run secret, another run, replay, "
        "garbage, timeout); at most a few lines per second per reason, ``count`` includes the "
        "suppressed ones.",
        channel="str", peer="str", reason="str", detail="str", count="int")
declare("ctl_applied", "runtime",
        "A control request carried out (every op but ping/clock/status), with who asked: origin "
        "schedule | inject | housekeeping | unknown, and the controller's address.",
        op="str", origin="str", peer="str", ok="bool", args="list[str]")
