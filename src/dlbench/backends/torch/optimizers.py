"""The task spec's optimizer in PyTorch, in the implementation framework.optimizer_impl chooses."""

from __future__ import annotations

import torch
from torch import nn

from dlbench.core.spec import OptimizerSpec


def resolve_optimizer_impl(requested: str, device: torch.device) -> str:
    """auto -> fused on CUDA. With fp16 loss scaling, a non-fused optimizer makes GradScaler read the
    overflow flag on the host (`.item()`) every step: the GPU drains and idles while the host queues the
    next step and fetches the next batch. The fused kernel takes the flag on the GPU instead."""
    if requested == "auto":
        return "fused" if device.type == "cuda" else "foreach"
    return requested


def make_optimizer(model: nn.Module, impl: str, spec: OptimizerSpec) -> torch.optim.Optimizer:
    """SGD (momentum, nesterov) or Adam as the task spec says, in the `impl` kernel (fused / foreach)."""
    kernel = {"fused": impl == "fused", "foreach": impl == "foreach" or None}
    if spec.kind == "adam":
        return torch.optim.Adam(
            model.parameters(),
            lr=spec.lr,
            betas=spec.betas,
            eps=spec.eps,
            weight_decay=spec.weight_decay,
            **kernel,
        )
    if spec.kind != "sgd":
        raise NotImplementedError(f"the torch backend has no optimizer {spec.kind!r}")
    opt = torch.optim.SGD(
        model.parameters(),
        lr=spec.lr,
        momentum=spec.momentum,
        nesterov=spec.nesterov,
        weight_decay=spec.weight_decay,
        **kernel,
    )
    if impl == "fused" and spec.momentum:
        prime_momentum(opt)
    return opt


def make_schedule(
    opt: torch.optim.Optimizer, spec: OptimizerSpec
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The spec's warm-up / decay as a LambdaLR stepped once per step; None for a constant rate."""
    if not spec.warmup_steps and spec.decay == "constant":
        return None
    return torch.optim.lr_scheduler.LambdaLR(opt, spec.lr_factor)


def prime_momentum(opt: torch.optim.Optimizer) -> None:
    """Start every momentum buffer at zero. torch's fused SGD (seen in 2.11 on CUDA and 2.14 on CPU)
    fills a missing buffer from the gradient even on a step GradScaler skips for overflow, and fp16's
    first steps always overflow: inf momentum, NaN or zero loss ever after. A zero buffer is what the
    first step makes anyway (buf = 0.9 * 0 + g), so the training is unchanged (tests compare foreach)."""
    for group in opt.param_groups:
        for p in group["params"]:
            opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
