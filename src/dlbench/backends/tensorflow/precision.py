"""Turn a precision config (data) into TensorFlow/Keras settings, and read back what is in effect.

The mapping, with no branch on the precision's name:
  compute dtype  = precision.dtype on GPU, precision.cpu_dtype on CPU
  autocast       -> Keras policy "mixed_<dtype>" (float32 variables, reduced compute)
  no autocast    -> Keras policy "<dtype>" (the whole model, variables included, in that dtype)
  loss_scale     -> keras.optimizers.LossScaleOptimizer, only when the compute dtype is float16
  allow_tf32     -> tf.config.experimental.enable_tensor_float_32_execution (TF enables it by default,
                    so fp32 must switch it off to be true FP32)
The policy must be set before the model is built: Keras layers read the global policy when created.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from dlbench.config import PrecisionConfig


class TFPrecision:
    """Keras dtype policy, loss scaling and TF32 switch for one device."""

    def __init__(self, spec: PrecisionConfig, on_gpu: bool) -> None:
        self.spec = spec
        self.compute_dtype = spec.dtype if on_gpu else spec.cpu_dtype
        reduced = self.compute_dtype != "float32"
        if reduced and spec.autocast:
            self.policy = f"mixed_{self.compute_dtype}"
        else:
            self.policy = self.compute_dtype
        self.variable_dtype = "float32" if (spec.autocast or not reduced) else self.compute_dtype
        self.loss_scaling = spec.loss_scale == "dynamic" and self.compute_dtype == "float16"
        tf.config.experimental.enable_tensor_float_32_execution(spec.allow_tf32)
        keras.mixed_precision.set_global_policy(self.policy)

    def wrap_optimizer(self, opt: keras.optimizers.Optimizer) -> keras.optimizers.Optimizer:
        """Dynamic loss scaling keeps float16 gradients from underflowing; bf16/fp32 need none."""
        return keras.optimizers.LossScaleOptimizer(opt) if self.loss_scaling else opt

    def flags(self, opt: keras.optimizers.Optimizer | None) -> dict[str, Any]:
        if isinstance(opt, keras.optimizers.LossScaleOptimizer):
            loss_scale = f"dynamic (scale={float(opt.dynamic_scale.numpy()):g})"
        else:
            loss_scale = "none"
        return {
            "policy": keras.mixed_precision.global_policy().name,
            "autocast": f"mixed_{self.compute_dtype}" if self.policy.startswith("mixed_") else "off",
            "loss_scale": loss_scale,
            "tf32": bool(tf.config.experimental.tensor_float_32_execution_enabled()),
        }
