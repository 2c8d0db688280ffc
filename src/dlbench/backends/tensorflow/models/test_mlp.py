"""TEST ONLY: the 2-layer MLP of dlbench.tasks.test_mlp (one logit per vector)."""

from __future__ import annotations

import keras

from dlbench.tasks.test_mlp import MLPConfig


def build_model(cfg: MLPConfig, float_dtype: str = "float32") -> keras.Model:
    x = keras.Input(shape=(cfg.features,), dtype=float_dtype, name="x")
    h = keras.layers.Dense(cfg.hidden, activation="relu")(x)
    return keras.Model(x, keras.layers.Dense(1)(h), name="mlp")
