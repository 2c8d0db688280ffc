"""Hit rate and NDCG at k for leave-one-out ranking (NCF's HR@10, NDCG@10), on numpy scores.

Input: a (users x candidates) score matrix, one row per user, with the user's held-out positive at
a known column (column 0 in dlbench.data.negatives.evaluation_candidates) and sampled negatives in
the others. A user "hits" when the positive ranks among the top k of its row; NDCG gives a hit at
rank r (0-based) the gain 1 / log2(r + 2).

Ties are shared out: a positive that ties with t negatives, below g strictly better ones, gets the
average over the t + 1 equally likely tie orders of its hit and gain. This matters for reduced
precision (bf16 logits tie far more often than fp32 ones) and keeps a constant scorer at the random
baseline k / candidates instead of at 1 or 0, whatever the sort's tie order. A NaN score (a diverged
model) counts as the lowest score.
"""

from __future__ import annotations

import numpy as np


def rank_counts(scores: np.ndarray, positive_col: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (negatives scoring strictly above the positive, negatives tying with it)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError(f"scores must be (users x candidates) with 2+ candidates, got shape {scores.shape}")
    scores = np.where(np.isnan(scores), -np.inf, scores)
    positive = scores[:, positive_col : positive_col + 1]
    others = np.delete(scores, positive_col, axis=1)
    return (others > positive).sum(axis=1), (others == positive).sum(axis=1)


def hit_rate_ndcg(scores: np.ndarray, k: int = 10, positive_col: int = 0) -> tuple[float, float]:
    """(HR@k, NDCG@k) averaged over users (rows)."""
    better, ties = rank_counts(scores, positive_col)
    # a tie group spans ranks better .. better + ties, each equally likely for the positive
    hits = np.clip(k - better, 0, ties + 1) / (ties + 1)
    gains = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(k) + 2.0))])  # gains[j] = sum ranks < j
    first, last = np.minimum(better, k), np.minimum(better + ties + 1, k)
    ndcg = (gains[last] - gains[first]) / (ties + 1)
    return float(hits.mean()), float(ndcg.mean())
