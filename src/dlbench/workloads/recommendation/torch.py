"""NeuMF in PyTorch, written like NVIDIA DeepLearningExamples' PyTorch NCF (neumf.py).

The network and its initialisation follow DLE: embeddings N(0, 0.01), MLP kernels Glorot-uniform,
the final kernel LeCun-uniform, biases torch's default U(+-1/sqrt(fan_in)). The TF and MXNet
backends build the same layers with the same scheme (dlbench.workloads.recommendation.layout names them).
Dropout after each MLP ReLU exists as in DLE but is off by default: a benchmark measures the
network, and DLE's 0.5 is a regularisation choice for its accuracy runs.

The model returns logits (N, 1); the sigmoid lives in the task's loss (backends/torch/losses.py,
`sigmoid_binary_cross_entropy`: binary_cross_entropy_with_logits in float32, the numerically safe form).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dlbench.backends.torch.family import TorchFamily
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


class NeuMF(nn.Module):
    def __init__(
        self,
        num_users: int,
        num_items: int,
        mf_dim: int = MF_DIM,
        mlp_layers: Sequence[int] = MLP_LAYERS,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.shapes = weight_shapes(num_users, num_items, mf_dim, mlp_layers)
        self.dropout = dropout
        self.embeddings = nn.ModuleDict(
            {name: nn.Embedding(*self.shapes[f"{name}.embedding"]) for name in EMBEDDINGS}
        )
        self.mlp = nn.ModuleList(nn.Linear(fan_in, fan_out) for _, fan_in, fan_out in mlp_dense(mlp_layers))
        self.final = nn.Linear(mlp_layers[-1] + mf_dim, 1)
        self._init_like_dle()

    @torch.no_grad()
    def _init_like_dle(self) -> None:
        for emb in self.embeddings.values():
            emb.weight.normal_(0.0, 0.01)
        for layer in self.mlp:  # Glorot uniform; biases keep torch's default U(+-1/sqrt(fan_in))
            limit = math.sqrt(6.0 / (layer.in_features + layer.out_features))
            layer.weight.uniform_(-limit, limit)
        limit = math.sqrt(3.0 / self.final.in_features)  # LeCun uniform
        self.final.weight.uniform_(-limit, limit)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        e = self.embeddings
        gmf = e["mf_user"](users) * e["mf_item"](items)
        x = torch.cat((e["mlp_user"](users), e["mlp_item"](items)), dim=1)
        for layer in self.mlp:
            x = F.relu(layer(x))
            if self.dropout:
                x = F.dropout(x, p=self.dropout, training=self.training)
        return self.final(torch.cat((gmf, x), dim=1))


def build_model(cfg: RecommendationConfig) -> NeuMF:
    """NeuMF for the family config, on the CPU in float32 (the bench moves it and picks the precision)."""
    return NeuMF(*table_sizes(cfg), cfg.factors, cfg.mlp_layers, cfg.dropout)


def add_negatives(inputs: tuple, spec: TaskSpec) -> tuple[tuple, tuple]:
    """A mode=train step's batch from its positives (users, items), on their device, as DLE's training
    loop does: `spec.device_negatives` negatives per positive, each the positive's user with an item drawn
    uniformly by torch's RNG (a drawn item may be one of the user's positives: tolerated, as in DLE);
    labels 1 for the positives, then 0. Returns ((users, items), (labels,))."""
    users, items = inputs
    k, num_items = spec.device_negatives, int(spec.inputs["item"].high)
    negatives = torch.randint(0, num_items, (users.numel() * k,), device=items.device, dtype=items.dtype)
    labels = torch.cat(
        (torch.ones(users.numel(), device=users.device), torch.zeros(negatives.numel(), device=users.device))
    )
    return (torch.cat((users, users.repeat(k))), torch.cat((items, negatives))), (labels,)


def _tensor(model: NeuMF, name: str) -> tuple[torch.Tensor, bool]:
    """The torch parameter behind a neutral name, and whether it is stored transposed."""
    layer_name, kind = name.split(".")
    if kind == "embedding":
        return model.embeddings[layer_name].weight, False
    layer = model.final if layer_name == "final" else model.mlp[int(layer_name.removeprefix("mlp"))]
    return (layer.weight, True) if kind == "kernel" else (layer.bias, False)


def load_weights(model: NeuMF, weights: dict[str, np.ndarray]) -> None:
    """Copy framework-neutral weights (see layout.py) into the model."""
    check_weights(weights, model.shapes)
    with torch.no_grad():
        for name in model.shapes:
            tensor, transposed = _tensor(model, name)
            value = np.asarray(weights[name], dtype=np.float32)
            tensor.copy_(torch.from_numpy(value.T.copy() if transposed else value))


def export_weights(model: NeuMF) -> dict[str, np.ndarray]:
    """The model's weights under the framework-neutral names, kernels as (in, out)."""
    out = {}
    for name in model.shapes:
        tensor, transposed = _tensor(model, name)
        value = tensor.detach().float().cpu().numpy()
        out[name] = value.T.copy() if transposed else value.copy()
    return out


class RecommendationTorch(TorchFamily):
    """NeuMF (NCF) with negatives drawn on the device in mode=train, in PyTorch."""

    build_model = staticmethod(build_model)
    add_negatives = staticmethod(add_negatives)
    export_weights = staticmethod(export_weights)
    load_weights = staticmethod(load_weights)
