"""The task spec's optimizer in Keras, with its warm-up / decay as a LearningRateSchedule."""

from __future__ import annotations

import keras
from keras import ops

from dlbench.core.spec import OptimizerSpec


class SpecSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """OptimizerSpec.lr_factor in Keras ops, so it runs inside the traced step: linear warm-up, then
    constant or inverse square root."""

    def __init__(self, spec: OptimizerSpec) -> None:
        self.spec = spec

    def __call__(self, step):
        s = ops.cast(step, "float32") + 1.0
        w = float(max(self.spec.warmup_steps, 1))
        after = ops.sqrt(w / s) if self.spec.decay == "inverse_sqrt" else ops.ones_like(s)
        factor = ops.where(s < w, s / w, after) if self.spec.warmup_steps else after
        return self.spec.lr * factor

    def get_config(self) -> dict:
        return {"lr": self.spec.lr}


def make_optimizer(spec: OptimizerSpec) -> keras.optimizers.Optimizer:
    lr = spec.lr if (not spec.warmup_steps and spec.decay == "constant") else SpecSchedule(spec)
    if spec.kind == "adam":
        return keras.optimizers.Adam(
            learning_rate=lr, beta_1=spec.betas[0], beta_2=spec.betas[1], epsilon=spec.eps,
            weight_decay=spec.weight_decay or None,
        )  # fmt: skip
    if spec.kind != "sgd":
        raise NotImplementedError(f"the tf backend has no optimizer {spec.kind!r}")
    return keras.optimizers.SGD(
        learning_rate=lr,
        momentum=spec.momentum,
        nesterov=spec.nesterov,
        weight_decay=spec.weight_decay or None,
    )
