"""The task spec's loss kinds in JAX: `make_loss(spec)` -> loss(outputs, *targets) -> scalar, in float32
whatever the compute dtype (the logits are cast first, as the other backends do). A workload with a loss of
its own gives it in its family's `loss(spec)`."""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import optax

from dlbench.core.spec import TaskSpec

LossFn = Callable[..., jnp.ndarray]


def _softmax_cross_entropy(spec: TaskSpec) -> LossFn:
    smoothing = float(spec.loss_args.get("label_smoothing", 0.0))

    def loss(logits: jnp.ndarray, labels: jnp.ndarray) -> jnp.ndarray:
        logits = logits.astype(jnp.float32)
        if not smoothing:
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        onehot = optax.smooth_labels(jnp.eye(logits.shape[-1])[labels], smoothing)
        return optax.softmax_cross_entropy(logits, onehot).mean()

    return loss


def _sigmoid_binary_cross_entropy(spec: TaskSpec) -> LossFn:
    def loss(logits: jnp.ndarray, target: jnp.ndarray) -> jnp.ndarray:
        x, y = logits.reshape(-1).astype(jnp.float32), target.reshape(-1).astype(jnp.float32)
        return optax.sigmoid_binary_cross_entropy(x, y).mean()

    return loss


LOSSES: dict[str, Callable[[TaskSpec], LossFn]] = {
    "softmax_cross_entropy": _softmax_cross_entropy,
    "sigmoid_binary_cross_entropy": _sigmoid_binary_cross_entropy,
}


def make_loss(spec: TaskSpec) -> LossFn:
    if spec.loss not in LOSSES:
        raise NotImplementedError(f"the jax backend has no loss {spec.loss!r} (backends/jax/losses.py)")
    return LOSSES[spec.loss](spec)
