"""The task spec's loss kinds in PyTorch: `make_loss(spec)` -> loss(outputs, *targets) -> scalar tensor.
A new kind is one entry in LOSSES (and the same kind in the other backends' losses.py)."""

from __future__ import annotations

import functools
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


def _ssd_multibox(spec: TaskSpec) -> LossFn:
    from dlbench.backends.torch.models.detection import ssd_loss

    return lambda outputs, loc, labels: ssd_loss(*outputs, loc, labels)


def _label_smoothed_cross_entropy(spec: TaskSpec) -> LossFn:
    from dlbench.backends.torch.models.translation import label_smoothed_ce

    return functools.partial(label_smoothed_ce, eps=spec.loss_args["smoothing"])


LOSSES: dict[str, Callable[[TaskSpec], LossFn]] = {
    "softmax_cross_entropy": _softmax_cross_entropy,
    "sigmoid_binary_cross_entropy": _sigmoid_binary_cross_entropy,
    "ssd_multibox": _ssd_multibox,
    "label_smoothed_cross_entropy": _label_smoothed_cross_entropy,
}


def make_loss(spec: TaskSpec) -> LossFn:
    if spec.loss not in LOSSES:
        raise NotImplementedError(f"the torch backend has no loss {spec.loss!r} (backends/torch/losses.py)")
    return LOSSES[spec.loss](spec)
