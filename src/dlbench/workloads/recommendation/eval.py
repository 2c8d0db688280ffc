"""Hit rate and NDCG at k for leave-one-out ranking (NCF's HR@10, NDCG@10), on numpy scores.

Input: a (users x candidates) score matrix, one row per user, with the user's held-out positive at
a known column (column 0 in dlbench.workloads.recommendation.negatives.evaluation_candidates) and sampled negatives in
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


def rank_counts(scores: np.ndarray, positive_col: int | np.ndarray = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (negatives scoring strictly above the positive, negatives tying with it). The positive's
    column is one for all rows, or one per row."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError(f"scores must be (users x candidates) with 2+ candidates, got shape {scores.shape}")
    scores = np.where(np.isnan(scores), -np.inf, scores)
    cols = np.broadcast_to(np.asarray(positive_col), (len(scores),))
    positive = scores[np.arange(len(scores)), cols][:, None]
    better = (scores > positive).sum(axis=1)
    return better, (scores == positive).sum(axis=1) - 1  # the positive ties with itself


def hit_rate_ndcg(scores: np.ndarray, k: int = 10, positive_col: int | np.ndarray = 0) -> tuple[float, float]:
    """(HR@k, NDCG@k) averaged over users (rows)."""
    better, ties = rank_counts(scores, positive_col)
    # a tie group spans ranks better .. better + ties, each equally likely for the positive
    hits = np.clip(k - better, 0, ties + 1) / (ties + 1)
    gains = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(k) + 2.0))])  # gains[j] = sum ranks < j
    first, last = np.minimum(better, k), np.minimum(better + ties + 1, k)
    ndcg = (gains[last] - gains[first]) / (ties + 1)
    return float(hits.mean()), float(ndcg.mean())


def hit_rate_at_10(outputs: np.ndarray, labels: np.ndarray) -> float:
    """HR@10 from flat outputs and 0/1 labels, one per (user, candidate) pair, each user's candidates
    consecutive with one positive among them (dlbench.workloads.recommendation.movielens's inference batches), the form a
    converge loop hands a metric. NaN when a score is not finite: a diverged model has no hit rate."""
    scores = np.asarray(outputs, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    users = int(labels.sum())
    if users == 0 or len(labels) % users:
        raise ValueError(
            f"{len(labels)} labels with {users} positives: not one positive per user's candidates"
        )
    rows = labels.reshape(users, -1)
    if not (rows.sum(axis=1) == 1).all():
        raise ValueError("each user's candidates must hold exactly one positive")
    if not np.isfinite(scores).all():
        return float("nan")
    return hit_rate_ndcg(scores.reshape(users, -1), k=10, positive_col=rows.argmax(axis=1))[0]
