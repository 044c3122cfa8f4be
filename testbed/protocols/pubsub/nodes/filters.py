"""Content-based filters (PADRES language): conjunctions of attribute-operator-value predicates.

Text form::

    [class,eq,'STOCK'],[price,>,50]

A filter is a comma-separated list of bracketed predicates ``[attr,op,value]``;
the empty text (or only whitespace) is the empty filter, which every publication
matches. A publication is a flat map ``{attr: value}`` whose values are
strings or numbers (``int``/``float``; ``bool`` and anything else is neither
and matches no predicate).

Attributes: ``[A-Za-z_][A-Za-z0-9_.-]*``.

Values: a quoted string (``'...'`` or ``"..."``, backslash escapes the quote
and itself) or a number (``50``, ``-3``, ``2.5``, ``1e3``; finite only).
Unquoted words are an error, so ``'50'`` (a string) and ``50`` (a number) are
never confused.

Operators and their exact meaning, for a predicate ``[a, op, v]`` and a
publication value ``x = pub[a]``. Every predicate is *typed* by ``v``: it can
only match when ``a`` is present and ``x`` has the same type as ``v`` (both
strings, or both numbers; ints and floats compare numerically, ``1 == 1.0``):

    eq, =          x == v
    neq, !=        x != v            (x of v's type; a string never "neq" a number)
    <, <=, >, >=   numeric order for numbers; lexicographic order of Python
                   ``str`` (code points) for strings
    isPresent      a is present with a value of v's type (the value itself is
                   ignored: ``[price,isPresent,0]`` = any number,
                   ``[sym,isPresent,'']`` = any string)
    str-prefix     x.startswith(v); v must be a string

Several predicates on the same attribute are a conjunction. Predicates of
different types on one attribute make the filter unsatisfiable (it matches
nothing and intersects nothing; every filter covers it).

Relations (exact, over all possible publications):

* ``matches(f, attrs)``: the publication satisfies every predicate of ``f``.
* ``intersects(f, g)``: some publication matches both ``f`` and ``g``. Used to
  match subscriptions with advertisements. (This is the semantic overlap; the
  "one attribute overlaps" reading of Jergler's Def. 2.1 over-approximates it.)
* ``covers(f, g)``: every publication that matches ``g`` matches ``f``
  (Jergler's subsumption sigma(f, g)).

Numbers are treated as a dense domain (the reals): ``[x,>,1],[x,<,2]`` is
satisfiable even if publishers only ever send integers. This keeps
``intersects`` safe (at worst it over-approximates for integer-only data) and
``covers`` exact. Strings are handled exactly (the set of strings is discrete:
the successor of ``s`` is ``s + '\\0'``).

Implementation: each attribute's predicates are compiled into a canonical
finite union of disjoint, non-adjacent intervals of one type; intersection,
emptiness and inclusion are computed on those.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

OPS = ("eq", "=", "neq", "!=", "<", "<=", ">", ">=", "isPresent", "str-prefix")
CANON_OP = {"=": "eq", "!=": "neq"}  # operator spellings -> their canonical name
NUM = "num"
STR = "str"
_MAXCHAR = chr(0x10FFFF)
_INF = math.inf


class FilterError(ValueError):
    """A filter text is invalid. ``str()`` is one line naming the column."""

    def __init__(self, text: str, pos: int, message: str):
        self.text = text
        self.pos = pos
        super().__init__(f"filter {text!r}: col {pos + 1}: {message}")


def value_type(x: Any) -> str | None:
    """``"num"`` for int/float (not bool), ``"str"`` for str, else None."""
    t = type(x)
    if t is str:
        return STR
    if t is int or t is float:
        return NUM
    return None


# ---------------------------------------------------------------------------- intervals
# An interval is (lo, lo_closed, hi, hi_closed). Numbers: lo/hi may be -inf/+inf
# (then open). Strings are normalised to [lo, hi) (lo closed, hi open), hi None = no
# upper bound, because in the discrete string order "x > s" is "x >= s + '\0'" and
# "x <= s" is "x < s + '\0'"; with that, a string interval is empty iff lo >= hi,
# exactly as for a real interval with the same bound flags.

Interval = tuple[Any, bool, Any, bool]


def _str_succ(s: str) -> str:
    return s + "\0"


def _prefix_upper(p: str) -> str | None:
    """The least string greater than every string with prefix p (None = none)."""
    p = p.rstrip(_MAXCHAR)
    if not p:
        return None
    return p[:-1] + chr(ord(p[-1]) + 1)


def _empty(iv: Interval, ty: str) -> bool:
    lo, lc, hi, hc = iv
    if ty == STR:
        return hi is not None and lo >= hi
    if lo > hi:
        return True
    return lo == hi and not (lc and hc)


def _intersect_iv(a: Interval, b: Interval, ty: str) -> Interval | None:
    # lower bound: the larger; on a tie the open one (stricter)
    if a[0] > b[0]:
        lo, lc = a[0], a[1]
    elif b[0] > a[0]:
        lo, lc = b[0], b[1]
    else:
        lo, lc = a[0], a[1] and b[1]
    if ty == STR:
        if a[2] is None:
            hi, hc = b[2], b[3]
        elif b[2] is None or a[2] < b[2]:
            hi, hc = a[2], a[3]
        else:
            hi, hc = b[2], b[3]
    elif a[2] < b[2]:
        hi, hc = a[2], a[3]
    elif b[2] < a[2]:
        hi, hc = b[2], b[3]
    else:
        hi, hc = a[2], a[3] and b[3]
    iv = (lo, lc, hi, hc)
    return None if _empty(iv, ty) else iv


def _intersect_sets(a: tuple[Interval, ...], b: tuple[Interval, ...], ty: str) -> tuple[Interval, ...]:
    out = []
    for x in a:
        for y in b:
            z = _intersect_iv(x, y, ty)
            if z is not None:
                out.append(z)
    return _canon(out, ty)


def _hi_lt(a: Any, b: Any, ty: str) -> bool:
    """Upper bound value a < b (None = +inf for strings)."""
    if ty == STR:
        if a is None:
            return False
        return b is None or a < b
    return a < b


def _canon(ivs: list[Interval], ty: str) -> tuple[Interval, ...]:
    """Sort, drop empties, merge overlapping/adjacent intervals."""
    ivs = [iv for iv in ivs if not _empty(iv, ty)]
    ivs.sort(key=lambda iv: (iv[0], not iv[1]))
    out: list[Interval] = []
    for iv in ivs:
        if out:
            lo, lc, hi, hc = out[-1]
            # iv starts at or after lo; touches/overlaps if iv.lo < hi, or == hi and one closed
            if ty == STR:
                touches = hi is None or iv[0] <= hi
            else:
                touches = iv[0] < hi or (iv[0] == hi and (hc or iv[1]))
            if touches:
                if _hi_lt(hi, iv[2], ty):
                    out[-1] = (lo, lc, iv[2], iv[3])
                elif ty != STR and hi == iv[2]:
                    out[-1] = (lo, lc, hi, hc or iv[3])
                continue
        out.append(iv)
    return tuple(out)


def _iv_within(a: Interval, b: Interval, ty: str) -> bool:
    """a is a subset of b (both non-empty)."""
    if a[0] < b[0] or (a[0] == b[0] and a[1] and not b[1]):
        return False
    if ty == STR:
        if b[2] is None:
            return True
        return a[2] is not None and a[2] <= b[2]
    return a[2] < b[2] or (a[2] == b[2] and (b[3] or not a[3]))


def _subset(a: tuple[Interval, ...], b: tuple[Interval, ...], ty: str) -> bool:
    # both canonical (disjoint, non-adjacent): each piece of a must lie in one piece of b
    return all(any(_iv_within(x, y, ty) for y in b) for x in a)


def _universe(ty: str) -> tuple[Interval, ...]:
    return ((-_INF, False, _INF, False),) if ty == NUM else (("", True, None, False),)


def _pred_set(op: str, v: Any, ty: str) -> tuple[Interval, ...]:
    if ty == NUM:
        if op == "eq":
            return ((v, True, v, True),)
        if op == "neq":
            return ((-_INF, False, v, False), (v, False, _INF, False))
        if op == "<":
            return ((-_INF, False, v, False),)
        if op == "<=":
            return ((-_INF, False, v, True),)
        if op == ">":
            return ((v, False, _INF, False),)
        if op == ">=":
            return ((v, True, _INF, False),)
        return _universe(NUM)  # isPresent
    if op == "eq":
        return ((v, True, _str_succ(v), False),)
    if op == "neq":
        return _canon([("", True, v, False), (_str_succ(v), True, None, False)], STR)
    if op == "<":
        return (("", True, v, False),)
    if op == "<=":
        return (("", True, _str_succ(v), False),)
    if op == ">":
        return ((_str_succ(v), True, None, False),)
    if op == ">=":
        return ((v, True, None, False),)
    if op == "str-prefix":
        return ((v, True, _prefix_upper(v), False),)
    return _universe(STR)  # isPresent


# ---------------------------------------------------------------------------- values
@dataclass(frozen=True)
class Pred:
    attr: str
    op: str  # canonical: eq neq < <= > >= isPresent str-prefix
    value: Any  # str | int | float

    def text(self) -> str:
        v = self.value
        if isinstance(v, str):
            vt = "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        else:
            vt = repr(v)
        return f"[{self.attr},{self.op},{vt}]"

    def sort_key(self) -> tuple:
        return (self.attr, self.op, value_type(self.value) or "", str(self.value))


@dataclass(frozen=True, eq=False)
class Filter:
    """An immutable, hashable conjunction of predicates (canonical order, no duplicates).

    Equality is syntactic on the canonical predicate set; ``covers`` both ways is the
    semantic equivalence.
    """

    preds: tuple[Pred, ...]
    # attr -> (type, canonical interval set); None if the filter is unsatisfiable
    space: dict[str, tuple[str, tuple[Interval, ...]]] | None = field(compare=False, repr=False)
    _hash: int = field(compare=False, repr=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Filter) and self.preds == other.preds

    def __hash__(self) -> int:
        return self._hash

    @property
    def text(self) -> str:
        return ",".join(p.text() for p in self.preds)

    def __str__(self) -> str:
        return self.text

    @property
    def satisfiable(self) -> bool:
        return self.space is not None

    def attrs(self) -> frozenset[str]:
        return frozenset(p.attr for p in self.preds)


def make(preds: list[Pred] | tuple[Pred, ...]) -> Filter:
    """Build a Filter from predicates (canonicalised)."""
    uniq = sorted(set(preds), key=Pred.sort_key)
    space: dict[str, tuple[str, tuple[Interval, ...]]] | None = {}
    for p in uniq:
        ty = value_type(p.value)
        assert ty is not None and p.op in OPS
        s = _canon(list(_pred_set(p.op, p.value, ty)), ty)
        old = space.get(p.attr)  # type: ignore[union-attr]
        if old is not None:
            if old[0] != ty:
                space = None
                break
            s = _intersect_sets(old[1], s, ty)
        if not s:
            space = None
            break
        space[p.attr] = (ty, s)  # type: ignore[index]
    t = tuple(uniq)
    return Filter(t, space, hash(t))


def topic(n: Any, attr: str = "topic") -> Filter:
    """The topic-based filter ``[topic,eq,n]`` (topic mode of the ENS)."""
    return make([Pred(attr, "eq", n)])


# ---------------------------------------------------------------------------- parsing
_ATTR = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_NUM = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_OP = re.compile(r"isPresent|str-prefix|neq|eq|<=|>=|!=|<|>|=")


def parse(text: str) -> Filter:
    """Parse the text form. Raises FilterError (one line, with the column) on bad input."""
    if not isinstance(text, str):
        raise FilterError(str(text), 0, "filter must be a string")
    preds: list[Pred] = []
    i, n = 0, len(text)

    def ws(j: int) -> int:
        while j < n and text[j].isspace():
            j += 1
        return j

    def expect(j: int, ch: str) -> int:
        j = ws(j)
        if j >= n or text[j] != ch:
            got = repr(text[j]) if j < n else "end of text"
            raise FilterError(text, j, f"expected {ch!r}, got {got}")
        return j + 1

    i = ws(i)
    if i == n:
        return make([])
    while True:
        i = expect(i, "[")
        i = ws(i)
        m = _ATTR.match(text, i)
        if not m:
            raise FilterError(text, i, "expected an attribute name")
        attr = m.group()
        i = expect(m.end(), ",")
        i = ws(i)
        m = _OP.match(text, i)
        if not m or (m.end() < n and (text[m.end()].isalnum() or text[m.end()] in "_-")
                     and m.group()[-1].isalpha()):
            raise FilterError(text, i, f"unknown operator (one of {', '.join(OPS)})")
        op = CANON_OP.get(m.group(), m.group())
        i = expect(m.end(), ",")
        i = ws(i)
        vpos = i
        if i < n and text[i] in "'\"":
            q = text[i]
            j = i + 1
            buf = []
            while True:
                if j >= n:
                    raise FilterError(text, i, "unterminated string")
                c = text[j]
                if c == "\\" and j + 1 < n:
                    buf.append(text[j + 1])
                    j += 2
                    continue
                if c == q:
                    break
                buf.append(c)
                j += 1
            value: Any = "".join(buf)
            i = j + 1
        else:
            m = _NUM.match(text, i)
            if not m:
                raise FilterError(text, i, "expected a quoted string or a number")
            s = m.group()
            value = int(s) if re.fullmatch(r"[+-]?\d+", s) else float(s)
            if isinstance(value, float) and not math.isfinite(value):
                raise FilterError(text, i, "number must be finite")
            i = m.end()
        if op == "str-prefix" and not isinstance(value, str):
            raise FilterError(text, vpos, "str-prefix needs a string value")
        preds.append(Pred(attr, op, value))
        i = expect(i, "]")
        i = ws(i)
        if i == n:
            break
        i = expect(i, ",")
    return make(preds)


_PARSE_CACHE: dict[str, Filter] = {}


def parse_cached(text: str) -> Filter:
    """parse() with a process-wide cache (filters arrive as text on the wire)."""
    f = _PARSE_CACHE.get(text)
    if f is None:
        f = parse(text)
        if len(_PARSE_CACHE) > 100_000:
            _PARSE_CACHE.clear()
        _PARSE_CACHE[text] = f
    return f


# ---------------------------------------------------------------------------- relations
def _pred_match(p: Pred, x: Any) -> bool:
    v = p.value
    if value_type(x) != value_type(v):
        return False
    op = p.op
    if op == "eq":
        return x == v
    if op == "neq":
        return x != v
    if op == "<":
        return x < v
    if op == "<=":
        return x <= v
    if op == ">":
        return x > v
    if op == ">=":
        return x >= v
    if op == "isPresent":
        return True
    return x.startswith(v)  # str-prefix


def matches(f: Filter, attrs: Mapping[str, Any]) -> bool:
    """Does the publication ``attrs`` satisfy every predicate of ``f``?"""
    for p in f.preds:
        if p.attr not in attrs or not _pred_match(p, attrs[p.attr]):
            return False
    return True


def intersects(f: Filter, g: Filter) -> bool:
    """Could some publication match both f and g?"""
    fs, gs = f.space, g.space
    if fs is None or gs is None:
        return False
    if len(gs) < len(fs):
        fs, gs = gs, fs
    for a, (ty, s) in fs.items():
        o = gs.get(a)
        if o is None:
            continue
        if o[0] != ty or not _intersect_sets(s, o[1], ty):
            return False
    return True


def covers(f: Filter, g: Filter) -> bool:
    """Does every publication matching g match f?"""
    gs = g.space
    if gs is None:
        return True
    fs = f.space
    if fs is None:
        return False
    for a, (ty, s) in fs.items():
        o = gs.get(a)
        if o is None or o[0] != ty or not _subset(o[1], s, ty):
            return False
    return True
