"""Translate the precision plan (dlbench.core.precision) into TensorFlow/Keras settings, and read back
what is really in effect from real layer outputs.

The translation, with no branch on the precision's name:
  autocast       -> Keras policy "mixed_<compute>" (float32 variables, reduced compute)
  no autocast    -> Keras policy "<compute>" (the whole model, variables included, in that dtype)
  loss_scaling   -> keras.optimizers.LossScaleOptimizer (SparseLossScaleOptimizer: see its docstring)
  tf32           -> tf.config.experimental.enable_tensor_float_32_execution (TF enables it by default,
                    so fp32 must switch it off to be true FP32)
The policy must be set before the model is built: Keras layers read the global policy when created.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from dlbench.backends.skeleton import LayerRecord
from dlbench.core.precision import PrecisionPlan

NORMS = tuple(
    getattr(keras.layers, n)
    for n in ("BatchNormalization", "LayerNormalization", "GroupNormalization", "UnitNormalization")
    if hasattr(keras.layers, n)
)
LOOKUPS = (keras.layers.Embedding,)


class SparseLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras' dynamic loss scaling, with the finiteness check of a sparse gradient (tf.IndexedSlices: an
    embedding table's rows that a batch looked up) made on its rows only.

    Keras checks one with `ops.isfinite`, which densifies it: a bool tensor of the whole table's shape filled
    with True, the rows' verdicts written in by `tf.tensor_scatter_nd_update`. TensorFlow has no GPU kernel
    for that op on bools, so outside XLA it runs on the host: every step copies the looked-up rows' verdicts
    (NCF at 2^20 samples: about 400 MB of bools over its four tables) to the host and scatters them there,
    and the GPU waits (under XLA the densified check runs on the device). The entries it leaves out are
    zeros, always finite, so checking the rows alone gives the same verdict."""

    def check_finite(self, grads: list) -> Any:
        return super().check_finite([g.values if isinstance(g, tf.IndexedSlices) else g for g in grads])


class TFPrecision:
    """Keras dtype policy, loss scaling and TF32 switch for one device."""

    def __init__(self, plan: PrecisionPlan) -> None:
        self.plan = plan
        self.compute_dtype = plan.compute_dtype
        self.policy = f"mixed_{plan.compute_dtype}" if plan.autocast else plan.compute_dtype
        self.variable_dtype = plan.param_dtype
        self.loss_scaling = plan.loss_scaling
        tf.config.experimental.enable_tensor_float_32_execution(plan.tf32)
        keras.mixed_precision.set_global_policy(self.policy)

    def wrap_optimizer(self, opt: keras.optimizers.Optimizer) -> keras.optimizers.Optimizer:
        """Dynamic loss scaling keeps float16 gradients from underflowing; bf16/fp32 need none."""
        return SparseLossScaleOptimizer(opt) if self.loss_scaling else opt

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


def _weighted_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """Leaf layers that own weights (conv, dense, embedding, attention...), normalization excluded."""
    out = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, NORMS) or not layer.weights or list(layer._flatten_layers(include_self=False)):
            continue
        out.append(layer)
    return out


class LayerProbe:
    """Wraps the `call` of every weight-carrying layer so that, while the step's tf.function is traced,
    the dtype of each layer's real output tensor (what the device kernels produce) is recorded in
    execution order. Works for functional and subclassed models alike; `remove()` restores the layers'
    own `call` once a step has been traced, so nothing stays in later traces."""

    def __init__(self, model: keras.Model) -> None:
        self.record = LayerRecord()
        self._wrapped = []
        for layer in _weighted_layers(model):
            object.__setattr__(layer, "call", self._wrap(layer, layer.call))
            self._wrapped.append(layer)

    def _wrap(self, layer: keras.layers.Layer, call: Any) -> Any:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            out = call(*args, **kwargs)
            first = tf.nest.flatten(out)[0] if tf.nest.flatten(out) else None
            if first is not None and hasattr(first, "dtype"):
                dtype = keras.backend.standardize_dtype(first.dtype)
                self.record.see(layer.name, type(layer).__name__, dtype, isinstance(layer, LOOKUPS))
            return out

        return recorded

    @property
    def active(self) -> bool:
        return bool(self._wrapped)

    def remove(self) -> None:
        for layer in self._wrapped:
            object.__delattr__(layer, "call")
        self._wrapped.clear()
