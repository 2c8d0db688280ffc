"""The task spec's loss kinds in PyTorch: `make_loss(spec)` -> loss(outputs, *targets) -> scalar tensor.
These are the generic kinds; a workload with a loss of its own gives it in its family's `loss(spec)`."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn import functional as F

from dlbench.core.spec import TaskSpec

LossFn = Callable[..., torch.Tensor]


def _softmax_cross_entropy(spec: TaskSpec) -> LossFn:
    return torch.nn.CrossEntropyLoss(**spec.loss_args)


def _sigmoid_binary_cross_entropy(spec: TaskSpec) -> LossFn:
    def loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logits.reshape(-1).float(), target.reshape(-1).float())

    return loss


LOSSES: dict[str, Callable[[TaskSpec], LossFn]] = {
    "softmax_cross_entropy": _softmax_cross_entropy,
    "sigmoid_binary_cross_entropy": _sigmoid_binary_cross_entropy,
}


def make_loss(spec: TaskSpec) -> LossFn:
    if spec.loss not in LOSSES:
        raise NotImplementedError(f"the torch backend has no loss {spec.loss!r} (backends/torch/losses.py)")
    return LOSSES[spec.loss](spec)
