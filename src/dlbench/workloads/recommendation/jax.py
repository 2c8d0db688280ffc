"""NeuMF in Flax, the same network as the torch one (workloads/recommendation/torch.py, after NVIDIA
DeepLearningExamples' NCF): embeddings N(0, 0.01), MLP kernels Glorot-uniform, the final kernel
LeCun-uniform, biases torch's default U(+-1/sqrt(fan_in)); layer names are the neutral ones of layout.py,
and a Flax dense kernel is already (in, out), so weights exchange without transposes.

Lookups stay float32 as in torch and MXNet (an embedding is a gather, not arithmetic); the dense layers
compute in the network's dtype. The model returns logits (N, 1); the sigmoid is in the task's loss.
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dlbench.backends.jax.family import JaxFamily, Network
from dlbench.core.spec import TaskSpec
from dlbench.workloads.recommendation.layout import EMBEDDINGS, check_weights, mlp_dense, weight_shapes
from dlbench.workloads.recommendation.spec import RecommendationConfig, table_sizes


def torch_bias(fan_in: int):
    """torch's default bias init, U(+-1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in)
    return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -bound, bound)


class NeuMF(nn.Module):
    num_users: int
    num_items: int
    mf_dim: int = 64
    mlp_layers: tuple[int, ...] = (256, 256, 128, 64)
    dropout: float = 0.0
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return weight_shapes(self.num_users, self.num_items, self.mf_dim, self.mlp_layers)

    @nn.compact
    def __call__(self, users, items, train: bool = False):
        shapes = self.shapes()
        emb = {
            name: nn.Embed(
                *shapes[f"{name}.embedding"],
                embedding_init=nn.initializers.normal(0.01),
                param_dtype=self.param_dtype,
                name=name,
            )  # fmt: skip
            for name in EMBEDDINGS
        }
        gmf = emb["mf_user"](users) * emb["mf_item"](items)
        x = jnp.concatenate((emb["mlp_user"](users), emb["mlp_item"](items)), axis=1)
        for name, fan_in, fan_out in mlp_dense(self.mlp_layers):
            dense = nn.Dense(
                fan_out, kernel_init=nn.initializers.glorot_uniform(), bias_init=torch_bias(fan_in),
                dtype=self.dtype, param_dtype=self.param_dtype, name=name,
            )  # fmt: skip
            x = nn.relu(dense(x))
            if self.dropout:
                x = nn.Dropout(self.dropout, deterministic=not train)(x)
        fan_in = self.mlp_layers[-1] + self.mf_dim
        final = nn.Dense(
            1, kernel_init=nn.initializers.lecun_uniform(), bias_init=torch_bias(fan_in), dtype=self.dtype,
            param_dtype=self.param_dtype, name="final",
        )  # fmt: skip
        return final(jnp.concatenate((gmf, x), axis=1))


def build_model(cfg: RecommendationConfig, dtype: Any = jnp.float32, param_dtype: Any = jnp.float32) -> NeuMF:
    users, items = table_sizes(cfg)
    return NeuMF(users, items, cfg.factors, tuple(cfg.mlp_layers), cfg.dropout, dtype, param_dtype)


def add_negatives(inputs: tuple, spec: TaskSpec, rng: jax.Array) -> tuple[tuple, tuple]:
    """A mode=train step's batch from its positives (users, items), drawn inside the jitted step as the
    torch backend does: `spec.device_negatives` uniform items per positive from JAX's PRNG, each with the
    positive's user; labels 1 for the positives, then 0. Returns ((users, items), (labels,))."""
    users, items = inputs
    k, num_items = spec.device_negatives, int(spec.inputs["item"].high)
    negatives = jax.random.randint(rng, (users.shape[0] * k,), 0, num_items, dtype=items.dtype)
    labels = jnp.concatenate((jnp.ones(users.shape[0]), jnp.zeros(negatives.shape[0])))
    return (jnp.concatenate((users, jnp.tile(users, k))), jnp.concatenate((items, negatives))), (labels,)


def load_weights(net: Network, weights: dict[str, np.ndarray]) -> None:
    """Put framework-neutral weights (see layout.py) in as the network's parameters."""
    shapes = net.module.shapes()
    check_weights(weights, shapes)
    params: dict[str, dict[str, Any]] = {}
    for name in shapes:
        layer, kind = name.split(".")  # Flax module, parameter
        params.setdefault(layer, {})[kind] = jnp.asarray(weights[name], net.module.param_dtype)
    net.variables = {**net.variables, "params": params}


def export_weights(net: Network) -> dict[str, np.ndarray]:
    """The network's weights under the framework-neutral names, kernels as (in, out)."""
    params = jax.device_get(net.params)
    out = {}
    for name in net.module.shapes():
        layer, kind = name.split(".")  # Flax module, parameter
        out[name] = np.asarray(params[layer][kind], dtype=np.float32).copy()
    return out


class RecommendationJax(JaxFamily):
    """NeuMF (NCF) with negatives drawn on the device in mode=train, in Flax."""

    def build_model(self, cfg: RecommendationConfig, dtype: Any, param_dtype: Any) -> nn.Module:
        return build_model(cfg, dtype, param_dtype)

    add_negatives = staticmethod(add_negatives)
    export_weights = staticmethod(export_weights)
    load_weights = staticmethod(load_weights)
