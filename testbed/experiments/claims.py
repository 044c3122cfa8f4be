"""Claims as data: the paper's sentence, what we measured, how it is judged, and the verdict.

The rules (docs/experiments.md, "Claims"): a claim is one sentence of the paper, once (its ``id``
is unique in a reproduction); a judged claim must be able to fail (each has a unit test feeding it
data where the paper's statement is false); a claim the plan alone decides is ``by construction``,
never counted as reproduced; ``information`` is for absolute numbers only (it carries the unit).

Five kinds (``Claim.kind``):

* ``value``       the paper states a number we can reproduce (a timestamp size, a ratio, a nack
                  range): the 95 % Student-t confidence interval of the mean over the seeds
                  (:func:`t_interval`) must lie inside the tolerance band; it fails when the interval
                  lies wholly outside the band and is ``insufficient`` when it straddles an edge (or
                  with one seed). A pure computation (``exact=True``: no seed noise) is judged on its
                  value.
* ``shape``       a qualitative statement judged on every seed's data (``servers 1 and 2 forward
                  nothing``, ``no nacks while p1 is down``): it holds only if it holds on every seed.
* ``comparison``  one series against another, or a series that "rises": judged on >= MIN_SEEDS
                  seeds per side, and the difference of the means must exceed the seeds' spread
                  (``spread(a) + spread(b)``, the sample standard deviations), not merely be > 0.
                  Fewer seeds: verdict ``insufficient``, never a pass.
* ``information`` the paper states an absolute number the reproduction cannot control (a latency
                  in ms, a rate in tx/s, a CPU share set by the paper's hardware): reported with
                  its unit and reason, verdict ``info``, never a pass. A dimensionless ratio is
                  never information (:data:`DIMENSIONLESS`): it is judged.
* ``construction`` the plan alone decides it (a configured value, a structural invariant of our
                  implementation, a configured link delay): reported with the parameter or
                  invariant that decides it (and the predictor's value where one exists), verdict
                  ``by construction``, never counted as reproduced.

Every tolerance is a :class:`Tolerance` with its reason, declared once per paper module.
:func:`summary` gives the counts the report's head shows: judged, pass, fail, insufficient,
no data, by construction, information and ``reproduced`` = passes of judged claims / judged.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

MIN_SEEDS = 3

PASS, FAIL, INFO, INSUFFICIENT, NO_DATA = "pass", "fail", "info", "insufficient", "no data"
BY_CONSTRUCTION = "by construction"
VERDICTS = (PASS, FAIL, INFO, INSUFFICIENT, NO_DATA, BY_CONSTRUCTION)
KINDS = ("value", "shape", "comparison", "information", "construction")
JUDGED_KINDS = ("value", "shape", "comparison")

CI_LEVEL = 0.95
CI_METHOD = "95% Student-t interval of the mean over the seeds"
# two-sided 95 % quantiles of Student's t, by degrees of freedom (1..30); beyond, the Cornish-Fisher
# expansion around the normal quantile (error < 0.001 for df > 30)
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)
_Z95 = 1.959964

# units that make a number dimensionless: a ratio or relative change the paper states is judged
DIMENSIONLESS = ("", "x", "ratio", "%change", "relative", "fraction")


def _clean(xs: Iterable[Any]) -> list[float]:
    out = []
    for x in xs:
        if x is None:
            continue
        x = float(x)
        if not math.isnan(x):
            out.append(x)
    return out


def mean(xs: Sequence[float]) -> float:
    xs = _clean(xs)
    return statistics.fmean(xs) if xs else math.nan


def spread(xs: Sequence[float]) -> float:
    """The seeds' spread: the sample standard deviation (0 for one seed, nan for none)."""
    xs = _clean(xs)
    if not xs:
        return math.nan
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def t_quantile(df: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        return math.inf
    if df <= len(_T95):
        return _T95[df - 1]
    z = _Z95
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def t_interval(xs: Sequence[Any]) -> tuple[float, float]:
    """The 95 % Student-t confidence interval of the mean of ``xs`` (nan, nan for none; -inf, inf
    for one sample: one seed says nothing about the seeds' spread)."""
    v = _clean(xs)
    if not v:
        return math.nan, math.nan
    if len(v) == 1:
        return -math.inf, math.inf
    m, h = statistics.fmean(v), t_quantile(len(v) - 1) * statistics.stdev(v) / math.sqrt(len(v))
    return m - h, m + h


@dataclass(frozen=True)
class Measured:
    mean: float
    spread: float
    n: int
    detail: dict[str, Any] = field(default_factory=dict)  # e.g. per-point means, per-seed values
    ci: tuple[float, float] | None = None  # the interval the verdict used (value claims; comparisons)
    ci_method: str = ""

    @classmethod
    def of(cls, samples: Sequence[Any], **detail: Any) -> "Measured":
        xs = _clean(samples)
        return cls(mean(xs), spread(xs), len(xs), detail)

    def text(self, nd: int = 2) -> str:
        if self.n == 0 or math.isnan(self.mean):
            return "-"
        s = f"{self.mean:.{nd}f}"
        if self.ci is not None and not any(math.isnan(x) for x in self.ci):
            s += f" [{self.ci[0]:.{nd}f}, {self.ci[1]:.{nd}f}]"
        elif self.n > 1:
            s += f" ± {self.spread:.{nd}f}"
        return s + f" (n={self.n})"


@dataclass(frozen=True)
class Tolerance:
    """How far from the paper's value a measurement may be, and why that far.

    ``rel``: relative to the paper's value; ``low``/``high``: absolute bounds (either may be None).
    """

    reason: str
    rel: float | None = None
    low: float | None = None
    high: float | None = None

    def band(self, paper: float | None) -> tuple[float, float]:
        """The accepted interval [lo, hi] (the intersection of every bound given)."""
        lo, hi = -math.inf, math.inf
        if self.rel is not None and paper is not None:
            lo, hi = paper - self.rel * abs(paper), paper + self.rel * abs(paper)
        if self.low is not None:
            lo = max(lo, self.low)
        if self.high is not None:
            hi = min(hi, self.high)
        return lo, hi

    def judge(self, ci: tuple[float, float], paper: float | None) -> str:
        """PASS when the interval lies inside the band, FAIL when wholly outside, else INSUFFICIENT."""
        lo, hi = self.band(paper)
        a, b = ci
        if math.isnan(a) or math.isnan(b):
            return NO_DATA
        if lo <= a and b <= hi:
            return PASS
        if b < lo or a > hi:
            return FAIL
        return INSUFFICIENT

    def accepts(self, value: float, paper: float | None) -> bool:
        if value is None or math.isnan(value):
            return False
        if self.rel is not None and paper is not None:
            if abs(value - paper) > self.rel * abs(paper):
                return False
        if self.low is not None and value < self.low:
            return False
        if self.high is not None and value > self.high:
            return False
        return True

    def text(self) -> str:
        parts = []
        if self.rel is not None:
            parts.append(f"within {self.rel * 100:g}% of the paper")
        if self.low is not None and self.high is not None:
            parts.append(f"in [{self.low:g}, {self.high:g}]")
        elif self.low is not None:
            parts.append(f">= {self.low:g}")
        elif self.high is not None:
            parts.append(f"<= {self.high:g}")
        return ", ".join(parts) or "-"


@dataclass(frozen=True)
class Claim:
    figure: int
    sentence: str  # the paper's words (EXPERIMENTS.md)
    kind: str  # value | shape | comparison | information
    verdict: str
    measured: Measured
    paper_value: Any = None  # a number, or a short text where the paper states one
    tolerance: str = "-"
    reason: str = ""  # why that tolerance / why information only / what decides it by construction
    judged: str = ""  # what exactly was judged, in words
    id: str = ""  # unique in a reproduction (explanations attach to it); default fig<N>:<sentence slug>
    unit: str = ""  # information claims: the absolute unit (ms, tx/s, % CPU)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown claim kind {self.kind!r}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}")
        if self.kind == "information" and self.verdict != INFO:
            raise ValueError("an information claim is never judged")
        if (self.kind == "construction") != (self.verdict == BY_CONSTRUCTION):
            raise ValueError("a claim is `by construction` exactly when its kind is `construction`")
        if self.kind == "construction" and not self.reason:
            raise ValueError(f"fig {self.figure} {self.sentence!r}: by construction needs the parameter or "
                             "invariant that decides it")
        if not self.id:
            object.__setattr__(self, "id", claim_id(self.figure, self.sentence))

    @property
    def is_judged(self) -> bool:
        return self.kind in JUDGED_KINDS

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["measured"] = {k: _json(v) for k, v in d["measured"].items()}
        return _json(d)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Claim":
        m = d["measured"]
        ci = tuple(_num(x) for x in m["ci"]) if m.get("ci") else None
        meas = Measured(_num(m["mean"]), _num(m["spread"]), m["n"], m.get("detail") or {}, ci,
                        m.get("ci_method") or "")
        fields_ = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**{**fields_, "measured": meas})


def claim_id(figure: int, sentence: str) -> str:
    """``fig<N>:<the sentence's words, lower case, joined by ->``; a slug longer than 60 characters
    is cut to 48 and ends with 8 hex digits of the sentence's sha1 (two sentences that differ only
    at the end, e.g. "(shape 0.901)" / "(shape 0.349)", keep distinct ids)."""
    import hashlib

    slug = "-".join("".join(ch if ch.isalnum() else " " for ch in sentence.lower()).split())
    if len(slug) > 60:
        slug = f"{slug[:48].rstrip('-')}-{hashlib.sha1(sentence.encode()).hexdigest()[:8]}"
    return f"fig{figure}:{slug}"


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def _json(x: Any) -> Any:
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else round(x, 4)
    if isinstance(x, dict):
        return {str(k): _json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json(v) for v in x]
    return x


# ------------------------------------------------------------------------------ constructors
def value(figure: int, sentence: str, samples: Sequence[Any], paper_value: float | None,
          tol: Tolerance, *, exact: bool = False, cid: str = "", **detail: Any) -> Claim:
    """The confidence interval of the mean over the seeds (:data:`CI_METHOD`) against ``tol``'s band
    around ``paper_value``: inside = pass, wholly outside = fail, across an edge = insufficient.
    ``exact``: a pure computation with no seed noise (every sample the same value), judged on it."""
    xs = _clean(samples)
    m = Measured.of(xs, **detail)
    if exact:
        if xs and max(xs) - min(xs) > 1e-9 * max(1.0, abs(m.mean)):
            raise ValueError(f"fig {figure} {sentence!r}: exact=True but the samples differ: {xs}")
        ci, method = (m.mean, m.mean), "exact: a pure computation, no seed noise"
    else:
        ci, method = t_interval(xs), CI_METHOD
    m = Measured(m.mean, m.spread, m.n, m.detail, ci if xs else None, method)
    verdict = NO_DATA if m.n == 0 else tol.judge(ci, paper_value)
    return Claim(figure, sentence, "value", verdict, m, paper_value, tol.text(), tol.reason,
                 f"{method} inside the tolerance band (pass), wholly outside (fail), across an edge "
                 "(insufficient)", id=cid)


def shape(figure: int, sentence: str, holds: Sequence[bool | None], *, judged: str,
          samples: Sequence[Any] = (), paper_value: Any = None, tol: Tolerance | None = None,
          cid: str = "", **detail: Any) -> Claim:
    """Holds iff it holds on every seed (``holds``: one bool per seed; None = no data)."""
    per_seed = [h for h in holds if h is not None]
    m = Measured.of(samples, holds_per_seed=[bool(h) for h in per_seed], **detail)
    if not per_seed:
        verdict = NO_DATA
    else:
        verdict = PASS if all(per_seed) else FAIL
    return Claim(figure, sentence, "shape", verdict, m, paper_value, tol.text() if tol else "-",
                 tol.reason if tol else "", judged + " (on every seed)", id=cid)


@dataclass(frozen=True)
class Difference:
    """One judged comparison: ``a`` vs ``b`` with relation ``rel`` ('<' or '>')."""

    label: str
    a: tuple[float, ...]
    b: tuple[float, ...]
    rel: str
    exempt: bool = False  # e.g. both at an extreme where the paper's statement is about equality

    @property
    def diff(self) -> float:
        return mean(self.a) - mean(self.b)

    @property
    def margin(self) -> float:
        return spread(self.a) + spread(self.b)

    def verdict(self) -> str:
        if self.exempt:
            return PASS
        a, b = _clean(self.a), _clean(self.b)
        if not a or not b:
            return NO_DATA
        if len(a) < MIN_SEEDS or len(b) < MIN_SEEDS:
            return INSUFFICIENT
        d = self.diff if self.rel == ">" else -self.diff
        return PASS if d > self.margin else FAIL

    def to_dict(self) -> dict[str, Any]:
        return {"a_mean": mean(self.a), "a_spread": spread(self.a), "b_mean": mean(self.b),
                "b_spread": spread(self.b), "n": [len(_clean(self.a)), len(_clean(self.b))],
                "relation": self.rel, "verdict": self.verdict(), **({"exempt": True} if self.exempt else {})}


def comparison(figure: int, sentence: str, diffs: Sequence[Difference], *, what: str,
               paper_value: Any = None, cid: str = "") -> Claim:
    """Every difference must be significant in the stated direction (see the module docstring).
    The measured mean/spread reported is that of the smallest-margin (worst) difference, with the
    t-interval of its paired differences (same seeds) or of the difference of the means."""
    if not diffs:
        return Claim(figure, sentence, "comparison", NO_DATA, Measured.of([]), paper_value, "-", "",
                     what, id=cid)
    verdicts = [d.verdict() for d in diffs]
    if any(v == NO_DATA for v in verdicts):
        verdict = NO_DATA
    elif any(v == FAIL for v in verdicts):
        verdict = FAIL
    elif any(v == INSUFFICIENT for v in verdicts):
        verdict = INSUFFICIENT
    else:
        verdict = PASS
    judged = [d for d in diffs if not d.exempt] or list(diffs)
    worst = min(judged, key=lambda d: (d.diff if d.rel == ">" else -d.diff) - d.margin)
    pairs = [a - b for a, b in zip(worst.a, worst.b)]
    lo, hi = t_interval(pairs) if len(worst.a) == len(worst.b) else (math.nan, math.nan)
    m = Measured(worst.diff, worst.margin, min(len(worst.a), len(worst.b)),
                 {"worst": worst.label, "paired_differences": pairs,
                  "by": {d.label: d.to_dict() for d in diffs}},
                 None if math.isnan(lo) else (lo, hi), CI_METHOD + " (paired differences, shown)")
    return Claim(figure, sentence, "comparison", verdict, m, paper_value,
                 f"difference > spread(a) + spread(b), >= {MIN_SEEDS} seeds",
                 "seeds' sample standard deviations: a difference inside the noise is not a result",
                 what, id=cid)


def information(figure: int, sentence: str, samples: Sequence[Any], paper_value: Any, reason: str,
                *, unit: str | None = None, cid: str = "", **detail: Any) -> Claim:
    """Reported, never judged: an absolute number set by the paper's hardware, in ``unit`` (ms,
    tx/s, % CPU). A dimensionless unit (:data:`DIMENSIONLESS`) is refused: a ratio is judged."""
    if unit is not None and unit.strip().lower() in DIMENSIONLESS:
        raise ValueError(f"fig {figure} {sentence!r}: information is for absolute numbers only "
                         f"(unit {unit!r} is dimensionless: judge it as a value claim with a band)")
    return Claim(figure, sentence, "information", INFO, Measured.of(samples, **detail), paper_value, "-",
                 reason, "reported only", id=cid, unit=unit or "")


def by_construction(figure: int, sentence: str, samples: Sequence[Any], *, decided_by: str,
                    predicted: Sequence[Any] = (), paper_value: Any = None, cid: str = "",
                    **detail: Any) -> Claim:
    """The plan alone decides it: reported with ``decided_by`` (the parameter or invariant, e.g.
    ``log_force.gap_ms = 100``) and, where a predictor exists, its value from the plan alone
    (``predicted``, beside the measured), never counted as reproduced."""
    if predicted:
        detail["predicted"] = Measured.of(predicted).__dict__ | {"samples": _clean(predicted)}
    return Claim(figure, sentence, "construction", BY_CONSTRUCTION, Measured.of(samples, **detail), paper_value,
                 "-", decided_by, "decided by the plan, not by the protocol's behaviour", id=cid)


COUNTS = ("judged", PASS, FAIL, INSUFFICIENT, NO_DATA, BY_CONSTRUCTION, INFO)


def summary(claims: Sequence[Claim | dict[str, Any]]) -> dict[str, Any]:
    """The counts of the report's head: judged (value, shape, comparison claims) and their
    verdicts, by construction, information, and ``reproduced`` = pass / judged (None: none judged)."""
    out: dict[str, Any] = {k: 0 for k in COUNTS}
    for c in claims:
        kind, verdict = (c["kind"], c["verdict"]) if isinstance(c, dict) else (c.kind, c.verdict)
        if kind in JUDGED_KINDS:
            out["judged"] += 1
        out[verdict] += 1
    out["reproduced"] = round(out[PASS] / out["judged"], 4) if out["judged"] else None
    return out


def add_summaries(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The overall counts over several papers' :func:`summary`."""
    out: dict[str, Any] = {k: 0 for k in COUNTS}
    for p in parts:
        for k in COUNTS:
            out[k] += int(p.get(k) or 0)
    out["reproduced"] = round(out[PASS] / out["judged"], 4) if out["judged"] else None
    return out
