"""The accuracy verdict's statistics (report/equivalence.py): Welch's interval checked against scipy's own
Welch t-test, the equivalence rule on its boundaries, and the seeds-to-settle estimate."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from dlbench.report.equivalence import Interval, Margins, classify, seeds_to_settle, welch_interval

FP32 = [0.90, 0.90, 0.90, 0.60]
AMP = [0.61, 0.62, 0.63]


def test_the_interval_is_welchs():
    iv = welch_interval(FP32, AMP)
    ref = stats.ttest_ind(AMP, FP32, equal_var=False).confidence_interval(0.95)
    assert (iv.low, iv.high) == pytest.approx((ref.low, ref.high))
    assert iv.diff == pytest.approx(-0.205)


def test_no_spread_gives_the_difference_itself():
    iv = welch_interval([0.5, 0.5], [0.4, 0.4])
    assert (iv.low, iv.diff, iv.high) == pytest.approx((-0.1, -0.1, -0.1)) and math.isinf(iv.df)
    assert classify(iv, 0.01) == "worse"


def test_fewer_than_two_values_have_no_interval():
    with pytest.raises(ValueError, match="two values"):
        welch_interval([0.5], [0.4, 0.5])


@pytest.mark.parametrize(
    ("low", "high", "delta", "kind"),
    [
        (-0.004, 0.003, 0.005, "matches"),
        (0.001, 0.003, 0.005, "matches"),  # a real but smaller-than-δ difference is still equivalence
        (-0.004, 0.006, 0.005, "inconclusive"),  # reaches past +δ and holds 0
        (-0.02, -0.001, 0.005, "worse"),
        (0.001, 0.02, 0.005, "better"),
        (-0.005, 0.001, 0.005, "inconclusive"),  # touching -δ is not inside it
    ],
)
def test_the_rule(low, high, delta, kind):
    assert classify(Interval((low + high) / 2, low, high, 3.0), delta) == kind


def test_seeds_to_settle_is_the_smallest_count_that_would():
    base, other = [0.552, 0.644], [0.552, 0.639]
    delta = 0.01 * 0.598
    k = seeds_to_settle(base, other, delta)
    assert k is not None and k > 100

    def settled(extra: int) -> bool:  # the observed spread, `extra` more seeds on each side
        s_a, s_b = stats.tstd(base), stats.tstd(other)
        va, vb = s_a**2 / (2 + extra), s_b**2 / (2 + extra)
        df = (va + vb) ** 2 / (va**2 / (1 + extra) + vb**2 / (1 + extra))
        half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
        d = abs(sum(other) / 2 - sum(base) / 2)
        return half < max(d, delta - d)

    assert settled(k) and not settled(k - 1)


def test_a_difference_of_exactly_delta_is_never_settled_by_seeds():
    assert seeds_to_settle([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], 0.0) is None


def test_margins_absolute_per_metric_else_relative_to_fp32():
    margins = Margins(0.01, {"bleu": 0.3})
    assert margins.delta("bleu", 25.0) == (0.3, "report.delta")
    assert margins.delta("accuracy", 0.9) == (pytest.approx(0.009), "1% of fp32's mean")
