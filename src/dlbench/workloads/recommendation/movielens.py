"""dataset=movielens: the checked ratings file, and the batches a recommendation bench trains or infers on.

Two halves, both numpy only:
- `check_movielens(job)` runs in the orchestrator before any worker starts (called by
  data.validate.check_dataset): it resolves the ratings file, reads it, fills `model.num_users` /
  `model.num_items` from the data when they are null (so the embedding tables have one row per user and
  item that occurs, and MLflow records the sizes), and turns every problem into a one-line ConfigError.
- `MovieLensSource` runs in the worker (the data format `ratings`, held in memory, opens it:
  workloads/recommendation/formats.py): the leave-one-out split and the batches of each mode (see the class), plus the
  epoch / evaluation interface mode=converge drives (docs/architecture.md, "Accuracy").
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.config import JobConfig
from dlbench.core.names import project_relative
from dlbench.data.epochs import EpochSource
from dlbench.data.seeds import stream
from dlbench.data.synthetic import HostBatch
from dlbench.errors import ConfigError
from dlbench.workloads.recommendation.interactions import (
    InteractionsError,
    find_ratings_file,
    leave_one_out,
    read_interactions,
)
from dlbench.workloads.recommendation.negatives import EVAL_NEGATIVES, evaluation_candidates, training_samples
from dlbench.workloads.recommendation.spec import positives_per_step


def resolve_movielens_path(job: JobConfig) -> Path:
    """dataset.path (else $dataset.path_env), relative ones as core.names.project_relative takes them (the
    setup script puts data/movielens/ml-100k under the project root)."""
    ds = job.dataset
    return project_relative(ds.path or (os.environ.get(ds.path_env) if ds.path_env else None) or "")


def check_movielens(job: JobConfig) -> dict[str, Any]:
    """Check a recommendation job's data; fill model.num_users/num_items from it; return facts to log."""
    ds, model = job.dataset, job.model
    if ds.name != "movielens":
        raise ConfigError(
            f"model={model.name} reads user-item interactions: use dataset=movielens or synthetic"
        )
    path = resolve_movielens_path(job)
    try:
        file = find_ratings_file(path)
        rows, users, items = _counts(str(file), file.stat().st_mtime_ns)
    except InteractionsError as exc:
        raise ConfigError(f"dataset=movielens: {exc}") from None
    for key, found in (("num_users", users), ("num_items", items)):
        size = getattr(model, key)
        if size is None:
            setattr(model, key, found)
        elif size < found:
            raise ConfigError(
                f"dataset=movielens: {path} has {found:,} {key[4:]} but model.{key}={size}: the embedding table "
                f"needs a row each; use model.{key}={found} or null (from the data)"
            )
    per_epoch = samples_per_epoch(rows, users, job)
    if per_epoch < job.batch_size:
        raise ConfigError(
            f"dataset=movielens: an epoch of {path} holds {per_epoch:,} samples, fewer than the batch size "
            f"{job.batch_size:,}; use a smaller schedule.batch_size"
        )
    ds.path = str(path)
    return {
        "dataset.resolved_path": str(path),
        "dataset.found_samples": rows,
        "dataset.users": users,
        "dataset.items": items,
    }


@functools.lru_cache(maxsize=4)
def _counts(path: str, mtime_ns: int) -> tuple[int, int, int]:
    """(ratings, users, items) of a ratings file, read once per sweep (every job of a sweep is checked in
    the same orchestrator process; ML-20M takes about a minute to read). Only the counts are kept."""
    data = read_interactions(path)
    return len(data), data.num_users, data.num_items


def samples_per_epoch(rows: int, users: int, job: JobConfig) -> int:
    """Training: every positive but each user's held-out one, plus its negatives; inference: 101 per user."""
    if job.mode in ("train", "converge"):
        return (rows - users) * (1 + job.model.negatives)
    return users * (1 + EVAL_NEGATIVES)


class MovieLensSource(EpochSource):
    """Batches of (user, item) ids from the ratings at dataset.path, made on the host and put on the device
    by the bench's `to_device`, and the held-out evaluation of mode=converge. What a batch holds depends on
    the mode (every batch the same size: static shapes for hybridized / traced steps; an epoch's last
    partial batch is dropped):

    train     positives only, shuffled per epoch; the step draws the negatives on the device
              (TaskSpec.device_negatives), so a batch counts positives x (1 + model.negatives) samples
    converge  positives plus model.negatives negatives each, drawn on the host with numpy from the run's
              seed (stream "negatives", per epoch: fresh every epoch, the same in every framework), never
              one of the user's training positives, shuffled, with their 0/1 labels
    infer     each user's 101 evaluation candidates, user after user

    Evaluation candidates (the held-out item and 100 negatives the user never rated) are drawn once from
    the seed (stream "eval"); `eval_batches` / `eval_labels` hand them to converge.evaluate, whose metric
    (eval.ranking.hit_rate_at_10) ranks each user's candidates. Seed: schedule.seed in mode=converge,
    data.seed otherwise."""

    def __init__(self, job: JobConfig, to_device: Callable[[HostBatch], Any]) -> None:
        self.split = leave_one_out(read_interactions(job.dataset.path))
        self.mode, self.batch_size, self.negatives = job.mode, job.batch_size, job.model.negatives
        self.seed = job.schedule.seed if job.mode == "converge" else job.data.seed
        self.to_device = to_device
        train = len(self.split.train_users)
        per_epoch = {"train": train, "converge": train * (1 + self.negatives)}
        samples = per_epoch.get(self.mode, self.split.num_users * (1 + EVAL_NEGATIVES))
        self.rows = (
            positives_per_step(self.batch_size, self.negatives) if self.mode == "train" else self.batch_size
        )
        self.steps_per_epoch = samples // self.rows
        if self.steps_per_epoch < 1:  # check_movielens refuses such a job before it starts
            raise ValueError(f"an epoch of {samples} samples cannot fill a batch of {self.rows}")
        self.start()

    def _epoch(self, epoch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(users, items, labels or None) of one epoch, in the order they are trained or scored on."""
        split = self.split
        if self.mode == "train":
            order = stream(self.seed, "order", epoch).permutation(len(split.train_users))
            return split.train_users[order], split.train_items[order], None
        if self.mode == "converge":
            return training_samples(split, stream(self.seed, "negatives", epoch), self.negatives)
        return self._flat_candidates()

    @functools.cached_property
    def candidates(self) -> np.ndarray:
        """(users, 101) evaluation item ids, column 0 the held-out item; drawn when first needed."""
        return evaluation_candidates(self.split, stream(self.seed, "eval"))

    def _flat_candidates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        users = np.repeat(np.arange(self.split.num_users), self.candidates.shape[1])
        labels = np.zeros(self.candidates.shape, dtype=np.float32)
        labels[:, 0] = 1.0
        return users, self.candidates.reshape(-1), labels.reshape(-1)

    def _host(self, users: np.ndarray, items: np.ndarray, labels: np.ndarray | None) -> HostBatch:
        inputs = {"user": users.astype(np.int32), "item": items.astype(np.int32)}
        if labels is None:  # positives only: the step adds the negatives and the labels
            return HostBatch(inputs, {}, len(users) * (1 + self.negatives))
        return HostBatch(inputs, {"label": labels.astype(np.int32)}, len(users))

    def epoch_batches(self, epoch: int) -> Iterator[HostBatch]:
        users, items, labels = self._epoch(epoch)
        for step in range(self.steps_per_epoch):
            pick = slice(step * self.rows, (step + 1) * self.rows)
            yield self._host(users[pick], items[pick], None if labels is None else labels[pick])

    def eval_batches(self, n: int) -> Iterator[HostBatch]:
        """The evaluation candidates of `n` users per batch (n x 101 pairs), user after user."""
        users, items, labels = self._flat_candidates()
        per = n * self.candidates.shape[1]
        for start in range(0, len(users), per):
            pick = slice(start, start + per)
            yield self._host(users[pick], items[pick], labels[pick])

    @property
    def eval_labels(self) -> np.ndarray:
        """1 for each user's held-out item (first of its 101 candidates), 0 for the negatives, flat."""
        return self._flat_candidates()[2]

    def facts(self) -> dict[str, Any]:
        """What decided the data this run saw (MLflow tags run.*)."""
        facts: dict[str, Any] = {
            "seed": self.seed,
            "data_order": f"numpy permutation per epoch from seed {self.seed}",
            "train_positives": len(self.split.train_users),
            "eval_users": self.split.num_users,
            "eval_candidates": f"held-out item + {EVAL_NEGATIVES} negatives per user, seed {self.seed} stream 'eval'",
        }
        if self.mode == "converge":  # mode=train: the bench reports its device negatives
            facts["negatives"] = (
                f"{self.negatives} per positive, on the host, numpy, seed {self.seed} per epoch"
            )
        return facts
