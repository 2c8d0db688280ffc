"""Keras networks, one module per task (classification.py, ...), found by the bench as
`models.<model.task>` (dlbench.backends.skeleton.load_family). A module provides
`build_model(cfg, float_dtype) -> keras.Model` (float inputs arrive as float_dtype; inputs in the task
spec's order, images NHWC) and may provide `infer(model, inputs) -> outputs`."""

from __future__ import annotations

import keras
import numpy as np


def trainable_params(model: keras.Model) -> int:
    """Trainable parameter count (BN moving statistics excluded, like torch's buffers)."""
    return int(sum(np.prod(v.shape) for v in model.trainable_weights))
