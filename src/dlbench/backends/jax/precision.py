"""Translate the precision plan (dlbench.core.precision) into JAX, and read back what really ran.

JAX has no autocast: a Flax layer computes in its `dtype` and keeps its weights in `param_dtype`, so the
plan becomes the network's two dtypes (mixed precision = reduced `dtype`, float32 `param_dtype`; a pure
reduced network has both reduced). float16 gets dynamic loss scaling (Flax's DynamicScale); TF32 is
`jax_default_matmul_precision` ("highest" = true FP32, "tensorfloat32" for tf32), which XLA applies to
every float32 dot and convolution. A network computing in float16/bfloat16 leaves it at "default": its dots
have no float32 operands, and "highest" on float16 operands asks XLA's GPU backend for the F16_F16_F32 dot
algorithm, which some of its emitters refuse ("Unsupported dot precision algorithm", in greedy decoding's
one-query attention on an H200).

What ran is read from the traced step: an interceptor on every weight-carrying layer's `__call__` records
the dtype of its output while the first step is traced, which is the program jax.jit compiles.
"""

from __future__ import annotations

import contextlib
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax.training.dynamic_scale import DynamicScale

from dlbench.backends.skeleton import LayerRecord
from dlbench.core.precision import PrecisionPlan

DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}
# Weight-carrying layers that compute (normalization layers are not offered: kept float32 by design)
COMPUTING = (nn.Conv, nn.ConvTranspose, nn.Dense, nn.DenseGeneral, nn.Embed)
LOOKUPS = (nn.Embed,)


class JaxPrecision:
    """The network's dtypes, the loss scale and the matmul precision for one device kind."""

    def __init__(self, plan: PrecisionPlan) -> None:
        self.plan = plan
        self.compute_dtype = DTYPES[plan.compute_dtype]
        self.param_dtype = DTYPES[plan.param_dtype]
        self.matmul_precision = matmul_precision(plan)
        jax.config.update("jax_default_matmul_precision", self.matmul_precision)

    def loss_scale(self) -> DynamicScale | None:
        """Dynamic loss scaling for float16 compute (its gradients underflow), else None."""
        return DynamicScale() if self.plan.loss_scaling else None

    def flags(self, scale: DynamicScale | None) -> dict[str, Any]:
        precision = jax.config.jax_default_matmul_precision
        mixed = self.plan.autocast
        return {
            "autocast": f"flax dtype={self.plan.compute_dtype}, param_dtype=float32" if mixed else "off",
            "loss_scale": f"dynamic (scale={float(scale.scale):g})" if scale is not None else "none",
            "matmul_precision": str(precision),
            "tf32_matmul": precision == "tensorfloat32",
        }


def matmul_precision(plan: PrecisionPlan) -> str:
    """XLA's precision for float32 dots and convolutions under this plan (see the module docstring)."""
    if plan.tf32:
        return "tensorfloat32"
    return "highest" if plan.compute_dtype == "float32" else "default"


def dtype_name(dtype: Any) -> str:
    return jnp.dtype(dtype).name


class LayerProbe:
    """Records, while a step is traced (or run eagerly) inside `watch()`, the output dtype of the first and
    last weight-carrying layers in execution order. Active until the first step has been seen."""

    def __init__(self) -> None:
        self.record = LayerRecord()
        self.active = True

    def _intercept(self, next_fun, args, kwargs, context):
        out = next_fun(*args, **kwargs)
        module = context.module
        if context.method_name == "__call__" and isinstance(module, COMPUTING):
            t = out[0] if isinstance(out, tuple) else out
            if hasattr(t, "dtype"):
                name = "/".join(module.scope.path) if module.scope else type(module).__name__
                self.record.see(name, type(module).__name__, dtype_name(t.dtype), isinstance(module, LOOKUPS))
        return out

    def remove(self) -> None:
        """Stop recording (the interceptor is only installed inside `watch()`, so nothing else to undo)."""
        self.active = False

    def watch(self) -> contextlib.AbstractContextManager:
        """The interceptor while active (the first step); afterwards nothing."""
        if not self.active:
            return contextlib.nullcontext()
        return nn.intercept_methods(self._intercept)
