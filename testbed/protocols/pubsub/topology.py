"""Topology rules of the ``pubsub`` protocol (content-based routing, PADRES model).

Filters (a subscriber group's ``filter``, a publisher group's ``params.advertise``)
are checked with the brokers' own parser (``testbed.protocols.pubsub.nodes.filters``), so
a file that validates is a file the nodes accept. The language, in short:
a comma-separated conjunction of predicates ``[attr,op,value]``

    [class,eq,'STOCK'],[price,<,50]

``attr``   ``[A-Za-z_][A-Za-z0-9_.-]*``
``op``     ``eq`` ``=`` ``neq`` ``!=`` ``<`` ``<=`` ``>`` ``>=`` ``isPresent`` ``str-prefix``
``value``  a number (``50``, ``-1.5``, ``1e3``) or a quoted string (``'STOCK'``/``"STOCK"``,
           backslash escapes the quote); unquoted words are errors. ``isPresent`` takes a
           value whose type is the attribute's (``[price,isPresent,0]``, ``[sym,isPresent,'']``);
           ``str-prefix`` a string. The empty filter matches everything.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from testbed.protocols.pubsub.nodes import clients as _clients
from testbed.protocols.pubsub.nodes import filters as _filters
from testbed.protocols.pubsub.nodes.clients import parse_generator
from testbed.topology.schema import StrictModel
from testbed.topology.units import Time

OPS = _filters.OPS

_ATTR = r"[A-Za-z_][A-Za-z0-9_.\-]*"


def parse_filter(text: str) -> Any:
    """Parse a filter with the brokers' parser; ValueError (one line, with the column) if bad."""
    if not isinstance(text, str):
        raise ValueError("a filter is a quoted text, e.g. \"[class,eq,'STOCK']\"")
    try:
        return _filters.parse(text)
    except _filters.FilterError as e:
        raise ValueError(f"bad filter: col {e.pos + 1}: {str(e).split(': ', 2)[-1]}") from None


def advertisement_for(attrs: dict[str, Any]) -> str:
    """The advertisement a publisher with these attribute generators needs (the nodes' derivation)."""
    return _clients.advertisement_for({a: parse_generator(spec) for a, spec in attrs.items()})


def _check_filter(v: str | None) -> str | None:
    if v is not None:
        parse_filter(v)
    return v


class Params(StrictModel):
    """Top-level ``params`` of a pubsub topology."""

    covering: Literal["off", "lazy", "active"] = "off"
    settle: Time = 1.0  # seconds the clients wait after (un)advertising/subscribing before the workload


DEFAULT_ATTRS = {"class": "STOCK", "price": "uniform(0,100)"}


class PublisherParams(StrictModel):
    """``params`` of a publisher group."""

    attrs: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_ATTRS))
    advertise: str | None = None  # default: derived from attrs

    @field_validator("attrs")
    @classmethod
    def _attrs(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not v:
            raise ValueError("attrs needs at least one attribute")
        for attr, spec in v.items():
            if not re.fullmatch(_ATTR, str(attr)):
                raise ValueError(f"{attr!r} is not an attribute name")
            try:
                parse_generator(spec)
            except ValueError as e:
                raise ValueError(f"{attr}: {e}") from None
        return v

    @field_validator("advertise")
    @classmethod
    def _adv(cls, v: str | None) -> str | None:
        return _check_filter(v)

    @model_validator(mode="after")
    def _derive(self) -> "PublisherParams":
        if self.advertise is None:
            self.advertise = advertisement_for(self.attrs)
        return self


class SubscriberParams(StrictModel):
    """``params`` of a subscriber group (times from the start of the workload)."""

    unsubscribe_at: Time | None = None
    resubscribe_at: Time | None = None

    @model_validator(mode="after")
    def _order(self) -> "SubscriberParams":
        if self.resubscribe_at is not None:
            if self.unsubscribe_at is None:
                raise ValueError("resubscribe_at needs unsubscribe_at")
            if self.resubscribe_at <= self.unsubscribe_at:
                raise ValueError("resubscribe_at must be after unsubscribe_at")
        return self


class Placement(StrictModel):
    """``placement`` of a pubsub topology (nothing to place)."""


ClientParams = {"publisher": PublisherParams, "subscriber": SubscriberParams}

NODE_ROLES = {"broker"}
CLIENT_ROLES = {"publisher", "subscriber"}
ACYCLIC = "forest"


def check(topology) -> list:
    """Filters, rates and times that the models alone cannot judge."""
    problems = []
    duration = topology.duration
    for name, g in topology.clients.items():
        if g.role == "subscriber":
            if g.filter is None:
                problems.append(topology.problem(("clients", name),
                                                 "a subscriber group needs a filter, e.g. \"[class,eq,'STOCK']\""))
            else:
                try:
                    parse_filter(g.filter)
                except ValueError as e:
                    problems.append(topology.problem(("clients", name, "filter"), str(e)))
            if g.rate is not None:
                problems.append(topology.problem(("clients", name, "rate"), "subscribers do not publish; remove rate"))
            cp = topology.client_params(name)
            for key in ("unsubscribe_at", "resubscribe_at"):
                t = getattr(cp, key, None) if cp is not None else None
                if t is not None and t >= duration:
                    problems.append(topology.problem(("clients", name, "params", key),
                                                     f"{key} must be before the end of the run ({duration:g}s)"))
        elif g.role == "publisher":
            if g.filter is not None:
                problems.append(topology.problem(("clients", name, "filter"),
                                                 "publishers do not subscribe; use params.advertise for the advertisement"))
            if g.rate is None:
                problems.append(topology.problem(("clients", name), "a publisher group needs a rate, e.g. 10/s"))
    return problems
