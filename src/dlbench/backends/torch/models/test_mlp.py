"""TEST ONLY: the 2-layer MLP of dlbench.tasks.test_mlp (one logit per vector)."""

from __future__ import annotations

from torch import nn

from dlbench.tasks.test_mlp import MLPConfig


def build_model(cfg: MLPConfig) -> nn.Module:
    return nn.Sequential(nn.Linear(cfg.features, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 1))
