"""Content filters for Gryphon subscriptions and per-hop filter edges. Pure, stdlib only.

A filter is a conjunction of predicates ``(attr, op, value)``, written in the
PADRES style ``[class,eq,'STOCK'],[price,>,10]``. ``None`` / empty text means
"everything". A :class:`Summary` is the OR of the filters a subtree needs; a
broker applies it on the filter edge from its istream to an ostream (a D tick
that does not match becomes F there).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

OPS = ("eq", "ne", "<", "<=", ">", ">=", "isPresent")
Pred = tuple[str, str, Any]
Spec = tuple[Pred, ...]

_PRED = re.compile(r"\[\s*([A-Za-z_][\w.-]*)\s*,\s*(eq|ne|<=|>=|<|>|=|isPresent)\s*(?:,\s*([^\]]*?))?\s*\]")


class FilterError(ValueError):
    pass


def _value(text: str | None) -> Any:
    if text is None or text == "":
        return None
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def parse(text: str | None) -> Spec:
    """Parse filter text into a spec (the empty tuple matches everything)."""
    if text is None or not text.strip():
        return ()
    preds: list[Pred] = []
    pos = 0
    s = text.strip()
    while pos < len(s):
        m = _PRED.match(s, pos)
        if not m:
            raise FilterError(f"bad filter {text!r} at offset {pos}: expected [attr,op,value]")
        op = "eq" if m.group(2) == "=" else m.group(2)
        preds.append((m.group(1), op, _value(m.group(3))))
        pos = m.end()
        while pos < len(s) and s[pos] in ", &":
            pos += 1
    return tuple(preds)


def _pred(p: Pred, attrs: dict[str, Any]) -> bool:
    a, op, v = p
    if a not in attrs:
        return False
    x = attrs[a]
    try:
        if op == "eq":
            return x == v
        if op == "ne":
            return x != v
        if op == "isPresent":
            return True
        if op == "<":
            return x < v
        if op == "<=":
            return x <= v
        if op == ">":
            return x > v
        if op == ">=":
            return x >= v
    except TypeError:
        return False
    return False


def matches(spec: Spec, attrs: dict[str, Any]) -> bool:
    return all(_pred(p, attrs) for p in spec)


class Summary:
    """The OR of a set of specs; ``everything`` if any spec is empty (or if unknown)."""

    __slots__ = ("everything", "_eq", "_other")

    def __init__(self, specs: Iterable[Spec] | None = None) -> None:
        self.everything = specs is None
        self._eq: dict[str, set[Any]] = {}  # single-predicate equality specs, indexed
        self._other: set[Spec] = set()
        for s in specs or ():
            self.add(s)

    def add(self, spec: Spec) -> None:
        if self.everything:
            return
        if not spec:
            self.everything = True
            self._eq.clear()
            self._other.clear()
        elif len(spec) == 1 and spec[0][1] == "eq":
            self._eq.setdefault(spec[0][0], set()).add(spec[0][2])
        else:
            self._other.add(spec)

    def update(self, other: "Summary") -> None:
        if other.everything:
            self.add(())
            return
        for a, vs in other._eq.items():
            for v in vs:
                self.add(((a, "eq", v),))
        for s in other._other:
            self.add(s)

    def matches(self, attrs: dict[str, Any]) -> bool:
        if self.everything:
            return True
        for a, vs in self._eq.items():
            if attrs.get(a, _MISSING) in vs:
                return True
        return any(matches(s, attrs) for s in self._other)

    def is_empty(self) -> bool:
        return not self.everything and not self._eq and not self._other

    # wire form: None = everything, else a list of specs (lists of [attr, op, value])
    def to_wire(self) -> list | None:
        if self.everything:
            return None
        out: list = [[[a, "eq", v]] for a, vs in self._eq.items() for v in vs]
        out.extend([list(p) for p in s] for s in self._other)
        return out

    @classmethod
    def from_wire(cls, w: list | None) -> "Summary":
        if w is None:
            return cls(None)
        return cls(tuple(tuple(p) for p in spec) for spec in w)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Summary) and self.everything == other.everything
                and self._eq == other._eq and self._other == other._other)


_MISSING = object()


class SubscriberIndex:
    """Local subscribers of one SHB, indexed on single equality predicates for fan-out."""

    def __init__(self) -> None:
        self._eq: dict[tuple[str, Any], list[str]] = {}
        self._scan: list[tuple[str, Spec]] = []
        self.specs: dict[str, Spec] = {}

    def add(self, client: str, spec: Spec) -> None:
        if client in self.specs:
            return
        self.specs[client] = spec
        if spec and spec[0][1] == "eq":
            self._eq.setdefault((spec[0][0], spec[0][2]), []).append(client)
        else:
            self._scan.append((client, spec))

    def __len__(self) -> int:
        return len(self.specs)

    def match(self, attrs: dict[str, Any]) -> list[str]:
        out: list[str] = []
        for a, v in attrs.items():
            try:
                cands = self._eq.get((a, v))
            except TypeError:  # unhashable value
                continue
            if cands:
                out.extend(c for c in cands if matches(self.specs[c], attrs))
        out.extend(c for c, s in self._scan if matches(s, attrs))
        return out

    def summary(self) -> Summary:
        return Summary(self.specs.values())
