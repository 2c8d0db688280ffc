"""The PyTorch family base: what a workload's torch.py (workloads/<task>/torch.py) provides, with defaults.

A workload subclasses TorchFamily once and overrides what differs from a plain classifier; the bench calls
only these methods, so the contract is written here, not probed for with getattr.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from dlbench.backends.torch.losses import LossFn, make_loss
from dlbench.core.spec import ModelConfig, TaskSpec


class TorchFamily:
    """One workload in PyTorch. `build_model` is required; every other method has the default a
    classifier needs."""

    framework = "torch"

    def build_model(self, cfg: ModelConfig) -> nn.Module:
        """The network for this model config (float32, on the CPU; the bench moves and casts it)."""
        raise NotImplementedError(f"{type(self).__name__}.build_model")

    def infer(self, model: nn.Module, inputs: tuple) -> Any:
        """One inference step's outputs (default: the forward pass; e.g. greedy decoding overrides)."""
        return model(*inputs)

    def loss(self, spec: TaskSpec) -> LossFn:
        """loss(outputs, *targets) -> scalar: the spec's generic loss kind unless the workload has its own."""
        return make_loss(spec)

    def dali_source(self, bench: Any) -> Any:
        """The real-data source when the dataset is read by DALI (default: the image classification one)."""
        from dlbench.backends.torch.dali_source import DaliSource

        return DaliSource(bench.job, bench.dev, bench.memory_format, bench.prec)

    def run_facts(self, model: nn.Module) -> dict[str, Any]:
        """Facts about the network as built (e.g. its attention kernel), recorded with the run."""
        return {}

    def load_seeded_weights(self, model: nn.Module, cfg: ModelConfig, seed: int) -> bool:
        """Any mode: put the seed's framework-neutral initial weights in; False where the workload
        has none (the framework's seeded RNG initialises it)."""
        return False

    def add_negatives(self, inputs: tuple, spec: TaskSpec) -> tuple[tuple, tuple]:
        """A train step's full batch from positives, drawn on the device (TaskSpec.device_negatives)."""
        raise NotImplementedError(f"{type(self).__name__} draws no negatives")

    def export_weights(self, model: nn.Module) -> dict[str, np.ndarray]:
        """The weights under framework-neutral names (the cross-framework tests exchange them)."""
        raise NotImplementedError(f"{type(self).__name__}.export_weights")

    def load_weights(self, model: nn.Module, weights: dict[str, np.ndarray]) -> None:
        """Load weights given under the neutral names of `export_weights`."""
        raise NotImplementedError(f"{type(self).__name__}.load_weights")
