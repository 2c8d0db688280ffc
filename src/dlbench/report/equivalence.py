"""Is a reduced precision as accurate as fp32? A confidence interval and an equivalence margin decide.

Overlapping seed ranges only say that no difference was shown; they do not show that there is none.
So a cell is compared with fp32 by the Welch t interval of the difference of means over seeds (the two
cells' variances need not be equal), and read against an equivalence margin δ:

  matches      the whole interval lies inside ±δ (an equivalence test: any difference is smaller than δ)
  worse/better the interval excludes 0 (and does not lie inside ±δ)
  inconclusive neither: the seeds are too few or too spread; `seeds_to_settle` estimates, from the
               observed spread and difference, how many more seeds per cell would give one of the above

Higher metric values are better (every converge metric is: accuracy, HR@10, mAP, BLEU).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from scipy import stats

LEVEL = 0.95  # two-sided confidence of the interval
RELATIVE_DELTA = 0.01  # default δ: 1% of fp32's mean (MLPerf's quality targets are ~99% of the reference)
MAX_SEEDS = 10_000  # past this many more seeds, "settle" is not a useful estimate


@dataclass(frozen=True)
class Interval:
    """The difference other - base of two means, with its confidence interval and Welch's degrees of
    freedom (inf when both cells have no spread: the interval is then the difference itself)."""

    diff: float
    low: float
    high: float
    df: float


@dataclass(frozen=True)
class Margins:
    """Where δ comes from: `absolute[metric]` in the metric's own units (a fraction for accuracy, HR@10
    and mAP; BLEU points), else `relative` times the fp32 mean."""

    relative: float = RELATIVE_DELTA
    absolute: dict[str, float] = field(default_factory=dict)

    def delta(self, metric: str, base_mean: float) -> tuple[float, str]:
        """(δ, where it came from) for `metric` against an fp32 mean of `base_mean`."""
        if metric in self.absolute:
            return float(self.absolute[metric]), "report.delta"
        return self.relative * abs(base_mean), f"{self.relative * 100:g}% of fp32's mean"


def _half_width(var_a: float, n_a: int, var_b: float, n_b: int) -> tuple[float, float]:
    """(half width, Welch degrees of freedom) of the interval for samples of these variances and sizes."""
    va, vb = var_a / n_a, var_b / n_b
    se2 = va + vb
    if se2 == 0:
        return 0.0, math.inf
    df = se2**2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    return float(stats.t.ppf(0.5 + LEVEL / 2, df)) * math.sqrt(se2), df


def welch_interval(base: list[float], other: list[float]) -> Interval:
    """The LEVEL confidence interval of mean(other) - mean(base); each list needs two values or more."""
    if len(base) < 2 or len(other) < 2:
        raise ValueError("a confidence interval needs two values or more on each side")
    diff = statistics.fmean(other) - statistics.fmean(base)
    half, df = _half_width(statistics.variance(base), len(base), statistics.variance(other), len(other))
    return Interval(diff, diff - half, diff + half, df)


def classify(iv: Interval, delta: float) -> str:
    """matches | worse | better | inconclusive (module docstring)."""
    if -delta < iv.low and iv.high < delta:
        return "matches"
    if iv.high < 0:
        return "worse"
    if iv.low > 0:
        return "better"
    return "inconclusive"


def seeds_to_settle(base: list[float], other: list[float], delta: float) -> int | None:
    """About how many more seeds in each cell would make the interval conclusive, if the means and the
    spreads stayed as observed: inside ±δ when the difference is smaller than δ, excluding 0 otherwise,
    whichever needs fewer. None: more than MAX_SEEDS (or never, e.g. a difference of exactly δ)."""
    d = abs(statistics.fmean(other) - statistics.fmean(base))
    room = max(d, delta - d)  # the largest half width that still settles it
    var_a, var_b = statistics.variance(base), statistics.variance(other)

    def settles(k: int) -> bool:
        return _half_width(var_a, len(base) + k, var_b, len(other) + k)[0] < room

    if room <= 0 or not settles(MAX_SEEDS):
        return None
    lo, hi = 0, MAX_SEEDS  # settles(hi) holds; find the smallest k that does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if settles(mid) else (mid, hi)
    return hi
