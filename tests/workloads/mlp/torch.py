"""TEST ONLY: the 2-layer MLP of tests.workloads.mlp.spec (one logit per vector)."""

from __future__ import annotations

from torch import nn

from dlbench.backends.torch.family import TorchFamily
from tests.workloads.mlp.spec import MLPConfig


def build_model(cfg: MLPConfig) -> nn.Module:
    return nn.Sequential(nn.Linear(cfg.features, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 1))


class MLPTorch(TorchFamily):
    """TEST ONLY: the 2-layer MLP, in PyTorch."""

    build_model = staticmethod(build_model)
