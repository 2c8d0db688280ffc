"""Recommendation (NCF / NeuMF, as NVIDIA DeepLearningExamples' PyTorch NCF): a (user, item) pair in, one
logit out, sigmoid binary cross-entropy against 0/1 labels (1 = the user rated the item, 0 = a sampled
negative), Adam with DLE's lr 0.0045 and betas (0.25, 0.5); measured in samples (positives + negatives)
per second; quality is HR@10 (dlbench.workloads.recommendation.eval) with leave-one-out and 100 negatives per user.

Training in mode=train works as DLE's does: a step's batch holds positives only, and the step itself draws
`negatives` (4) random items per positive on the device, with the framework's own RNG (the spec's
`device_negatives`; each backend's models/recommendation.py `add_negatives`). The items are uniform over
all items, so a "negative" may now and then be one of the user's positives: DLE tolerates these
collisions in training, and so does dlbench (at MovieLens-20M's density about 0.5% of draws). mode=converge
keeps host-drawn negatives that exclude the user's positives, seeded with numpy (workloads/recommendation/movielens.py), so the
three frameworks train on the same samples for a seed."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dlbench.core.spec import ModelConfig, OptimizerSpec, TaskSpec, TensorSpec, count_batch
from dlbench.data.synthetic import HostBatch
from dlbench.workloads.recommendation.interactions import ML20M_ITEMS, ML20M_USERS, popular_items

SYNTHETIC_POOL = 8  # distinct synthetic batches, cycled (yardsticks/bare_ncf.py --pool: the same)
POPULARITY_SKEW = (
    0.9  # synthetic items: p(rank r) ~ (r + 1)^-0.9, as data.interactions.synthetic_interactions
)


@dataclass
class RecommendationConfig(ModelConfig):
    """conf/model/ncf.yaml (Hydra schema `recommendation_schema`).

    num_users / num_items: embedding rows; null = the dataset's counts (dataset=movielens fills them in
    before the job starts), or MovieLens-20M's 138,493 x 26,744 for synthetic data (31,832,577
    parameters). (Not `users` / `items`: a DictConfig has an items() method that would hide the key.)"""

    name: str = "ncf"
    task: str = "recommendation"
    batch_size: int = 16384
    num_users: int | None = None
    num_items: int | None = None
    factors: int = 64  # GMF embedding width (DLE's mf_dim)
    mlp_layers: list[int] = field(default_factory=lambda: [256, 256, 128, 64])
    dropout: float = 0.0  # DLE trains with 0.5; a benchmark measures the network without it
    negatives: int = 4  # sampled per training positive (on the device in mode=train, see the module doc)

    def check(self) -> list[tuple[bool, str]]:
        layers = list(self.mlp_layers)
        return [
            *super().check(),
            (
                self.num_users is None or self.num_users >= 1,
                f"model.num_users={self.num_users}: use 1+ or null",
            ),
            (
                self.num_items is None or self.num_items >= 2,
                f"model.num_items={self.num_items}: use 2+ or null",
            ),
            (self.factors >= 1, f"model.factors={self.factors}: must be 1 or more"),
            (
                len(layers) >= 2 and layers[0] % 2 == 0 and min(layers) >= 1,
                f"model.mlp_layers={layers}: need 2+ positive widths, the first even (split between user and item)",
            ),
            (0.0 <= self.dropout < 1.0, f"model.dropout={self.dropout}: must be in [0, 1)"),
            (self.negatives >= 1, f"model.negatives={self.negatives}: must be 1 or more"),
        ]


def table_sizes(cfg: RecommendationConfig) -> tuple[int, int]:
    """(users, items) embedding rows: the config's, or MovieLens-20M's where null."""
    return cfg.num_users or ML20M_USERS, cfg.num_items or ML20M_ITEMS


def positives_per_step(batch_size: int, negatives: int) -> int:
    """Positives in a training batch of `batch_size` samples: each brings `negatives` more, so a step
    trains on positives * (1 + negatives) samples (batch_size rounded down to a multiple of 1 + negatives,
    at least one positive)."""
    return max(1, batch_size // (1 + negatives))


def synthetic_pool(cfg: RecommendationConfig):
    """SYNTHETIC_POOL batches of ids made with numpy (seed 0: the same in every framework), cycled:
    uniform users with popularity-skewed items, positives only for training (the step adds negatives),
    `batch_size` (user, item) pairs to score for inference."""
    users, items = table_sizes(cfg)

    def pool(batch_size: int, train: bool) -> list[HostBatch]:
        rng = np.random.default_rng(0)
        draw = popular_items(items, POPULARITY_SKEW, rng)
        rows = positives_per_step(batch_size, cfg.negatives) if train else batch_size
        units = rows * (1 + cfg.negatives) if train else rows
        return [
            HostBatch(
                {"user": rng.integers(0, users, rows).astype(np.int32), "item": draw(rows).astype(np.int32)},
                {},
                units,
            )
            for _ in range(SYNTHETIC_POOL)
        ]

    return pool


def spec(cfg: RecommendationConfig) -> TaskSpec:
    return TaskSpec(
        task="recommendation",
        inputs={
            "user": TensorSpec((), "int32", 0, table_sizes(cfg)[0]),
            "item": TensorSpec((), "int32", 0, table_sizes(cfg)[1]),
        },
        targets={"label": TensorSpec((), "int32", 0, 2)},
        loss="sigmoid_binary_cross_entropy",
        metric="hr@10",
        optimizer=OptimizerSpec("adam", lr=0.0045, betas=(0.25, 0.5), eps=1e-8),
        unit="samples",
        count_units=count_batch,
        synthetic_pool=synthetic_pool(cfg),
        device_negatives=cfg.negatives,
    )
