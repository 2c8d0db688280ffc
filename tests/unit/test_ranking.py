"""HR@k and NDCG@k on hand-made score matrices (dlbench.workloads.recommendation.eval)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlbench.workloads.recommendation.eval import hit_rate_at_10, hit_rate_ndcg, rank_counts


def test_hand_case_with_k_2():
    scores = np.array(
        [
            [5.0, 1.0, 2.0, 3.0],  # positive first: rank 0, hit, gain 1
            [0.0, 1.0, 2.0, 3.0],  # positive last: rank 3, miss
            [2.0, 3.0, 1.0, 0.0],  # one negative above: rank 1, hit, gain 1/log2(3)
        ]
    )
    hr, ndcg = hit_rate_ndcg(scores, k=2)
    assert hr == pytest.approx(2 / 3)
    assert ndcg == pytest.approx((1 + 1 / math.log2(3)) / 3)


def test_rank_9_hits_and_rank_10_misses_at_k_10():
    row_9 = np.concatenate([[0.5], np.linspace(1, 2, 9), np.linspace(-2, -1, 91)])
    row_10 = np.concatenate([[0.5], np.linspace(1, 2, 10), np.linspace(-2, -1, 90)])
    assert hit_rate_ndcg(row_9[None]) == pytest.approx((1.0, 1 / math.log2(11)))
    assert hit_rate_ndcg(row_10[None]) == (0.0, 0.0)
    assert hit_rate_ndcg(np.stack([row_9, row_10]))[0] == pytest.approx(0.5)


def test_the_positive_column_can_be_any():
    scores = np.array([[1.0, 9.0, 2.0], [3.0, 0.0, 4.0]])
    assert rank_counts(scores, positive_col=1)[0].tolist() == [0, 2]
    assert hit_rate_ndcg(scores, k=1, positive_col=1) == (0.5, 0.5)


def test_ties_are_shared_so_a_constant_scorer_sits_at_the_random_baseline():
    hr, ndcg = hit_rate_ndcg(np.zeros((4, 101)))
    assert hr == pytest.approx(10 / 101)
    assert ndcg == pytest.approx(sum(1 / math.log2(r + 2) for r in range(10)) / 101)
    # one better negative, then a tie with 3 others: ranks 1..4 equally likely; k=2 -> only rank 1 hits
    row = np.array([[1.0, 2.0, 1.0, 1.0, 1.0, 0.0]])
    assert hit_rate_ndcg(row, k=2) == pytest.approx((1 / 4, (1 / math.log2(3)) / 4))


def test_random_scores_give_the_random_baseline():
    hr, _ = hit_rate_ndcg(np.random.default_rng(0).random((20_000, 101)))
    assert hr == pytest.approx(10 / 101, abs=0.01)


def test_nan_scores_rank_last():
    scores = np.array([[np.nan, 1.0, 2.0], [1.0, np.nan, np.nan]])
    assert rank_counts(scores)[0].tolist() == [2, 0]
    assert hit_rate_ndcg(scores, k=1) == (0.5, 0.5)


@pytest.mark.parametrize("shape", [(5,), (3, 1), (2, 2, 2)])
def test_a_wrong_shape_is_refused(shape):
    with pytest.raises(ValueError, match="users x candidates"):
        hit_rate_ndcg(np.zeros(shape))


def test_the_positive_column_can_differ_per_row():
    scores = np.array([[1.0, 9.0, 2.0], [3.0, 0.0, 4.0]])
    assert rank_counts(scores, positive_col=np.array([1, 2]))[0].tolist() == [0, 0]
    assert hit_rate_ndcg(scores, k=1, positive_col=np.array([0, 1])) == (0.0, 0.0)


def test_hit_rate_at_10_from_flat_outputs_and_labels():
    rng = np.random.default_rng(0)
    scores = rng.random((4, 101))
    scores[:2, 0] = 2.0  # users 0 and 1 rank their held-out item first, users 2 and 3 last
    scores[2:, 0] = -1.0
    labels = np.zeros((4, 101))
    labels[:, 0] = 1
    assert hit_rate_at_10(scores.reshape(-1, 1), labels.reshape(-1)) == 0.5
    order = rng.permutation(101)  # the positive may sit anywhere among a user's candidates
    assert hit_rate_at_10(scores[:, order].reshape(-1), labels[:, order].reshape(-1)) == 0.5
    scores[3, 5] = np.inf
    assert np.isnan(hit_rate_at_10(scores.reshape(-1), labels.reshape(-1)))
    with pytest.raises(ValueError, match="one positive"):
        hit_rate_at_10(np.zeros(10), np.array([1, 1, 0, 0, 0, 0, 0, 0, 0, 0]))
