"""Gluon networks, one module per task family (classification, ...); `build_model` picks by name."""

from dlbench.backends.mxnet.models.classification import build_model, first_conv, initialize, trainable_params

__all__ = ["build_model", "first_conv", "initialize", "trainable_params"]
