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


def impossible(cfg: PrecisionLike, framework: str, device_kind: str, train: bool) -> str | None:
    """One line when these settings can only crash on this device kind (checked before a run is made),
    else None. The cases are the frameworks' own limits, named by framework, never guessed:

    - torch, training a pure float16 network (autocast off) with dynamic loss scaling: GradScaler refuses
      float16 gradients ("Attempting to unscale FP16 gradients") on every device, at the first step.
    - MXNet, training a network cast to bfloat16 (autocast off): its SGD update has no bfloat16 kernel.
    """
    plan = plan_precision(cfg, device_kind)
    key = "precision.dtype" if device_kind == "cuda" else "precision.cpu_dtype"
    pure = (
        f"precision.autocast=false with {key}={plan.compute_dtype} trains a pure {plan.compute_dtype} network"
    )
    if not train or plan.autocast:
        return None
    if framework == "torch" and plan.loss_scaling:
        return (
            f"{pure} with precision.loss_scale=dynamic, which torch cannot run: GradScaler refuses float16 "
            "gradients; use precision.loss_scale=none (pure float16), or precision.autocast=true (mixed)"
        )
    if framework == "mxnet" and plan.compute_dtype == "bfloat16":
        return (
            f"{pure}, which MXNet 1.9.1 cannot train (its SGD update has no bfloat16 kernel); use "
            "precision.autocast=true (mxnet.contrib.amp) for bfloat16 compute"
        )
    return None
