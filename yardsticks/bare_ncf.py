"""The NCF yardstick: the recommendation training loop a careful engineer writes by hand, no harness.

NeuMF as NVIDIA DeepLearningExamples (PyTorch/Recommendation/NCF) define it: GMF with 64 factors plus an MLP
256-256-128-64 on the concatenated user/item embeddings, a final dense layer on the concatenation of both, at
MovieLens-20M sizes (138,493 users, 26,744 items): 31,832,577 parameters; dropout off, as DLE benchmarks it.
BCE with logits, Adam lr 0.0045, betas (0.25, 0.5), eps 1e-8 (DLE's FusedAdam settings).

Data as dlbench's harness makes it (so both do the same work per step): a pool of 8 batches of positive
(user, item) pairs made once with numpy (seed 0: the very ids of the harness's synthetic pool), users
uniform, items popularity-skewed (p(rank r) ~ (r + 1)^-0.9, ranks shuffled over the ids), put on the device
before timing and cycled. Each training step takes the next `batch / 5` positives and draws 4 random
negative items per positive on the device with torch's RNG (DLE's augmentation: the positive's user with a
uniformly random item, label 0; a draw that hits a positive is tolerated, as in DLE), labels made on the
device, so a step holds positives x 5 samples (2^20 by default on CUDA, rounded down to a multiple of 5)
and the sampling is timed with the step. `--mode infer` scores pool batches of `--batch` (user, item) pairs
(forward + sigmoid). Prints samples/s. Imports nothing from dlbench (see bare_common.py).

Usage: python yardsticks/bare_ncf.py [--batch 1048576] [--precision amp|bf16|fp32|tf32] [--mode train|infer]
       [--lr 0.0045] [--warmup 20] [--steps 20] [--windows 8] [--optimizer fused|foreach]
       [--device auto|cuda|cpu]
       [--compile [--compile-mode default|reduce-overhead|max-autotune|max-autotune-no-cudagraphs]]
"""

from __future__ import annotations

import argparse
import math
import sys

import bare_common as bc
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

SKEW = 0.9  # item popularity, as dlbench's synthetic interactions


class NeuMF(nn.Module):
    """DLE's neumf.py without dropout, with its initialisation (normal 0.01 embeddings, Glorot MLP,
    LeCun-uniform final layer)."""

    def __init__(self, users: int, items: int, factors: int = 64, mlp: tuple[int, ...] = (256, 256, 128, 64)):
        super().__init__()
        self.mf_user, self.mf_item = nn.Embedding(users, factors), nn.Embedding(items, factors)
        self.mlp_user, self.mlp_item = nn.Embedding(users, mlp[0] // 2), nn.Embedding(items, mlp[0] // 2)
        self.mlp = nn.ModuleList(nn.Linear(i, o) for i, o in zip(mlp[:-1], mlp[1:], strict=True))
        self.final = nn.Linear(mlp[-1] + factors, 1)
        for e in (self.mf_user, self.mf_item, self.mlp_user, self.mlp_item):
            nn.init.normal_(e.weight, 0.0, 0.01)
        for layer in self.mlp:
            nn.init.xavier_uniform_(layer.weight)
        limit = math.sqrt(3.0 / self.final.in_features)
        nn.init.uniform_(self.final.weight, -limit, limit)

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        mf = self.mf_user(user) * self.mf_item(item)
        x = torch.cat([self.mlp_user(user), self.mlp_item(item)], 1)
        for layer in self.mlp:
            x = F.relu(layer(x))
        return self.final(torch.cat([mf, x], 1))


def id_pool(a: argparse.Namespace, rows: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`a.pool` batches of `rows` (user, item) int32 ids, drawn exactly as dlbench's synthetic NCF pool
    (tasks/recommendation.py): numpy seed 0, uniform users, Zipf-like item popularity."""
    rng = np.random.default_rng(0)
    cdf = np.cumsum((np.arange(a.items) + 1.0) ** -SKEW)
    rank_to_item = rng.permutation(a.items)
    pool = []
    for _ in range(a.pool):
        users = rng.integers(0, a.users, rows).astype(np.int32)
        ranks = np.searchsorted(cdf, rng.random(rows) * cdf[-1], side="right")
        pool.append((users, rank_to_item[np.minimum(ranks, a.items - 1)].astype(np.int32)))
    return pool


class Sampler:
    """The pool on the device, cycled; in training each batch of positives gets `negatives` random items
    per positive, drawn on the device at every step."""

    def __init__(self, a: argparse.Namespace, dev: torch.device) -> None:
        self.items, self.negatives, self.train = a.items, a.negatives, a.mode == "train"
        rows = max(1, a.batch // (1 + a.negatives)) if self.train else a.batch
        self.pool = [(torch.from_numpy(u).to(dev), torch.from_numpy(i).to(dev)) for u, i in id_pool(a, rows)]
        self.at = 0
        self.samples = rows * (1 + a.negatives) if self.train else rows

    def next(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        users, items = self.pool[self.at]
        self.at = (self.at + 1) % len(self.pool)
        if not self.train:
            return users, items, None
        negatives = torch.randint(0, self.items, (users.numel() * self.negatives,), device=users.device,
                                  dtype=items.dtype)  # fmt: skip
        labels = torch.cat(
            (
                torch.ones(users.numel(), device=users.device),
                torch.zeros(negatives.numel(), device=users.device),
            )
        )
        return torch.cat((users, users.repeat(self.negatives))), torch.cat((items, negatives)), labels


def main() -> int:
    p = bc.parser(__doc__, warmup=20, steps=20, windows=8)
    p.add_argument("--batch", type=int, default=None, help="samples per step (2^20 on CUDA, 2^14 on CPU)")
    p.add_argument("--users", type=int, default=138493)
    p.add_argument("--items", type=int, default=26744)
    p.add_argument("--negatives", type=int, default=4)
    p.add_argument("--pool", type=int, default=8, help="distinct batches, cycled (dlbench's SYNTHETIC_POOL)")
    p.add_argument("--lr", type=float, default=0.0045)
    return bc.run_all(p, one_config)


def one_config(a: argparse.Namespace) -> int:
    """One configuration: build, warm up, time, print its BARE line."""
    prec = bc.setup(a)
    dev = prec.device
    a.batch = a.batch or (1 << 20 if dev.type == "cuda" else 1 << 14)
    model = NeuMF(a.users, a.items).to(dev)
    params = bc.param_count(model)
    model.train(a.mode == "train")
    run = bc.maybe_compile(model, a)
    data = Sampler(a, dev)

    if a.mode == "infer":

        def step() -> tuple[int, None]:
            users, items, _ = data.next()
            with torch.inference_mode(), prec.autocast():
                torch.sigmoid(run(users, items))
            return data.samples, None
    else:
        opt = torch.optim.Adam(
            model.parameters(), lr=a.lr, betas=(0.25, 0.5), eps=1e-8, **bc.optimizer_kwargs(a, dev)
        )

        def step() -> tuple[int, torch.Tensor]:
            users, items, labels = data.next()
            with prec.autocast():
                loss = F.binary_cross_entropy_with_logits(run(users, items).reshape(-1).float(), labels)
            bc.update(loss, opt, prec)
            return data.samples, loss.detach()

    rates, loss = bc.measure(step, a, dev)
    return bc.report(a, prec, rates, loss, model="ncf", params=params, unit="samples/s")


if __name__ == "__main__":
    sys.exit(main())
