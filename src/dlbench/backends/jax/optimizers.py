"""The task spec's optimizer in Optax, written to update like torch.optim: weight decay added to the
gradient before momentum (torch's L2 form), SGD momentum buffers started at zero, and the spec's warm-up /
decay (OptimizerSpec.lr_factor) as an Optax schedule of the step count, traced into the step."""

from __future__ import annotations

import jax.numpy as jnp
import optax

from dlbench.core.spec import OptimizerSpec


def schedule(spec: OptimizerSpec) -> optax.Schedule | float:
    """The learning rate at optimizer step `count` (0-based): linear warm-up, then constant or 1/sqrt."""
    if not spec.warmup_steps and spec.decay == "constant":
        return spec.lr

    def lr(count: jnp.ndarray) -> jnp.ndarray:
        s = count.astype(jnp.float32) + 1.0
        w = float(max(spec.warmup_steps, 1))
        after = jnp.sqrt(w / s) if spec.decay == "inverse_sqrt" else jnp.ones_like(s)
        factor = jnp.where(s < w, s / w, after) if spec.warmup_steps else after
        return spec.lr * factor

    return lr


def make_optimizer(spec: OptimizerSpec) -> optax.GradientTransformation:
    """SGD (momentum, nesterov) or Adam as the task spec says."""
    lr = schedule(spec)
    if spec.kind == "adam":
        core = optax.adam(lr, b1=spec.betas[0], b2=spec.betas[1], eps=spec.eps)
    elif spec.kind == "sgd":
        core = optax.sgd(lr, momentum=spec.momentum or None, nesterov=spec.nesterov)
    else:
        raise NotImplementedError(f"the jax backend has no optimizer {spec.kind!r}")
    if spec.weight_decay:
        return optax.chain(optax.add_decayed_weights(spec.weight_decay), core)
    return core
