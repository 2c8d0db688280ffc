"""The NCF yardstick: the recommendation training loop a careful engineer writes by hand, no harness.

NeuMF as NVIDIA DeepLearningExamples (PyTorch/Recommendation/NCF) define it: GMF with 64 factors plus an MLP
256-256-128-64 on the concatenated user/item embeddings, a final dense layer on the concatenation of both, at
MovieLens-20M sizes (138,493 users, 26,744 items): 31,832,577 parameters; dropout off, as DLE benchmarks it.
BCE with logits, Adam lr 0.0045, betas (0.25, 0.5), eps 1e-8 (DLE's FusedAdam settings).

Data made on the device: a pool of positive (user, item) pairs made once (items skewed towards popular ones);
each step takes the next slice of `batch / 5` positives and samples 4 random negative items per positive on
the device (DLE's augmentation: the positive's user with a uniformly random item, label 0), so a step holds
`--batch` samples (2^20 by default on CUDA) and the sampling is timed with the step. `--mode infer` scores
the same batches (forward + sigmoid). Prints samples/s. Imports nothing from dlbench (see bare_common.py).

Usage: python scripts/bare_ncf.py [--batch 1048576] [--precision amp|bf16|fp32|tf32] [--mode train|infer]
       [--lr 0.0045] [--warmup 20] [--steps 20] [--windows 8] [--optimizer fused|foreach]
       [--device auto|cuda|cpu]
       [--compile [--compile-mode default|reduce-overhead|max-autotune|max-autotune-no-cudagraphs]]
"""

from __future__ import annotations

import argparse
import math
import sys

import bare_common as bc
import torch
from torch import nn
from torch.nn import functional as F


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


class Sampler:
    """Batches of positives from a pool made once on the device, each with ~`negatives` random items."""

    def __init__(self, a: argparse.Namespace, dev: torch.device) -> None:
        self.items = a.items
        self.pos = a.batch // (1 + a.negatives)
        self.neg = a.batch - self.pos
        self.reps = -(-self.neg // self.pos)  # users repeated to pair with the negatives
        n = self.pos * a.pool
        self.users = torch.randint(0, a.users, (n,), device=dev)
        self.pos_items = (torch.rand(n, device=dev).pow(3) * a.items).long()  # popular items more often
        self.labels = torch.cat([torch.ones(self.pos, device=dev), torch.zeros(self.neg, device=dev)])[
            :, None
        ]
        self.offset = 0

    def next(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = slice(self.offset, self.offset + self.pos)
        self.offset = (self.offset + self.pos) % len(self.users)
        users = self.users[s]
        neg_users = users.repeat(self.reps)[: self.neg]
        neg_items = torch.randint(0, self.items, (self.neg,), device=users.device)
        return torch.cat([users, neg_users]), torch.cat([self.pos_items[s], neg_items]), self.labels


def main() -> int:
    p = bc.parser(__doc__, warmup=20, steps=20, windows=8)
    p.add_argument("--batch", type=int, default=None, help="samples per step (2^20 on CUDA, 2^14 on CPU)")
    p.add_argument("--users", type=int, default=138493)
    p.add_argument("--items", type=int, default=26744)
    p.add_argument("--negatives", type=int, default=4)
    p.add_argument("--pool", type=int, default=8, help="steps' worth of distinct positives, cycled")
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
            return a.batch, None
    else:
        opt = torch.optim.Adam(
            model.parameters(), lr=a.lr, betas=(0.25, 0.5), eps=1e-8, **bc.optimizer_kwargs(a, dev)
        )

        def step() -> tuple[int, torch.Tensor]:
            users, items, labels = data.next()
            with prec.autocast():
                loss = F.binary_cross_entropy_with_logits(run(users, items).float(), labels)
            bc.update(loss, opt, prec)
            return a.batch, loss.detach()

    rates, loss = bc.measure(step, a, dev)
    return bc.report(a, prec, rates, loss, model="ncf", params=params, unit="samples/s")


if __name__ == "__main__":
    sys.exit(main())
