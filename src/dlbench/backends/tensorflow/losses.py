"""The task spec's loss kinds in TensorFlow: `make_loss(spec)` -> loss(outputs, *targets) -> scalar.
Computed in float32 (the models emit float32 logits under mixed precision). A new kind is one entry in
LOSSES (and the same kind in the other backends' losses.py)."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from dlbench.core.spec import TaskSpec

LossFn = Callable[..., tf.Tensor]


def _softmax_cross_entropy(spec: TaskSpec) -> LossFn:
    def loss(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))

    return loss


def _sigmoid_binary_cross_entropy(spec: TaskSpec) -> LossFn:
    def loss(logits: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        logits = tf.reshape(tf.cast(logits, tf.float32), [-1])
        labels = tf.reshape(tf.cast(target, tf.float32), [-1])
        return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))

    return loss


LOSSES: dict[str, Callable[[TaskSpec], LossFn]] = {
    "softmax_cross_entropy": _softmax_cross_entropy,
    "sigmoid_binary_cross_entropy": _sigmoid_binary_cross_entropy,
}


def make_loss(spec: TaskSpec) -> LossFn:
    if spec.loss not in LOSSES:
        raise NotImplementedError(f"the tf backend has no loss {spec.loss!r} (backends/tensorflow/losses.py)")
    return LOSSES[spec.loss](spec)
