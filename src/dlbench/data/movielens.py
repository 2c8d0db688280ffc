"""dataset=movielens: the checked ratings file, and the batches a recommendation bench trains or infers on.

Two halves, both numpy only:
- `check_movielens(job)` runs in the orchestrator before any worker starts (called by
  data.validate.check_dataset): it resolves the ratings file, reads it, fills `model.num_users` /
  `model.num_items` from the data when they are null (so the embedding tables have one row per user and
  item that occurs, and MLflow records the sizes), and turns every problem into a one-line ConfigError.
- `MovieLensSource` runs in the worker (backends.skeleton opens it in place of a DALI source): the
  leave-one-out split; in training, every epoch the positives plus `model.negatives` fresh negatives
  each, shuffled, in fixed-size batches; in inference, each user's 101 evaluation candidates (the
  held-out item and 100 negatives). Negatives are sampled on the host with numpy once per epoch, so
  that cost shows in data_wait_s at epoch boundaries (DLE draws them on the GPU).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.config import ConfigError, JobConfig
from dlbench.data.interactions import InteractionsError, find_ratings_file, leave_one_out, read_interactions
from dlbench.data.negatives import EVAL_NEGATIVES, evaluation_candidates, training_samples
from dlbench.data.synthetic import HostBatch

ROOT = Path(__file__).resolve().parents[3]  # the project: scripts/get_movielens100k.py writes under data/


def resolve_movielens_path(job: JobConfig) -> Path:
    """dataset.path (else $dataset.path_env); a relative path not found from the working directory is
    taken from the project root, where the setup script puts data/movielens/ml-100k."""
    ds = job.dataset
    raw = ds.path or (os.environ.get(ds.path_env) if ds.path_env else None) or ""
    path = Path(os.path.expandvars(os.path.expanduser(raw)))
    if not path.is_absolute() and not path.exists():
        path = ROOT / path
    return path.absolute()


def check_movielens(job: JobConfig) -> dict[str, Any]:
    """Check a recommendation job's data; fill model.num_users/num_items from it; return facts to log."""
    ds, model = job.dataset, job.model
    if model.task != "recommendation":
        raise ConfigError(
            f"dataset={ds.name} holds user-item ratings, model={model.name} is a {model.task} model: use "
            "model=ncf"
        )
    if ds.name != "movielens":
        raise ConfigError(
            f"model={model.name} reads user-item interactions: use dataset=movielens or synthetic"
        )
    if job.mode == "data":
        raise ConfigError("mode=data measures a DALI input pipeline; dataset=movielens has none")
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
    if job.mode == "train":
        return (rows - users) * (1 + job.model.negatives)
    return users * (1 + EVAL_NEGATIVES)


class MovieLensSource:
    """Batches of (user, item) -> label from the ratings at dataset.path, made on the host and put on
    the device by the bench's `to_device`. Every batch has exactly job.batch_size samples (static
    shapes for hybridized / traced steps): an epoch's last partial batch is dropped."""

    def __init__(self, job: JobConfig, to_device: Callable[[HostBatch], Any]) -> None:
        self.split = leave_one_out(read_interactions(job.dataset.path))
        self.batch_size = job.batch_size
        self.negatives = job.model.negatives
        self.train = job.mode == "train"
        self.to_device = to_device
        self.rng = np.random.default_rng(job.data.seed)
        self._batches = self._epochs()

    def _epoch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.train:
            return training_samples(self.split, self.rng, self.negatives)
        items = evaluation_candidates(self.split, self.rng)
        users = np.repeat(np.arange(self.split.num_users), items.shape[1])
        labels = np.zeros(items.shape, dtype=np.float32)
        labels[:, 0] = 1.0
        return users, items.reshape(-1), labels.reshape(-1)

    def _epochs(self) -> Iterator[HostBatch]:
        while True:
            users, items, labels = self._epoch()
            if len(users) < self.batch_size:  # check_movielens refuses such a job before it starts
                raise ValueError(f"an epoch of {len(users)} samples cannot fill a batch of {self.batch_size}")
            for start in range(0, len(users) - self.batch_size + 1, self.batch_size):
                end = start + self.batch_size
                yield HostBatch(
                    {"user": users[start:end].astype(np.int32), "item": items[start:end].astype(np.int32)},
                    {"label": labels[start:end].astype(np.int32)},
                    self.batch_size,
                )

    def next(self) -> Any:
        return self.to_device(next(self._batches))

    def close(self) -> None:
        self._batches.close()
