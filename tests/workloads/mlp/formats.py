"""TEST ONLY: a data format contributed by the test-only workload, to prove a workload brings its formats
with its folder: `mlp_vectors`, one .npz file of features `x` (samples x model.features) and 0/1 labels
`y`, read whole into memory with numpy and served in the seed's order, epoch after epoch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.data.epochs import EpochSource
from dlbench.data.registry import DataFormat
from dlbench.data.seeds import stream
from dlbench.data.synthetic import HostBatch
from dlbench.errors import ConfigError

NAME = "mlp_vectors"


def _arrays(path: str | None) -> tuple[np.ndarray, np.ndarray]:
    file = Path(path or "")
    if not file.is_file():
        raise ConfigError(
            f"dataset.format={NAME}: dataset.path={path} is not a file; point it at an .npz of x and y"
        )
    with np.load(file) as data:
        return data["x"].astype(np.float32), data["y"].astype(np.int32)


def check_vectors(job: Any) -> dict[str, Any]:
    x, y = _arrays(job.dataset.path)
    if x.ndim != 2 or x.shape[1] != job.model.features or len(y) != len(x):
        raise ConfigError(
            f"dataset.format={NAME}: {job.dataset.path} holds x{x.shape}, y{y.shape}; the model wants "
            f"(samples, {job.model.features}) and one label a sample: use model.features={x.shape[-1]}"
        )
    return {"dataset.resolved_format": NAME, "dataset.found_samples": len(y)}


class VectorSource(EpochSource):
    def __init__(self, job: Any, to_device: Callable[[HostBatch], Any]) -> None:
        self.x, self.y = _arrays(job.dataset.path)
        self.batch, self.seed, self.to_device = job.batch_size, job.schedule.seed, to_device
        self.steps_per_epoch = len(self.y) // self.batch
        self.start()

    def epoch_batches(self, epoch: int) -> Iterator[HostBatch]:
        order = stream(self.seed, "order", epoch).permutation(len(self.y))
        for step in range(self.steps_per_epoch):
            rows = order[step * self.batch : (step + 1) * self.batch]
            yield HostBatch({"x": self.x[rows]}, {"y": self.y[rows]}, len(rows))

    def eval_batches(self, batch_size: int) -> Iterator[HostBatch]:
        for at in range(0, len(self.y), batch_size):
            rows = slice(at, at + batch_size)
            yield HostBatch({"x": self.x[rows]}, {"y": self.y[rows]}, len(self.y[rows]))

    @property
    def eval_labels(self) -> np.ndarray:
        return self.y

    def facts(self) -> dict[str, Any]:
        return {"train_samples": len(self.y)}


def open_vectors(bench: Any, to_device: Callable[[HostBatch], Any]) -> VectorSource:
    return VectorSource(bench.job, to_device)


FORMATS = (
    DataFormat(
        NAME, check_vectors, open_vectors, in_memory=True, tasks=("test_mlp",), about="an .npz of x and y"
    ),
)
