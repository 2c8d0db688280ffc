"""Keras networks, one module per task family (classification, ...); `build_model` picks by name."""

from dlbench.backends.tensorflow.models.classification import build_model, trainable_params

__all__ = ["build_model", "trainable_params"]
