"""NeuMF in Keras 3 (functional API), layer for layer the torch backend's (DLE's neumf.py).

Same initialisation scheme as DLE / the torch backend: embeddings N(0, 0.01), MLP kernels
Glorot-uniform, the final kernel LeCun-uniform, biases U(+-1/sqrt(fan_in)) (torch's default, which
DLE keeps). Dropout after each MLP ReLU as in DLE, off by default for benchmarking.

Layer names are the framework-neutral ones of dlbench.workloads.recommendation.layout (mf_user, ..., mlp0,
..., final). Under a mixed-precision policy the final dense runs in the compute dtype and its
output is cast to float32 by "logits_f32" (Keras' advice: keep the last activation in float32), as
the classification heads do; the task's loss (backends/tensorflow/losses.py,
`sigmoid_binary_cross_entropy`) then applies the sigmoid in float32, in the numerically safe form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf
from keras import layers, ops

from dlbench.backends.tensorflow.family import TFFamily
from dlbench.core.spec import TaskSpec
from dlbench.workloads.recommendation.layout import (
    EMBEDDINGS,
    MF_DIM,
    MLP_LAYERS,
    check_weights,
    mlp_dense,
    weight_shapes,
)
from dlbench.workloads.recommendation.spec import RecommendationConfig, table_sizes


def _torch_bias(fan_in: int) -> keras.initializers.Initializer:
    bound = 1.0 / math.sqrt(fan_in)
    return keras.initializers.RandomUniform(-bound, bound)


def build_model(cfg: RecommendationConfig, float_dtype: str = "float32") -> keras.Model:
    """NeuMF for the family config (`float_dtype` is unused: the inputs are ids)."""
    return _neumf(*table_sizes(cfg), cfg.factors, cfg.mlp_layers, cfg.dropout)


def _neumf(
    num_users: int,
    num_items: int,
    mf_dim: int = MF_DIM,
    mlp_layers: Sequence[int] = MLP_LAYERS,
    dropout: float = 0.0,
) -> keras.Model:
    """Called as model([users, items]) (ids, shape (N,): a list in the task's input order, as the TF bench
    passes several inputs); output float32 logits (N, 1). Build under the intended Keras dtype policy (layers
    read it when created). The inputs are int64 (Keras casts other ids to them): TF's GPU kernels of int32
    Less and AddV2 (Keras's negative-index fix-up in every lookup) and int32 Reshape (the gradient's indices)
    keep their tensors in host memory, so with int32 ids outside XLA each table's ids went to the host and
    back every step."""
    shapes = weight_shapes(num_users, num_items, mf_dim, mlp_layers)
    users = keras.Input(shape=(), dtype="int64", name="user")
    items = keras.Input(shape=(), dtype="int64", name="item")
    emb = {
        name: layers.Embedding(
            *shapes[f"{name}.embedding"],
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.01),
            name=name,
        )
        for name in EMBEDDINGS
    }
    gmf = layers.Multiply(name="gmf")([emb["mf_user"](users), emb["mf_item"](items)])
    x = layers.Concatenate(name="mlp_concat")([emb["mlp_user"](users), emb["mlp_item"](items)])
    for name, fan_in, width in mlp_dense(mlp_layers):
        x = layers.Dense(
            width,
            activation="relu",
            kernel_initializer=keras.initializers.GlorotUniform(),
            bias_initializer=_torch_bias(fan_in),
            name=name,
        )(x)
        if dropout:
            x = layers.Dropout(dropout)(x)
    x = layers.Concatenate(name="final_concat")([gmf, x])
    x = layers.Dense(
        1,
        kernel_initializer=keras.initializers.LecunUniform(),
        bias_initializer=_torch_bias(x.shape[-1]),
        name="final",
    )(x)
    logits = layers.Activation("linear", dtype="float32", name="logits_f32")(x)
    return keras.Model([users, items], logits, name="neumf")


def add_negatives(inputs: tuple, spec: TaskSpec) -> tuple[tuple, tuple]:
    """A mode=train step's batch from its positives (users, items), traced into the step's tf.function so
    it runs on the device every call, as DLE's training loop does: `spec.device_negatives` negatives per
    positive, each the positive's user with an item drawn uniformly by TensorFlow's RNG (a drawn item may
    be one of the user's positives: tolerated, as in DLE); labels 1 for the positives, then 0. The ids are
    joined as int64: TF has no GPU kernel of int32 ConcatV2 but one that keeps its tensors in host memory."""
    users, items = (tf.cast(ids, tf.int64) for ids in inputs)
    k, num_items = spec.device_negatives, int(spec.inputs["item"].high)
    count = tf.shape(users)[0] * k
    negatives = tf.random.uniform([count], 0, num_items, dtype=tf.int64)
    labels = tf.concat([tf.ones(tf.shape(users), tf.float32), tf.zeros([count], tf.float32)], 0)
    return (tf.concat([users, tf.tile(users, [k])], 0), tf.concat([items, negatives], 0)), (labels,)


def _variables(model: keras.Model) -> dict:
    """Neutral name -> Keras variable (Keras kernels are (in, out) like the neutral layout)."""
    out = {f"{name}.embedding": model.get_layer(name).embeddings for name in EMBEDDINGS}
    for layer in model.layers:
        if isinstance(layer, layers.Dense):
            out[f"{layer.name}.kernel"], out[f"{layer.name}.bias"] = layer.kernel, layer.bias
    return out


def load_weights(model: keras.Model, weights: dict[str, np.ndarray]) -> None:
    """Copy framework-neutral weights (see layout.py) into the model."""
    variables = _variables(model)
    check_weights(weights, {name: tuple(v.shape) for name, v in variables.items()})
    for name, variable in variables.items():
        variable.assign(np.asarray(weights[name], dtype=np.float32))


def export_weights(model: keras.Model) -> dict[str, np.ndarray]:
    """The model's weights under the framework-neutral names."""
    return {
        name: np.array(ops.convert_to_numpy(v), dtype=np.float32) for name, v in _variables(model).items()
    }


class RecommendationTF(TFFamily):
    """NeuMF (NCF) with negatives drawn on the device in mode=train, in TensorFlow."""

    build_model = staticmethod(build_model)
    add_negatives = staticmethod(add_negatives)
    export_weights = staticmethod(export_weights)
    load_weights = staticmethod(load_weights)
