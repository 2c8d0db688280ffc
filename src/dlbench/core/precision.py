"""The precision plan: what a PrecisionConfig means on a device kind, decided once for every backend.

Each backend translates the plan into its own switches (torch autocast + GradScaler, a Keras dtype
policy + LossScaleOptimizer, mxnet.contrib.amp or a network cast) and never re-derives it, so "fp16 on
a GPU, bf16 on a CPU" and "loss scaling only for float16" mean the same in every framework and in the
data pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

FLOAT32 = "float32"


class PrecisionLike(Protocol):
    """The fields of dlbench.config.PrecisionConfig the plan reads (core imports no config)."""

    name: str
    autocast: bool
    dtype: str
    cpu_dtype: str
    loss_scale: str
    allow_tf32: bool


@dataclass(frozen=True)
class PrecisionPlan:
    """What a job computes in, on the device it really runs on.

    compute_dtype  the dtype convolutions and matrix multiplies produce
    param_dtype    the dtype of the weights: float32 under autocast (mixed precision) or for fp32,
                   the compute dtype for a pure reduced-precision network
    autocast       mixed precision: reduced compute, float32 weights
    loss_scaling   dynamic loss scaling: only float16 gradients underflow
    tf32           TF32 tensor-core math for float32 matmul/conv (Ampere+ GPUs; off = true FP32)
    input_dtype    what a data pipeline emits for float inputs: float16 when the job computes in
                   float16 (halves the bytes; autocast would cast to it anyway), else float32 (DALI has
                   no bfloat16: the backend casts to param_dtype where that differs)
    """

    name: str
    device_kind: str
    compute_dtype: str
    param_dtype: str
    autocast: bool
    loss_scaling: bool
    tf32: bool
    input_dtype: str


def plan_precision(cfg: PrecisionLike, device_kind: str) -> PrecisionPlan:
    """The plan for `cfg` on a device of kind "cuda" (any GPU) or "cpu"."""
    if device_kind not in ("cuda", "cpu"):
        raise ValueError(f"device kind {device_kind!r}: use cuda or cpu")
    compute = cfg.dtype if device_kind == "cuda" else cfg.cpu_dtype
    reduced = compute != FLOAT32
    autocast = cfg.autocast and reduced
    return PrecisionPlan(
        name=cfg.name,
        device_kind=device_kind,
        compute_dtype=compute,
        param_dtype=FLOAT32 if (autocast or not reduced) else compute,
        autocast=autocast,
        loss_scaling=cfg.loss_scale == "dynamic" and compute == "float16",
        tf32=bool(cfg.allow_tf32),
        input_dtype="float16" if compute == "float16" else FLOAT32,
    )
