"""Claims as data: the paper's sentence, what we measured, how it is judged, and the verdict.

Four kinds (``Claim.kind``):

* ``value``       the paper states a number we can reproduce (a timestamp size, a ratio, a nack
                  range): the mean over the seeds must fall inside the tolerance around it.
* ``shape``       a qualitative statement judged on every seed's data (``servers 1 and 2 forward
                  nothing``, ``no nacks while p1 is down``): it holds only if it holds on every seed.
* ``comparison``  one series against another, or a series that "rises": judged on >= MIN_SEEDS
                  seeds per side, and the difference of the means must exceed the seeds' spread
                  (``spread(a) + spread(b)``, the sample standard deviations), not merely be > 0.
                  Fewer seeds: verdict ``insufficient``, never a pass.
* ``information`` the paper states a number the reproduction cannot control (an absolute
                  latency or CPU share set by the paper's hardware): reported with its reason,
                  verdict ``info``, never a pass.

Every tolerance is a :class:`Tolerance` with its reason, declared once per paper module.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

MIN_SEEDS = 3

PASS, FAIL, INFO, INSUFFICIENT, NO_DATA = "pass", "fail", "info", "insufficient", "no data"
VERDICTS = (PASS, FAIL, INFO, INSUFFICIENT, NO_DATA)


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


@dataclass(frozen=True)
class Measured:
    mean: float
    spread: float
    n: int
    detail: dict[str, Any] = field(default_factory=dict)  # e.g. per-point means, per-seed values

    @classmethod
    def of(cls, samples: Sequence[Any], **detail: Any) -> "Measured":
        xs = _clean(samples)
        return cls(mean(xs), spread(xs), len(xs), detail)

    def text(self, nd: int = 2) -> str:
        if self.n == 0 or math.isnan(self.mean):
            return "-"
        s = f"{self.mean:.{nd}f}"
        if self.n > 1:
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
    reason: str = ""  # why that tolerance / why information only / why it failed
    judged: str = ""  # what exactly was judged, in words

    def __post_init__(self) -> None:
        if self.kind not in ("value", "shape", "comparison", "information"):
            raise ValueError(f"unknown claim kind {self.kind!r}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}")
        if self.kind == "information" and self.verdict != INFO:
            raise ValueError("an information claim is never judged")

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
        meas = Measured(_num(m["mean"]), _num(m["spread"]), m["n"], m.get("detail") or {})
        return cls(**{**d, "measured": meas})


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
          tol: Tolerance, **detail: Any) -> Claim:
    """The mean over the seeds must be inside ``tol`` (around ``paper_value``)."""
    m = Measured.of(samples, **detail)
    if m.n == 0:
        verdict = NO_DATA
    else:
        verdict = PASS if tol.accepts(m.mean, paper_value) else FAIL
    return Claim(figure, sentence, "value", verdict, m, paper_value, tol.text(), tol.reason,
                 "mean over the seeds inside the tolerance")


def shape(figure: int, sentence: str, holds: Sequence[bool | None], *, judged: str,
          samples: Sequence[Any] = (), paper_value: Any = None, tol: Tolerance | None = None,
          **detail: Any) -> Claim:
    """Holds iff it holds on every seed (``holds``: one bool per seed; None = no data)."""
    per_seed = [h for h in holds if h is not None]
    m = Measured.of(samples, holds_per_seed=[bool(h) for h in per_seed], **detail)
    if not per_seed:
        verdict = NO_DATA
    else:
        verdict = PASS if all(per_seed) else FAIL
    return Claim(figure, sentence, "shape", verdict, m, paper_value, tol.text() if tol else "-",
                 tol.reason if tol else "", judged + " (on every seed)")


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
               paper_value: Any = None) -> Claim:
    """Every difference must be significant in the stated direction (see the module docstring).
    The measured mean/spread reported is that of the smallest-margin (worst) difference."""
    if not diffs:
        return Claim(figure, sentence, "comparison", NO_DATA, Measured.of([]), paper_value, "-", "",
                     what)
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
    m = Measured(worst.diff, worst.margin, min(len(worst.a), len(worst.b)),
                 {"worst": worst.label, "paired_differences": pairs,
                  "by": {d.label: d.to_dict() for d in diffs}})
    return Claim(figure, sentence, "comparison", verdict, m, paper_value,
                 f"difference > spread(a) + spread(b), >= {MIN_SEEDS} seeds",
                 "seeds' sample standard deviations: a difference inside the noise is not a result",
                 what)


def information(figure: int, sentence: str, samples: Sequence[Any], paper_value: Any, reason: str,
                **detail: Any) -> Claim:
    """Reported, never judged (a number set by the paper's hardware)."""
    return Claim(figure, sentence, "information", INFO, Measured.of(samples, **detail), paper_value, "-",
                 reason, "reported only")


def summary(claims: Sequence[Claim]) -> dict[str, int]:
    out = {v: 0 for v in VERDICTS}
    for c in claims:
        out[c.verdict] += 1
    return out
