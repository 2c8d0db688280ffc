"""The task spec's optimizer as a Gluon Trainer, with its warm-up / decay as an MXNet LR scheduler."""

from __future__ import annotations

from typing import Any

from dlbench.backends.mxnet._compat import mx
from dlbench.core.spec import OptimizerSpec


class SpecScheduler(mx.lr_scheduler.LRScheduler):
    """OptimizerSpec.lr_factor for MXNet: num_update counts updates from 1."""

    def __init__(self, spec: OptimizerSpec) -> None:
        super().__init__(base_lr=spec.lr)
        self.spec = spec

    def __call__(self, num_update: int) -> float:
        return self.base_lr * self.spec.lr_factor(max(num_update - 1, 0))


def make_trainer(params: Any, spec: OptimizerSpec, multi_precision: bool) -> Any:
    """multi_precision: float32 master copies of float16-cast weights, as MXNet's fp16 training does."""
    args: dict[str, Any] = {"learning_rate": spec.lr, "multi_precision": multi_precision}
    if spec.weight_decay:
        args["wd"] = spec.weight_decay
    if spec.warmup_steps or spec.decay != "constant":
        args["lr_scheduler"] = SpecScheduler(spec)
    if spec.kind == "sgd":
        args["momentum"] = spec.momentum
        name = "nag" if spec.nesterov else "sgd"
    elif spec.kind == "adam":
        args.update(beta1=spec.betas[0], beta2=spec.betas[1], epsilon=spec.eps)
        name = "adam"
    else:
        raise NotImplementedError(f"the mxnet backend has no optimizer {spec.kind!r}")
    return mx.gluon.Trainer(params, name, args)
