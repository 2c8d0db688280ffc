"""TensorFlow yardstick for NCF: NeuMF as NVIDIA DeepLearningExamples define it (GMF with 64 factors beside an
MLP 256-256-128-64 on concatenated user/item embeddings, one dense unit on both), in plain Keras 3, at
MovieLens-20M sizes (138,493 users, 26,744 items): 31,832,577 trainable parameters; dropout off.
Sigmoid BCE on float32 logits, Adam lr 0.0045, betas (0.25, 0.5), eps 1e-8; a hand-written tf.function
step (XLA with --xla). Prints one `BARE {json}` line per (precision, mode); units are samples.

Data as dlbench's synthetic NCF pool (so both do the same work per step): 8 batches of positive (user, item)
int32 ids made once with numpy (seed 0: the very ids of dlbench's pool; users uniform, items
popularity-skewed p(rank r) ~ (r + 1)^-0.9), put on the device before timing and cycled. Each training step
takes `batch / 5` positives and draws 4 uniform negative items per positive on the device with TF's RNG,
inside the step (DLE's augmentation; labels 1 then 0), so a step trains on positives x 5 samples.
`--mode infer` scores pool batches of `--batch` pairs: the forward pass to logits, as dlbench's TF path does.

Usage: python yardsticks/bare_tf_ncf.py [--batch 1048576] [--xla] [--precision amp,bf16,fp32,tf32]
       [--mode train,infer] [--warmup 20] [--steps 20] [--windows 8] [--device auto|cuda|cpu]
       [--users 138493] [--items 26744] [--negatives 4] [--pool 8] [--lr 0.0045]
"""

from __future__ import annotations

import argparse
import math
import sys

import bare_tf_common as common
import keras
import numpy as np
import tensorflow as tf
from keras import layers

SKEW = 0.9


def torch_bias(fan_in: int):
    return keras.initializers.RandomUniform(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))


def neumf(users: int, items: int, factors: int = 64, mlp=(256, 256, 128, 64)) -> keras.Model:
    """model([user_ids, item_ids]) -> float32 logits (N, 1)."""
    # int64 ids (Keras casts int32 ones to them): on a GPU TF keeps int32 comparisons, arithmetic and
    # reshapes, as in every lookup, in host memory
    user = keras.Input((), dtype="int64")
    item = keras.Input((), dtype="int64")

    def normal():  # one per table: a shared Keras 3 instance draws every table from one seed
        return keras.initializers.RandomNormal(stddev=0.01)

    mf = layers.Multiply()(
        [layers.Embedding(users, factors, embeddings_initializer=normal())(user),
         layers.Embedding(items, factors, embeddings_initializer=normal())(item)]
    )  # fmt: skip
    x = layers.Concatenate()(
        [layers.Embedding(users, mlp[0] // 2, embeddings_initializer=normal())(user),
         layers.Embedding(items, mlp[0] // 2, embeddings_initializer=normal())(item)]
    )  # fmt: skip
    for fan_in, width in zip(mlp[:-1], mlp[1:], strict=True):
        x = layers.Dense(
            width, "relu", kernel_initializer="glorot_uniform", bias_initializer=torch_bias(fan_in)
        )(x)
    x = layers.Concatenate()([mf, x])
    x = layers.Dense(1, kernel_initializer="lecun_uniform", bias_initializer=torch_bias(x.shape[-1]))(x)
    return keras.Model([user, item], layers.Activation("linear", dtype="float32")(x))


def id_pool(a: argparse.Namespace, rows: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`a.pool` batches of `rows` (user, item) int32 ids, drawn exactly as dlbench's synthetic NCF pool."""
    rng = np.random.default_rng(0)
    cdf = np.cumsum((np.arange(a.items) + 1.0) ** -SKEW)
    rank_to_item = rng.permutation(a.items)
    pool = []
    for _ in range(a.pool):
        users = rng.integers(0, a.users, rows).astype(np.int32)
        ranks = np.searchsorted(cdf, rng.random(rows) * cdf[-1], side="right")
        pool.append((users, rank_to_item[np.minimum(ranks, a.items - 1)].astype(np.int32)))
    return pool


def run(a: argparse.Namespace) -> int:
    prec = common.setup(a)
    a.batch = a.batch or (1 << 20 if prec.device == "cuda" else 1 << 14)
    train = a.mode == "train"
    rows = max(1, a.batch // (1 + a.negatives)) if train else a.batch
    samples = rows * (1 + a.negatives) if train else rows
    with prec.scope():
        model = neumf(a.users, a.items)
        pool = [(common.on_device(u), common.on_device(i)) for u, i in id_pool(a, rows)]
        k, num_items = a.negatives, a.items
        if train:

            def loss_of(m, users, items):
                users, items = tf.cast(users, tf.int64), tf.cast(items, tf.int64)  # int32 concat: on the host
                count = tf.shape(users)[0] * k
                negatives = tf.random.uniform([count], 0, num_items, dtype=tf.int64)
                labels = tf.concat([tf.ones(tf.shape(users), tf.float32), tf.zeros([count], tf.float32)], 0)
                logits = m(
                    [tf.concat([users, tf.tile(users, [k])], 0), tf.concat([items, negatives], 0)],
                    training=True,
                )
                logits = tf.reshape(tf.cast(logits, tf.float32), [-1])
                return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))

            opt = keras.optimizers.Adam(learning_rate=a.lr, beta_1=0.25, beta_2=0.5, epsilon=1e-8)
            opt = common.build_optimizer(opt, model, prec)
            fn = common.function(common.train_step(model, opt, loss_of, prec), a)
        else:
            fn = common.function(lambda users, items: model([users, items], training=False), a)
    at = [0]

    def step():
        users, items = pool[at[0]]
        at[0] = (at[0] + 1) % len(pool)
        out = fn(users, items)
        return samples, (out if train else None)

    rates, loss = common.measure(step, a, prec)
    return common.report(
        a,
        prec,
        rates,
        loss,
        model="ncf",
        params=common.param_count(model),
        unit="samples/s",
        optimizer="adam",
    )


def main() -> int:
    p = common.parser(__doc__, warmup=20, steps=20, windows=8)
    p.add_argument("--batch", type=int, default=None, help="samples per step (2^20 on CUDA, 2^14 on CPU)")
    p.add_argument("--users", type=int, default=138493)
    p.add_argument("--items", type=int, default=26744)
    p.add_argument("--negatives", type=int, default=4)
    p.add_argument("--pool", type=int, default=8, help="distinct batches, cycled (dlbench's SYNTHETIC_POOL)")
    p.add_argument("--lr", type=float, default=0.0045)
    return common.run_all(p, run)


if __name__ == "__main__":
    sys.exit(main())
