"""The framework-neutral description of a workload: what goes in, what comes out, how it learns and what
its throughput counts. Backends build their network, loss, optimizer and synthetic data from it; the
parity check and FLOP counts read its inputs; the report reads its unit. No framework is imported here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FLOAT = "float"  # a TensorSpec dtype: floating point, in the job's precision (the plan decides the width)


@dataclass
class ModelConfig:
    """The keys every model family has. A family adds its own in a subclass (workloads/<task>/spec.py), which is
    registered as its own Hydra schema, so a key of another family is refused at composition."""

    name: str = "resnet50"
    task: str = "classification"
    batch_size: int = 64  # per-model default; schedule.batch_size overrides
    # An .npz of the family's framework-neutral weights (the names of its export_weights): every framework
    # starts from these numbers, in every mode (null: the framework's or the seed's initialisation).
    init_weights: str | None = None

    def check(self) -> list[tuple[bool, str]]:
        """(ok, one-line message) pairs that a schema cannot express; the family adds its own."""
        return [
            (self.batch_size >= 1, f"model.batch_size={self.batch_size}: use 1 or more"),
            (
                self.init_weights is None or os.path.isfile(self.init_weights),
                f"model.init_weights={self.init_weights}: no such file; give an .npz of the model's "
                "framework-neutral weights, or null",
            ),
        ]


@dataclass(frozen=True)
class TensorSpec:
    """One named input or target, per sample (the batch axis is implied, first).

    shape   per-sample shape; an axis given as a string is variable-length (e.g. "src_len"): its size
            for synthetic data and FLOP counts comes from TaskSpec.axes
    dtype   FLOAT (the job's precision decides float32/float16/bfloat16) or "int32" / "int64"
    low, high  value range: integers are drawn from [low, high); a float with low = high = None is
            standard normal (what normalized images look like), else uniform in [low, high)
    layout  axis names for inputs a framework may want in another order, e.g. "CHW" for an image
            (TensorFlow feeds "HWC"); None = take as is
    """

    shape: tuple[int | str, ...]
    dtype: str = FLOAT
    low: float | None = None
    high: float | None = None
    layout: str | None = None

    @property
    def is_float(self) -> bool:
        return self.dtype == FLOAT


@dataclass(frozen=True)
class OptimizerSpec:
    """The optimizer of the reference training, as data (each backend makes its framework's own).

    kind            "sgd" (momentum, nesterov) or "adam" (betas, eps)
    warmup_steps    linear warm-up from 0 over these steps; 0 = none
    decay           after warm-up: "constant" or "inverse_sqrt" (lr * sqrt(warmup / step), the
                    Transformer schedule)
    """

    kind: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.0
    nesterov: bool = False
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    warmup_steps: int = 0
    decay: str = "constant"

    def lr_factor(self, step: int) -> float:
        """Multiplier of `lr` at optimizer step `step` (0-based), the same in every framework."""
        s = step + 1
        if self.warmup_steps and s < self.warmup_steps:
            return s / self.warmup_steps
        if self.decay == "inverse_sqrt" and self.warmup_steps:
            return (self.warmup_steps / s) ** 0.5
        return 1.0


def count_batch(host: Mapping[str, np.ndarray]) -> int:
    """Units = samples in the batch (the first axis of any array): images, interactions, vectors."""
    return int(len(next(iter(host.values()))))


def count_nonzero(name: str) -> Callable[[Mapping[str, np.ndarray]], int]:
    """Units = non-padding entries (id != 0) of array `name`, e.g. the target tokens of a translation
    batch (fairseq's ntokens). Counted with numpy on the host copy, never on the device."""

    def count(host: Mapping[str, np.ndarray]) -> int:
        return int(np.count_nonzero(host[name]))

    count.__name__ = f"count_nonzero_{name}"
    return count


@dataclass(frozen=True)
class TaskSpec:
    """A workload, framework-neutral. Built from the job's model config by the task's `spec(cfg)`.

    task        the task's registry name; its package, workloads/<task>/, holds a family per framework
    inputs      what the model is called with, in call order (model(*inputs))
    targets     what the loss compares the model's outputs with, in order (loss(outputs, *targets))
    loss        a loss kind every backend implements in backends/<fw>/losses.py, e.g.
                "softmax_cross_entropy"; loss_args parametrize it (e.g. label_smoothing, ignore_index)
    metric      the quality metric kind the workload's eval computes on numpy outputs, e.g. "top1"
    unit        the throughput unit: "images", "target tokens", "samples"
    count_units how many units a batch holds, from its host (numpy) arrays keyed by input/target name
    axes        size of each variable-length axis for synthetic batches and FLOP counts
    synthetic_targets  optional (rng, batch_size) -> {target name: array}: targets that must be made
                like real ones rather than drawn at random (SSD's boxes encoded to the default boxes)
    batches     optional (job, spec) -> iterator of HostBatch: a task whose batches vary step to step
                (token-count batches of translation) makes them itself, for synthetic and real data
                (except mode=converge, which reads its data format's in-memory source)
    infer_unit  optional unit of an inference step when it differs (translation: "generated tokens")
    synthetic_pool  optional (batch_size, train) -> list of HostBatch: distinct synthetic batches made
                once, before timing, and cycled step after step (NCF: fresh positives every step);
                default: one batch from the spec, reused at every step
    device_negatives  mode=train only: a batch holds positives (the inputs, no targets) and the train
                step draws this many random negatives per positive on the device with the framework's
                RNG, labels included (the family's `add_negatives(inputs, spec)`); 0 = none
    """

    task: str
    inputs: dict[str, TensorSpec]
    targets: dict[str, TensorSpec]
    loss: str
    metric: str
    optimizer: OptimizerSpec
    unit: str
    count_units: Callable[[Mapping[str, np.ndarray]], int] = count_batch
    loss_args: dict[str, Any] = field(default_factory=dict)
    axes: dict[str, int] = field(default_factory=dict)
    synthetic_targets: Callable[[np.random.Generator, int], dict[str, np.ndarray]] | None = None
    batches: Callable[[Any, TaskSpec], Iterator[Any]] | None = None
    infer_unit: str | None = None
    synthetic_pool: Callable[[int, bool], list[Any]] | None = None
    device_negatives: int = 0

    def sample_shape(self, tensor: TensorSpec) -> tuple[int, ...]:
        """The per-sample shape with every variable-length axis at its synthetic size."""
        return tuple(self.axes[a] if isinstance(a, str) else a for a in tensor.shape)
