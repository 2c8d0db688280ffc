"""The task spec's loss kinds in Gluon: `make_loss(spec)` -> a HybridBlock called as
loss(*outputs, *targets) -> per-sample losses (Trainer.step(batch_size) averages them). Gluon blocks take
NDArrays as positional arguments, so a model with several outputs has them spread before the targets.
A new kind is one entry in LOSSES (and the same kind in the other backends' losses.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlbench.backends.mxnet._compat import mx
from dlbench.core.spec import TaskSpec


def _softmax_cross_entropy(spec: TaskSpec) -> Any:
    return mx.gluon.loss.SoftmaxCrossEntropyLoss()


def _sigmoid_binary_cross_entropy(spec: TaskSpec) -> Any:
    return mx.gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)


def _ssd_multibox(spec: TaskSpec) -> Any:
    from dlbench.backends.mxnet.models.detection import SSDLoss

    return SSDLoss()


def _label_smoothed_cross_entropy(spec: TaskSpec) -> Any:
    from dlbench.backends.mxnet.models.translation import LabelSmoothedCE

    return LabelSmoothedCE(spec.loss_args["smoothing"])


LOSSES: dict[str, Callable[[TaskSpec], Any]] = {
    "softmax_cross_entropy": _softmax_cross_entropy,
    "sigmoid_binary_cross_entropy": _sigmoid_binary_cross_entropy,
    "ssd_multibox": _ssd_multibox,
    "label_smoothed_cross_entropy": _label_smoothed_cross_entropy,
}


def make_loss(spec: TaskSpec) -> Any:
    if spec.loss not in LOSSES:
        raise NotImplementedError(f"the mxnet backend has no loss {spec.loss!r} (backends/mxnet/losses.py)")
    return LOSSES[spec.loss](spec)
