"""``testbed compare A B``: what changed between two reproductions, claim by claim.

A and B are reproduction output directories (``reproductions/``: a ``<paper>/claims.json`` per
paper) or one paper's directory in one (``reproductions/<paper>``, ``docs/results/<paper>``:
a ``claims.json``). A is the reference ("before"), B the reproduction compared with it ("after").

Per paper reproduced on both sides and per figure reproduced on both sides (the claims
document's ``figures``: a ``--fig 7`` reproduction is not compared on the other figures), every
claim id found in either side is one row:

* ``flip``: the verdict differs (``pass`` -> ``fail``, ``insufficient`` -> ``pass``, ...);
* ``moved``: the verdict is the same but the measured value moved beyond its intervals: **A's and
  B's 95 % intervals of the mean over the seeds are disjoint** (:func:`moved`). The interval is
  the claim's own (``measured.ci``: the one its verdict used; a pure computation's is its value),
  else the Student-t interval from the claim's mean, spread and seeds (information, shape,
  construction claims); with one seed or no value there is none, and only the verdict is
  compared. Every seed equal (no spread) gives a zero-width interval: any change of it moves.
  Disjoint intervals, not "B's mean outside A's interval": the test is symmetric (which side is
  the reference does not matter) and flags seed noise far less often: with 3 normal seeds per
  side, 0.46 % of unchanged values against 9.4 % (``benchmarks/bench_compare_rule.py``).
  Overlapping intervals do not prove the value unchanged: a shift of 3 seed standard
  deviations is seen only 23 % of the time with 3 seeds.
* ``only A`` / ``only B``: the claim exists on one side only (a claim added, removed or renamed);
* ``same``: neither.

A claim whose paper or figure one side did not reproduce is listed as ``not compared``. The
result ``changed`` is true when any row is a flip, moved or only on one side: ``testbed compare``
exits 3 then, 0 otherwise (docs/cli.md). Bad input (a missing directory, one without claims, a
claims.json that is not JSON or lacks a claim's fields) is a :class:`~testbed.errors.UsageError`
naming the path.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.errors import UsageError
from testbed.experiments.claims import VERDICTS, claim_id, t_quantile

FLIP, MOVED, SAME, ONLY_A, ONLY_B, NOT_COMPARED = "flip", "moved", "same", "only A", "only B", "not compared"
STATUSES = (FLIP, MOVED, ONLY_A, ONLY_B, SAME, NOT_COMPARED)
CHANGES = (FLIP, MOVED, ONLY_A, ONLY_B)
RULE = ("moved = the verdict is the same and A's and B's 95% intervals of the mean over the seeds are "
        "disjoint (the claim's own interval, else the Student-t interval from its mean, spread and seeds)")


@dataclass(frozen=True)
class PaperClaims:
    """One paper's claims document, as read from ``path``."""

    paper: str
    path: Path
    figures: tuple[int, ...]
    scale: str | None
    stamp: dict[str, Any] | None
    claims: tuple[dict[str, Any], ...]


# ------------------------------------------------------------------------------ reading
def _fail(path: Path, what: str) -> UsageError:
    return UsageError(f"{path}: {what}")


def read_claims(path: Path, name_hint: str | None = None) -> PaperClaims:
    """One ``claims.json`` (the stamped document, or the bare list of claims written before stamps)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise _fail(path, f"not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _fail(path, f"cannot be read ({e})") from None
    result: dict[str, Any] = {}
    if isinstance(doc, list):  # written before stamps: the claims alone; result.json beside it has the rest
        try:
            result = json.loads((path.parent / "result.json").read_text())
        except (OSError, ValueError):
            result = {}
        if not isinstance(result, dict):
            result = {}
        doc = {"paper": result.get("paper"), "scale": result.get("scale"), "figures": result.get("figures"),
               "stamp": result.get("stamp"), "claims": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("claims"), list):
        raise _fail(path, "not a claims document (an object with a list 'claims', or a list of claims)")
    claims = []
    seen: set[str] = set()
    for i, c in enumerate(doc["claims"]):
        where = f"claim {i}"
        if not isinstance(c, dict):
            raise _fail(path, f"{where}: not an object")
        for key in ("figure", "verdict", "measured"):
            if key not in c:
                raise _fail(path, f"{where}: no {key!r}")
        if not isinstance(c["figure"], int) or isinstance(c["figure"], bool):
            raise _fail(path, f"{where}: 'figure' is not an integer: {c['figure']!r}")
        if c["verdict"] not in VERDICTS:
            raise _fail(path, f"{where}: unknown verdict {c['verdict']!r} (have: {', '.join(VERDICTS)})")
        if not isinstance(c["measured"], dict):
            raise _fail(path, f"{where}: 'measured' is not an object")
        cid = c.get("id") or (claim_id(c["figure"], c["sentence"]) if isinstance(c.get("sentence"), str) else None)
        if not cid:
            raise _fail(path, f"{where}: no 'id' and no 'sentence' to make one from")
        if cid in seen:
            raise _fail(path, f"{where}: claim id {cid!r} twice")
        seen.add(cid)
        claims.append({**c, "id": cid})
    figures = doc.get("figures") or sorted({c["figure"] for c in claims})
    if not all(isinstance(f, int) for f in figures):
        raise _fail(path, f"'figures' is not a list of integers: {figures!r}")
    paper = doc.get("paper") or name_hint or path.parent.name
    stamp = doc.get("stamp")
    return PaperClaims(str(paper), path, tuple(figures), doc.get("scale") or (stamp or {}).get("scale"),
                       stamp if isinstance(stamp, dict) else None, tuple(claims))


def load(path: str | Path) -> dict[str, PaperClaims]:
    """The papers of a reproduction directory (``<path>/<paper>/claims.json``) or of one paper's
    directory (``<path>/claims.json``), by paper name."""
    p = Path(path)
    if not p.exists():
        raise _fail(p, "no such directory (give a reproduction directory or a paper's directory in one)")
    if not p.is_dir():
        raise _fail(p, "not a directory (give a reproduction directory or a paper's directory in one)")
    if (p / "claims.json").is_file():
        one = read_claims(p / "claims.json", p.name)
        return {one.paper: one}
    out: dict[str, PaperClaims] = {}
    for f in sorted(p.glob("*/claims.json")):
        one = read_claims(f, f.parent.name)
        if one.paper in out:
            raise _fail(f, f"paper {one.paper!r} also in {out[one.paper].path}")
        out[one.paper] = one
    if not out:
        raise _fail(p, "no claims.json in it or in its subdirectories: not a reproduction directory "
                       "(made by `testbed reproduce`) nor a paper's directory in one")
    return out


# ------------------------------------------------------------------------------ comparing (pure)
def _num(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def interval(c: dict[str, Any]) -> tuple[float, float] | None:
    """The 95 % interval of a claim's measured mean (see the module docstring), or None."""
    m = c.get("measured") or {}
    ci = m.get("ci")
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        lo, hi = _num(ci[0]), _num(ci[1])
        if lo is None or hi is None or math.isinf(lo) or math.isinf(hi):
            return None  # one seed: an unbounded interval
        return lo, hi
    mean, spread, n = _num(m.get("mean")), _num(m.get("spread")), m.get("n")
    if mean is None or spread is None or not isinstance(n, int) or n < 2:
        return None
    h = t_quantile(n - 1) * spread / math.sqrt(n)
    return mean - h, mean + h


def moved(a: dict[str, Any], b: dict[str, Any]) -> tuple[bool | None, str]:
    """Whether the measured value moved beyond its intervals (A's and B's disjoint), and why
    (None: not comparable, with the reason)."""
    ia, ib = interval(a), interval(b)
    if ia is None or ib is None:
        side = " and ".join(s for s, i in (("A", ia), ("B", ib)) if i is None)
        return None, f"no interval in {side} (one seed, or no measured value)"
    wa = ((a.get("measured") or {}).get("detail") or {}).get("worst")
    wb = ((b.get("measured") or {}).get("detail") or {}).get("worst")
    if a.get("kind") == "comparison" and wa != wb:
        return None, f"the worst difference is a different pair ({wa} in A, {wb} in B)"
    if ia[1] < ib[0] or ib[1] < ia[0]:
        way = "up" if ib[0] > ia[1] else "down"
        return True, f"moved {way}: A [{ia[0]:.4g}, {ia[1]:.4g}], B [{ib[0]:.4g}, {ib[1]:.4g}] are disjoint"
    return False, "the intervals overlap"


@dataclass(frozen=True)
class Row:
    paper: str
    id: str
    figure: int
    status: str
    a: dict[str, Any] | None
    b: dict[str, Any] | None
    moved: bool | None = None
    why: str = ""

    @property
    def changed(self) -> bool:
        return self.status in CHANGES

    def to_dict(self) -> dict[str, Any]:
        def side(c: dict[str, Any] | None) -> dict[str, Any] | None:
            if c is None:
                return None
            m = c.get("measured") or {}
            return {"verdict": c["verdict"], "kind": c.get("kind"), "mean": _num(m.get("mean")),
                    "interval": list(interval(c) or ()) or None, "n": m.get("n")}

        c = self.a or self.b or {}
        return {"paper": self.paper, "id": self.id, "figure": self.figure, "sentence": c.get("sentence"),
                "status": self.status, "changed": self.changed, "moved": self.moved, "why": self.why,
                "a": side(self.a), "b": side(self.b)}


@dataclass
class Comparison:
    a_path: str
    b_path: str
    a: dict[str, PaperClaims]
    b: dict[str, PaperClaims]
    rows: list[Row] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(r.changed for r in self.rows)

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for r in self.rows:
            out[r.status] += 1
        out["compared"] = sum(out[s] for s in STATUSES if s != NOT_COMPARED)
        return out

    def stamp_differences(self) -> dict[str, list[str]]:
        """Per paper on both sides: what the stamps say differs (scale, code, commit, machine, ...)."""
        out = {}
        for name in sorted(set(self.a) & set(self.b)):
            out[name] = stamp_differences(self.a[name].stamp, self.b[name].stamp,
                                          self.a[name].scale, self.b[name].scale)
        return out


def stamp_differences(sa: dict[str, Any] | None, sb: dict[str, Any] | None, scale_a: str | None = None,
                      scale_b: str | None = None) -> list[str]:
    """What differs between two stamps, in words (an unstamped side: said so)."""
    diffs = []
    if (scale_a or (sa or {}).get("scale")) != (scale_b or (sb or {}).get("scale")):
        diffs.append(f"scale ({scale_a or (sa or {}).get('scale')} vs {scale_b or (sb or {}).get('scale')})")
    if not sa or not sb:
        return diffs + ["no stamp in " + " and ".join(s for s, x in (("A", sa), ("B", sb)) if not x)]
    for key, what in (("code_version", "code version"), ("code_version_analysis", "analysis code version"),
                      ("provider", "provider")):
        if sa.get(key) != sb.get(key):
            diffs.append(f"{what} ({sa.get(key)} vs {sb.get(key)})")
    ga, gb = (sa.get("git") or {}).get("commit"), (sb.get("git") or {}).get("commit")
    if ga != gb:
        diffs.append(f"git commit ({(ga or '-')[:12]} vs {(gb or '-')[:12]})")
    ma, mb = sa.get("machine") or {}, sb.get("machine") or {}
    for key in ("cores", "memory_gib", "cpu", "os", "python", "java", "spark"):
        if ma.get(key) != mb.get(key):
            diffs.append(f"machine {key} ({ma.get(key)} vs {mb.get(key)})")
    return diffs


def compare_papers(a: dict[str, PaperClaims], b: dict[str, PaperClaims], *, a_path: str = "A",
                   b_path: str = "B") -> Comparison:
    """Every claim of either side, as a :class:`Row` (pure: no file is read)."""
    if not set(a) & set(b):
        raise UsageError(f"nothing to compare: {a_path} has {', '.join(sorted(a))}, {b_path} has "
                         f"{', '.join(sorted(b))} (no paper in common)")
    cmp = Comparison(a_path, b_path, a, b)
    for name in sorted(set(a) | set(b)):
        pa, pb = a.get(name), b.get(name)
        ca = {c["id"]: c for c in (pa.claims if pa else ())}
        cb = {c["id"]: c for c in (pb.claims if pb else ())}
        both_figs = set(pa.figures if pa else ()) & set(pb.figures if pb else ())
        order = list(ca) + [i for i in cb if i not in ca]
        for cid in order:
            x, y = ca.get(cid), cb.get(cid)
            fig = (x or y)["figure"]
            if pa is None or pb is None:
                cmp.rows.append(Row(name, cid, fig, NOT_COMPARED, x, y,
                                    why=f"paper reproduced only in {'A' if pb is None else 'B'}"))
            elif fig not in both_figs:
                one = "A" if fig in pa.figures else "B" if fig in pb.figures else "neither"
                cmp.rows.append(Row(name, cid, fig, NOT_COMPARED, x, y,
                                    why=f"figure {fig} reproduced only in {one}"))
            elif x is None or y is None:
                cmp.rows.append(Row(name, cid, fig, ONLY_B if x is None else ONLY_A, x, y,
                                    why=f"the claim is only in {'B' if x is None else 'A'}"))
            else:
                mv, why = moved(x, y)
                if x["verdict"] != y["verdict"]:
                    status = FLIP
                    why = f"{x['verdict']} -> {y['verdict']}" + (f"; {why}" if mv else "")
                else:
                    status = MOVED if mv else SAME
                cmp.rows.append(Row(name, cid, fig, status, x, y, mv, why))
    cmp.rows.sort(key=lambda r: (r.paper, r.figure))  # stable: each side's own order within a figure
    return cmp


def side(path: str | Path, papers: list[str] | None = None) -> dict[str, PaperClaims]:
    """One side read (:func:`load`), only ``papers`` if given (an error when it has none of them)."""
    have = load(path)
    if papers is None:
        return have
    have = {k: v for k, v in have.items() if k in papers}
    if not have:
        raise UsageError(f"{path}: no claims of {', '.join(papers)} in it")
    return have


def compare(a_path: str | Path, b_path: str | Path, papers: list[str] | None = None) -> Comparison:
    """Read both sides (errors name the path) and compare them; ``papers``: only these."""
    return compare_papers(side(a_path, papers), side(b_path, papers), a_path=str(a_path), b_path=str(b_path))


# ------------------------------------------------------------------------------ presenting
def _measured(c: dict[str, Any] | None) -> str:
    if c is None:
        return "-"
    m = c.get("measured") or {}
    mean = _num(m.get("mean"))
    if mean is None or not m.get("n"):
        return "-"
    iv = interval(c)
    s = f"{mean:.4g}"
    if iv is not None:
        s += f" [{iv[0]:.4g}, {iv[1]:.4g}]"
    return s + f" n={m.get('n')}"


def table(cmp: Comparison, *, changed_only: bool = False) -> str:
    """The comparison as text: both sides' stamps, what differs between them, one row per claim,
    and the counts."""
    from testbed.experiments.stamp import stamp_line

    L = []
    for label, side, path in (("A", cmp.a, cmp.a_path), ("B", cmp.b, cmp.b_path)):
        L.append(f"{label}: {path}")
        for name, pc in sorted(side.items()):
            L.append(f"   {name}: {stamp_line(pc.stamp)}")
    for name, diffs in cmp.stamp_differences().items():
        L.append(f"{name}: A and B differ in: {'; '.join(diffs)}" if diffs
                 else f"{name}: the stamps agree (scale, code, commit, machine, provider)")
    rows = [r for r in cmp.rows if r.changed] if changed_only else cmp.rows
    head = ("paper", "claim", "A", "A measured", "B", "B measured", "change")
    cells = [head] + [(r.paper, r.id, r.a["verdict"] if r.a else "-", _measured(r.a), r.b["verdict"] if r.b else "-",
                       _measured(r.b), r.status.upper() + (f": {r.why}" if r.why and r.status != SAME else ""))
                      for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head) - 1)]
    L.append("")
    for c in cells:
        L.append("  ".join(x.ljust(w) for x, w in zip(c, widths)) + "  " + c[-1])
    n = cmp.counts()
    L += ["", f"{n['compared']} claims compared: {n[SAME]} same, {n[FLIP]} flipped, {n[MOVED]} moved, "
              f"{n[ONLY_A]} only in A, {n[ONLY_B]} only in B; {n[NOT_COMPARED]} not compared (paper or figure "
              f"reproduced on one side only). {RULE}.",
          "changed" if cmp.changed else "no change"]
    return "\n".join(L)


def document(cmp: Comparison) -> dict[str, Any]:
    """``testbed compare --json`` (docs/cli.md)."""
    def side(path: str, papers: dict[str, PaperClaims]) -> dict[str, Any]:
        return {"path": path, "papers": {k: {"claims": str(v.path), "scale": v.scale, "figures": list(v.figures),
                                             "stamp": v.stamp} for k, v in sorted(papers.items())}}

    return {"command": "compare", "ok": not cmp.changed, "changed": cmp.changed, "rule": RULE,
            "a": side(cmp.a_path, cmp.a), "b": side(cmp.b_path, cmp.b), "counts": cmp.counts(),
            "stamp_differences": cmp.stamp_differences(), "claims": [r.to_dict() for r in cmp.rows]}


__all__ = ["CHANGES", "Comparison", "PaperClaims", "Row", "compare", "compare_papers", "document", "interval",
           "load", "moved", "read_claims", "side", "stamp_differences", "table"]
