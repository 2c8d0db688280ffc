"""TEST ONLY: the 2-layer MLP of tests.workloads.mlp.spec (one logit per vector), in Flax."""

from __future__ import annotations

from typing import Any

import flax.linen as nn

from dlbench.backends.jax.family import JaxFamily
from tests.workloads.mlp.spec import MLPConfig


class MLP(nn.Module):
    hidden: int
    dtype: Any
    param_dtype: Any

    @nn.compact
    def __call__(self, x, train: bool = False):
        dense = {"dtype": self.dtype, "param_dtype": self.param_dtype}
        return nn.Dense(1, **dense)(nn.relu(nn.Dense(self.hidden, **dense)(x)))


class MLPJax(JaxFamily):
    """TEST ONLY: the 2-layer MLP, in Flax."""

    def build_model(self, cfg: MLPConfig, dtype: Any, param_dtype: Any) -> nn.Module:
        return MLP(cfg.hidden, dtype, param_dtype)
