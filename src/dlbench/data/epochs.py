"""Epochs over an in-memory dataset: seeded shuffling, batching, normalisation, numpy only.

The order of the training samples in epoch e of a run with seed s is a permutation drawn from
`seeds.stream(s, "order", e)`: identical run to run and across frameworks, since every backend iterates
through this module rather than its own loader. Training batches all have `batch_size` samples (the
last partial batch of an epoch is dropped, so compiled steps see one shape and every step does the same
work); evaluation batches cover every test sample, in file order.

Pixels are scaled to [0, 1] and standardised with the training split's mean and standard deviation,
computed once in float64 (the test split is normalised with the training statistics).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlbench.data.seeds import stream
from dlbench.errors import ConfigError

LAYOUTS = ("nchw", "nhwc")


class EpochSource:
    """What every in-memory source of mode=converge shares: one endless stream of host batches, epoch after
    epoch in the seed's order (the subclass's `epoch_batches(epoch)`), each put on the device by the bench's
    `to_device` when the step asks for it. `epoch` is the epoch the last batch came from. A subclass calls
    `start()` at the end of its __init__ and adds `steps_per_epoch`, `eval_batches`, `eval_labels`, `facts`."""

    to_device: Callable[[Any], Any]

    def start(self) -> None:
        self.epoch = 0
        self._batches = self._endless()

    def epoch_batches(self, epoch: int) -> Iterator[Any]:
        raise NotImplementedError

    def _endless(self) -> Iterator[Any]:
        epoch = 0
        while True:
            self.epoch = epoch
            yield from self.epoch_batches(epoch)
            epoch += 1

    def next(self) -> Any:
        return self.to_device(next(self._batches))

    def close(self) -> None:
        self._batches.close()


@dataclass(frozen=True)
class Normalizer:
    """uint8 pixels -> float32 (x / pixel_max - mean) / std."""

    pixel_max: float
    mean: float
    std: float

    @classmethod
    def from_train(cls, images: np.ndarray, pixel_max: float) -> Normalizer:
        scaled = images.astype(np.float64) / pixel_max
        return cls(float(pixel_max), float(scaled.mean()), float(scaled.std()) or 1.0)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        out = images.astype(np.float32) / np.float32(self.pixel_max)
        return (out - np.float32(self.mean)) / np.float32(self.std)


def to_layout(x: np.ndarray, layout: str) -> np.ndarray:
    """N x H x W grey images -> N x 1 x H x W ("nchw") or N x H x W x 1 ("nhwc")."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}: one of {LAYOUTS}")
    return x[:, None] if layout == "nchw" else x[..., None]


@dataclass(frozen=True)
class EpochPlan:
    """How a run walks its training data: seed, batch size, augmentation."""

    seed: int
    batch_size: int
    hflip: bool = False  # augmentation: mirror each image left-right with probability 1/2

    def steps(self, n: int) -> int:
        """Training steps per epoch over n samples (the last partial batch is dropped)."""
        if self.batch_size < 1 or n < self.batch_size:
            raise ConfigError(
                f"schedule.batch_size={self.batch_size}: needs 1..{n} (the training split has {n} samples)"
            )
        return n // self.batch_size

    def order(self, epoch: int, n: int) -> np.ndarray:
        """The sample indices of epoch `epoch` in the order they are trained on."""
        return stream(self.seed, "order", epoch).permutation(n)

    def flips(self, epoch: int, n: int) -> np.ndarray:
        """Per position in the epoch's order: mirror that sample (all False without hflip)."""
        if not self.hflip:
            return np.zeros(n, dtype=bool)
        return stream(self.seed, "augment", epoch).random(n) < 0.5

    def train_batches(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        epoch: int,
        normalize: Normalizer,
        layout: str = "nchw",
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(float32 images in `layout`, int64 labels) for each training step of `epoch`."""
        n = len(labels)
        order, flips = self.order(epoch, n), self.flips(epoch, n)
        for step in range(self.steps(n)):
            pick = slice(step * self.batch_size, (step + 1) * self.batch_size)
            idx = order[pick]
            x = images[idx]
            if self.hflip:
                x = np.where(flips[pick][:, None, None], x[:, :, ::-1], x)
            yield to_layout(normalize(x), layout), labels[idx]


def eval_batches(
    images: np.ndarray, labels: np.ndarray, batch_size: int, normalize: Normalizer, layout: str = "nchw"
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every test sample once, in order; the last batch may be smaller."""
    for start in range(0, len(labels), batch_size):
        stop = start + batch_size
        yield to_layout(normalize(images[start:stop]), layout), labels[start:stop]
