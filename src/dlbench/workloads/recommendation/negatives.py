"""Negative sampling for implicit-feedback training and HR@10 evaluation (numpy, vectorised, seeded).

A negative of user u is an item drawn uniformly from those u has no interaction with. Sampling draws
every item at once, then redraws only the collisions with u's positives until none remain, so the
cost is a few vectorised passes, not a Python loop per sample. (DLE builds its test negatives with a
per-sample loop and draws its training negatives on the GPU without this check.)

Which positives a sampler excludes is the caller's choice: training negatives exclude the training
positives only (the held-out item must not shape training), evaluation negatives exclude every
positive of the user, so the 100 candidates beside the held-out item are all true negatives.
Negatives are drawn with replacement (a user may get the same negative twice), as in DLE.
"""

from __future__ import annotations

import numpy as np

from dlbench.workloads.recommendation.interactions import LeaveOneOut

TRAIN_NEGATIVES = 4  # per positive (DLE's default)
EVAL_NEGATIVES = 100  # per user, beside the held-out positive


class PositiveSet:
    """The (user, item) pairs that are positives, as sorted keys user * num_items + item."""

    def __init__(self, users: np.ndarray, items: np.ndarray, num_users: int, num_items: int) -> None:
        self.num_items = num_items
        self.keys = np.unique(
            np.asarray(users, dtype=np.int64) * num_items + np.asarray(items, dtype=np.int64)
        )
        per_user = np.bincount(self.keys // num_items, minlength=num_users)
        self.full_users = np.flatnonzero(per_user >= num_items)  # no negative exists for these

    def contains(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Boolean mask: which (users[i], items[i]) pairs are positives."""
        keys = users.astype(np.int64) * self.num_items + items
        if not len(self.keys):
            return np.zeros(len(keys), dtype=bool)
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return self.keys[pos] == keys

    def sample(self, users: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One negative item per entry of `users`."""
        users = np.asarray(users, dtype=np.int64)
        stuck = np.intersect1d(users, self.full_users)
        if len(stuck):
            raise ValueError(
                f"users {stuck[:5].tolist()} interacted with all {self.num_items} items; none has a negative"
            )
        items = rng.integers(0, self.num_items, size=len(users), dtype=np.int64)
        redo = np.flatnonzero(self.contains(users, items))
        while len(redo):
            items[redo] = rng.integers(0, self.num_items, size=len(redo), dtype=np.int64)
            redo = redo[self.contains(users[redo], items[redo])]
        return items


def training_samples(
    split: LeaveOneOut, rng: np.random.Generator, negatives: int = TRAIN_NEGATIVES
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One epoch's (users, items, labels): every training positive (label 1) plus `negatives` fresh
    negatives per positive (label 0), shuffled."""
    positives = PositiveSet(split.train_users, split.train_items, split.num_users, split.num_items)
    neg_users = np.tile(split.train_users, negatives)
    users = np.concatenate([split.train_users, neg_users])
    items = np.concatenate([split.train_items, positives.sample(neg_users, rng)])
    labels = np.zeros(len(users), dtype=np.float32)
    labels[: len(split.train_users)] = 1.0
    order = rng.permutation(len(users))
    return users[order], items[order], labels[order]


def evaluation_candidates(
    split: LeaveOneOut, rng: np.random.Generator, negatives: int = EVAL_NEGATIVES
) -> np.ndarray:
    """(num_users, 1 + negatives) item ids: column 0 is the user's held-out item, the rest negatives
    the user never interacted with (row u belongs to user u)."""
    users = np.arange(split.num_users, dtype=np.int64)
    positives = PositiveSet(
        np.concatenate([split.train_users, users]),
        np.concatenate([split.train_items, split.test_items]),
        split.num_users,
        split.num_items,
    )
    negs = positives.sample(np.repeat(users, negatives), rng).reshape(split.num_users, negatives)
    return np.concatenate([split.test_items[:, None], negs], axis=1)
