"""Classification quality from numpy logits: top-1 accuracy.

A model whose outputs are NaN or inf has no accuracy: `top1_accuracy` returns NaN then, rather than
whatever `argmax` makes of a NaN row, so a diverged run can never pass for a result.
"""

from __future__ import annotations

import math

import numpy as np


def top1_accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Share of samples whose highest logit is the label (NaN when any logit is not finite)."""
    logits, labels = np.asarray(logits), np.asarray(labels)
    if logits.ndim != 2 or labels.shape != (logits.shape[0],) or logits.shape[0] == 0:
        raise ValueError(
            f"top1_accuracy: logits {logits.shape} and labels {labels.shape}: expected (N, C), (N,)"
        )
    if not np.isfinite(logits).all():
        return math.nan
    return float(np.mean(np.argmax(logits, axis=1) == labels))
