"""JAX yardstick for NCF: NeuMF as NVIDIA DeepLearningExamples define it (GMF with 64 factors beside an MLP
256-256-128-64 on concatenated user/item embeddings, one dense unit on both), in plain Flax linen + Optax, at
MovieLens-20M sizes (138,493 users, 26,744 items): 31,832,577 trainable parameters; dropout off. Sigmoid BCE
on float32 logits, Adam lr 0.0045, betas (0.25, 0.5), eps 1e-8; a hand-written `jax.jit` step with its state
donated. Prints one `BARE {json}` line per (precision, mode); units are samples.

Data as dlbench's synthetic NCF pool (so both do the same work per step): 8 batches of positive (user, item)
int32 ids made once with numpy (seed 0: the very ids of dlbench's pool; users uniform, items
popularity-skewed p(rank r) ~ (r + 1)^-0.9), put on the device before timing and cycled. Each training step
takes `batch / 5` positives and draws 4 uniform negative items per positive on the device with JAX's PRNG,
inside the step (DLE's augmentation; labels 1 then 0), so a step trains on positives x 5 samples. Embedding
lookups stay float32 (a gather, not arithmetic); the dense layers compute in the precision's dtype.
`--mode infer` scores pool batches of `--batch` pairs: the forward pass to logits.

Usage: python yardsticks/bare_jax_ncf.py [--batch 1048576] [--no-jit] [--precision amp,bf16,fp32,tf32]
       [--mode train,infer] [--warmup 20] [--steps 20] [--windows 8] [--device auto|cuda|cpu]
       [--users 138493] [--items 26744] [--negatives 4] [--pool 8] [--lr 0.0045]
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import bare_jax_common as common
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

SKEW = 0.9


def torch_bias(fan_in: int):
    bound = 1 / math.sqrt(fan_in)
    return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -bound, bound)


class NeuMF(nn.Module):
    users: int
    items: int
    factors: int = 64
    mlp: tuple[int, ...] = (256, 256, 128, 64)
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, user, item):
        normal = nn.initializers.normal(0.01)
        mf = nn.Embed(self.users, self.factors, embedding_init=normal)(user)
        mf = mf * nn.Embed(self.items, self.factors, embedding_init=normal)(item)
        x = jnp.concatenate(
            [nn.Embed(self.users, self.mlp[0] // 2, embedding_init=normal)(user),
             nn.Embed(self.items, self.mlp[0] // 2, embedding_init=normal)(item)], axis=1,
        )  # fmt: skip
        for fan_in, width in zip(self.mlp[:-1], self.mlp[1:], strict=True):
            dense = nn.Dense(width, kernel_init=nn.initializers.glorot_uniform(), bias_init=torch_bias(fan_in),
                             dtype=self.dtype)  # fmt: skip
            x = nn.relu(dense(x))
        x = jnp.concatenate([mf, x], axis=1)
        out = nn.Dense(1, kernel_init=nn.initializers.lecun_uniform(), bias_init=torch_bias(x.shape[-1]),
                       dtype=self.dtype)(x)  # fmt: skip
        return out.astype(jnp.float32)


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
    model = NeuMF(a.users, a.items, dtype=prec.dtype)
    pool = [jax.device_put(pair) for pair in id_pool(a, rows)]
    params = jax.jit(model.init)(jax.random.key(a.seed), pool[0][0][:1], pool[0][1][:1])["params"]
    k, num_items = a.negatives, a.items
    if train:

        def apply_loss(p, stats, key, users, items):
            negatives = jax.random.randint(key, (users.shape[0] * k,), 0, num_items, dtype=items.dtype)
            labels = jnp.concatenate([jnp.ones(users.shape[0]), jnp.zeros(negatives.shape[0])])
            logits = model.apply(
                {"params": p},
                jnp.concatenate([users, jnp.tile(users, k)]),
                jnp.concatenate([items, negatives]),
            )
            return optax.sigmoid_binary_cross_entropy(logits.reshape(-1), labels).mean(), stats

        tx = optax.adam(a.lr, b1=0.25, b2=0.5, eps=1e-8)
        fn = common.jit(common.train_step(apply_loss, tx, prec), a, donate=(0,))
        state = jax.device_put((params, {}, tx.init(params), common.loss_scale(prec), common.step_key(a)))
    else:
        fn = common.jit(lambda p, users, items: model.apply({"params": p}, users, items), a)
    at = [0]

    def step():
        nonlocal state
        users, items = pool[at[0]]
        at[0] = (at[0] + 1) % len(pool)
        if not train:
            return samples, fn(params, users, items)
        state, loss = fn(state, users, items)
        return samples, loss

    if not train:
        state = None
    rates, out = common.measure(step, a)
    return common.report(
        a, prec, rates, out if train else None, model="ncf", params=common.param_count(params),
        unit="samples/s", optimizer="optax",
    )  # fmt: skip


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
