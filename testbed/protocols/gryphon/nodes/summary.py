"""Filter summaries and the SHB's subscriber index for Gryphon. Pure, stdlib only.

Filters are the pubsub protocol's (``testbed.protocols.pubsub.nodes.filters``: the PADRES
language ``[class,eq,'STOCK'],[price,>,10]``, one parser for the nodes and for
``testbed validate``). A subscription travels as its canonical filter text; the
empty filter matches everything.

A :class:`Summary` is the OR of the filters a subtree needs; a broker applies it on
the filter edge from its istream to an ostream (a D tick that does not match
becomes F there).
"""

from __future__ import annotations

from typing import Any, Iterable

from testbed.protocols.pubsub.nodes.filters import CANON_OP, OPS, Filter, Pred, make, matches, parse_cached, value_type

EVERYTHING = make([])
_MISSING = object()


def filter_of(text: str | None) -> Filter:
    """The filter of a subscription's text (None/empty: everything). Raises FilterError."""
    return parse_cached(text) if text else EVERYTHING


def key_filter(attr: str, value: Any) -> Filter:
    """``[attr,eq,value]`` (the Fig 4 workload's keyed subscriptions)."""
    return make([Pred(attr, "eq", value)])


def spec_json(f: Filter) -> list[list[Any]]:
    """The predicates as ``[[attr, op, value], ...]`` (the ``g_subscribe`` log and wire form)."""
    return [[p.attr, p.op, p.value] for p in f.preds]


def filter_from_wire(spec: Any) -> Filter:
    """A filter from its wire form ``[[attr, op, value], ...]``; ValueError if malformed."""
    preds = []
    for p in spec or ():
        if not isinstance(p, (list, tuple)) or len(p) != 3:
            raise ValueError(f"bad predicate {p!r}: expected [attr, op, value]")
        a, op, v = p
        op = CANON_OP.get(op, op)
        if not isinstance(a, str) or op not in OPS or value_type(v) is None or (
                op == "str-prefix" and not isinstance(v, str)):
            raise ValueError(f"bad predicate {p!r}")
        preds.append(Pred(a, op, v))
    return make(preds)


def _eq_pred(f: Filter) -> Pred | None:
    """A single-equality filter's predicate (indexable), else None."""
    if len(f.preds) == 1 and f.preds[0].op == "eq":
        return f.preds[0]
    return None


class Summary:
    """The OR of a set of filters; ``everything`` if any filter is empty (or if unknown)."""

    __slots__ = ("everything", "_eq", "_other")

    def __init__(self, filters: Iterable[Filter] | None = None) -> None:
        self.everything = filters is None
        self._eq: dict[str, set[Any]] = {}  # single-predicate equality filters, indexed
        self._other: set[Filter] = set()
        for f in filters or ():
            self.add(f)

    def add(self, f: Filter) -> None:
        if self.everything or not f.satisfiable:
            return
        if not f.preds:
            self.everything = True
            self._eq.clear()
            self._other.clear()
            return
        p = _eq_pred(f)
        if p is not None:
            self._eq.setdefault(p.attr, set()).add(p.value)
        else:
            self._other.add(f)

    def _add_eq(self, attr: str, value: Any) -> None:
        if not self.everything:
            self._eq.setdefault(attr, set()).add(value)

    def update(self, other: "Summary") -> None:
        if other.everything:
            self.add(EVERYTHING)
            return
        for a, vs in other._eq.items():
            for v in vs:
                self._add_eq(a, v)
        for f in other._other:
            self.add(f)

    def matches(self, attrs: dict[str, Any]) -> bool:
        if self.everything:
            return True
        for a, vs in self._eq.items():
            x = attrs.get(a, _MISSING)
            if x is not _MISSING and value_type(x) is not None and x in vs:
                return True
        return any(matches(f, attrs) for f in self._other)

    def is_empty(self) -> bool:
        return not self.everything and not self._eq and not self._other

    # wire form: None = everything, else a list of filters (lists of [attr, op, value])
    def to_wire(self) -> list | None:
        if self.everything:
            return None
        out: list = [[[a, "eq", v]] for a, vs in self._eq.items() for v in vs]
        out.extend(spec_json(f) for f in self._other)
        return out

    @classmethod
    def from_wire(cls, w: list | None) -> "Summary":
        if w is None:
            return cls(None)
        s = cls([])
        for spec in w:
            if len(spec) == 1 and spec[0][1] == "eq":
                s._add_eq(spec[0][0], spec[0][2])
            else:
                s.add(filter_from_wire(spec))
        return s

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Summary) and self.everything == other.everything
                and self._eq == other._eq and self._other == other._other)


class SubscriberIndex:
    """Local subscribers of one SHB, indexed on an equality predicate for fan-out.

    A filter that is just ``[a,eq,v]`` matches every publication whose ``a`` is ``v``
    (of v's type): found by one lookup, no predicate evaluation.
    """

    def __init__(self) -> None:
        self._only: dict[tuple[str, Any], list[str]] = {}  # filter == the indexed predicate
        self._more: dict[tuple[str, Any], list[str]] = {}  # indexed predicate + others
        self._scan: list[tuple[str, Filter]] = []
        self.filters: dict[str, Filter] = {}

    def add(self, client: str, f: Filter) -> None:
        if client in self.filters:
            return
        self.filters[client] = f
        p = next((p for p in f.preds if p.op == "eq"), None)
        if p is None:
            self._scan.append((client, f))
        elif len(f.preds) == 1:
            self._only.setdefault((p.attr, p.value), []).append(client)
        else:
            self._more.setdefault((p.attr, p.value), []).append(client)

    def __len__(self) -> int:
        return len(self.filters)

    def match(self, attrs: dict[str, Any]) -> list[str]:
        out: list[str] = []
        for a, v in attrs.items():
            if value_type(v) is None:  # bool, None, lists...: match no predicate
                continue
            cands = self._only.get((a, v))
            if cands:
                out.extend(cands)
            cands = self._more.get((a, v))
            if cands:
                out.extend(c for c in cands if matches(self.filters[c], attrs))
        out.extend(c for c, f in self._scan if matches(f, attrs))
        return out

    def summary(self) -> Summary:
        return Summary(self.filters.values())
