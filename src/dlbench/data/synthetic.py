"""Synthetic batches made from a task spec with numpy, once, on the host, before any timing.

Every framework gets the same numbers (seed 0, inputs then targets in spec order) and puts them on its
device itself, in its own layout and dtype; the unit count comes from these host arrays, so no step
ever asks the device how much it processed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dlbench.core.spec import TaskSpec, TensorSpec


@dataclass(frozen=True)
class HostBatch:
    """A batch as numpy arrays (floats as float32), keyed by the spec's input and target names."""

    inputs: dict[str, np.ndarray]
    targets: dict[str, np.ndarray]
    units: int


def _draw(rng: np.random.Generator, spec: TaskSpec, t: TensorSpec, batch_size: int) -> np.ndarray:
    shape = (batch_size, *spec.sample_shape(t))
    if not t.is_float:
        return rng.integers(t.low or 0, t.high, shape).astype(t.dtype)
    if t.low is None and t.high is None:
        return rng.standard_normal(shape, dtype=np.float32)
    return rng.uniform(t.low, t.high, shape).astype(np.float32)


def synthetic_batch(spec: TaskSpec, batch_size: int, seed: int = 0) -> HostBatch:
    """One random batch for `spec`: the batch a synthetic job reuses at every step."""
    rng = np.random.default_rng(seed)
    inputs = {name: _draw(rng, spec, t, batch_size) for name, t in spec.inputs.items()}
    if spec.synthetic_targets is not None:
        targets = spec.synthetic_targets(rng, batch_size)
    else:
        targets = {name: _draw(rng, spec, t, batch_size) for name, t in spec.targets.items()}
    return HostBatch(inputs, targets, spec.count_units(inputs | targets))


def synthetic_pool(spec: TaskSpec, batch_size: int, train: bool, seed: int = 0) -> list[HostBatch]:
    """The batches a synthetic job cycles through, made before timing: the task's own pool
    (TaskSpec.synthetic_pool, e.g. NCF's fresh positives per step), else the one spec batch, drawn from
    `seed` (a rank of a job on several devices: its shard index, so each rank has its own batch)."""
    if spec.synthetic_pool is not None:
        return spec.synthetic_pool(batch_size, train)
    return [synthetic_batch(spec, batch_size, seed)]


def concat_batches(batches: list[HostBatch]) -> HostBatch:
    """The batches one after another on the leading axis, as one batch: what a process feeding several
    devices at once (JAX's mesh) steps on, each device getting its own batch back as its shard."""
    if len(batches) == 1:
        return batches[0]
    first = batches[0]
    return HostBatch(
        {k: np.concatenate([b.inputs[k] for b in batches]) for k in first.inputs},
        {k: np.concatenate([b.targets[k] for b in batches]) for k in first.targets},
        sum(b.units for b in batches),
    )


class PoolSource:
    """The synthetic source: batches put on the device once, before timing, handed out in turn (usually
    one batch, reused at every step; a task with TaskSpec.synthetic_pool gets fresh ids each step).
    backends/skeleton.HostSource cycles its device pool with one too (its items carry their row counts and
    shapes)."""

    def __init__(self, batches: list[Any]) -> None:
        self.batches, self.at = batches, 0

    def next(self) -> Any:
        batch = self.batches[self.at]
        self.at = (self.at + 1) % len(self.batches)
        return batch

    def close(self) -> None:
        self.batches = []
