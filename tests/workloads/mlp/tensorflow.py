"""TEST ONLY: the 2-layer MLP of tests.workloads.mlp.spec (one logit per vector)."""

from __future__ import annotations

import keras

from dlbench.backends.tensorflow.family import TFFamily
from tests.workloads.mlp.spec import MLPConfig


def build_model(cfg: MLPConfig, float_dtype: str = "float32") -> keras.Model:
    x = keras.Input(shape=(cfg.features,), dtype=float_dtype, name="x")
    h = keras.layers.Dense(cfg.hidden, activation="relu")(x)
    return keras.Model(x, keras.layers.Dense(1)(h), name="mlp")


class MLPTF(TFFamily):
    """TEST ONLY: the 2-layer MLP, in TensorFlow."""

    build_model = staticmethod(build_model)
