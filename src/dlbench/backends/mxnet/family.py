"""The MXNet family base: what a workload's mxnet.py (workloads/<task>/mxnet.py) provides, with defaults.
A workload subclasses MXNetFamily once and overrides what differs from a plain classifier."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbench.backends.mxnet.losses import make_loss
from dlbench.core.spec import ModelConfig, TaskSpec


class MXNetFamily:
    """One workload in Gluon. `build_model` is required; the rest has a classifier's default."""

    framework = "mxnet"
    # True when `loss` returns the batch's mean already (the trainer then steps with 1, not the batch size)
    loss_averaged = False

    def build_model(self, cfg: ModelConfig, train: bool = True) -> Any:
        """The HybridBlock, uninitialized; it is called with the task spec's inputs in order."""
        raise NotImplementedError(f"{type(self).__name__}.build_model")

    def initialize(self, net: Any, cfg: ModelConfig, ctx: Any) -> None:
        """Initialize the parameters on `ctx` (default: Gluon's own initializers)."""
        net.initialize(ctx=ctx)

    def infer(self, net: Any, inputs: tuple) -> Any:
        """One inference step's outputs (default: the forward pass)."""
        return net(*inputs)

    def loss(self, spec: TaskSpec) -> Any:
        """A HybridBlock called as loss(outputs, *targets): the spec's generic loss kind unless the
        workload has its own."""
        return make_loss(spec)

    def dali_source(self, bench: Any) -> Any:
        """The real-data source when the dataset is read by DALI (default: the image classification one)."""
        from dlbench.backends.mxnet.dali_source import DaliSource

        return DaliSource(bench.job, bench.ctx, bench.prec.plan.input_dtype)

    def run_facts(self, net: Any) -> dict[str, Any]:
        """Facts about the network as built (e.g. its attention kernel), recorded with the run."""
        return {}

    def load_seeded_weights(self, net: Any, cfg: ModelConfig, seed: int) -> bool:
        """Any mode: the seed's framework-neutral initial weights; False where the workload has none."""
        return False

    def add_negatives(self, inputs: tuple, spec: TaskSpec) -> tuple[tuple, tuple]:
        """A train step's full batch from positives, drawn on the device (TaskSpec.device_negatives)."""
        raise NotImplementedError(f"{type(self).__name__} draws no negatives")

    def export_weights(self, net: Any) -> dict[str, np.ndarray]:
        """The weights under framework-neutral names (the cross-framework tests exchange them)."""
        raise NotImplementedError(f"{type(self).__name__}.export_weights")

    def load_weights(self, net: Any, weights: dict[str, np.ndarray]) -> None:
        """Load weights given under the neutral names of `export_weights`."""
        raise NotImplementedError(f"{type(self).__name__}.load_weights")


def trainable_params(net: Any) -> int:
    """Parameters that receive gradients (BatchNorm running statistics excluded, as in torch)."""
    total = 0
    for p in net.collect_params().values():
        if p.grad_req != "null":
            size = 1
            for d in p.shape:
                size *= d
            total += size
    return total
