"""The task spec's loss kinds in Gluon: `make_loss(spec)` -> a HybridBlock called as
loss(*outputs, *targets) -> per-sample losses (Trainer.step(batch_size) averages them). Gluon blocks take
NDArrays as positional arguments, so a model with several outputs has them spread before the targets.
These are the generic kinds; a workload with a loss of its own gives it in its family's `loss(spec)`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlbench.backends.mxnet._compat import mx
from dlbench.core.spec import TaskSpec


def _softmax_cross_entropy(spec: TaskSpec) -> Any:
    return mx.gluon.loss.SoftmaxCrossEntropyLoss()


def _sigmoid_binary_cross_entropy(spec: TaskSpec) -> Any:
    return mx.gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)


LOSSES: dict[str, Callable[[TaskSpec], Any]] = {
    "softmax_cross_entropy": _softmax_cross_entropy,
    "sigmoid_binary_cross_entropy": _sigmoid_binary_cross_entropy,
}


def make_loss(spec: TaskSpec) -> Any:
    if spec.loss not in LOSSES:
        raise NotImplementedError(f"the mxnet backend has no loss {spec.loss!r} (backends/mxnet/losses.py)")
    return LOSSES[spec.loss](spec)
