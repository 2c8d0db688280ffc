"""NeuMF in Gluon, layer for layer the torch backend's (DLE's neumf.py).

Same initialisation scheme as DLE / the torch backend, set per parameter so `initialize()` needs no
default: embeddings N(0, 0.01), MLP kernels Glorot-uniform (Xavier uniform, avg, magnitude 3), the
final kernel LeCun-uniform (Xavier uniform, in, magnitude 3), biases U(+-1/sqrt(fan_in)) (torch's
default, which DLE keeps). Dropout after each MLP ReLU as in DLE, off by default for benchmarking.

Child blocks carry the framework-neutral names of dlbench.workloads.recommendation.layout as their prefixes
(mf_user_, mlp0_, final_, ...). The block returns logits (N, 1); the task's loss
(backends/mxnet/losses.py, `sigmoid_binary_cross_entropy`: SigmoidBCE with from_sigmoid=False, i.e.
relu(x) - x*y + softrelu(-|x|)) applies the sigmoid without overflow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.family import MXNetFamily
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

nn = mx.gluon.nn


def _dense(units: int, fan_in: int, weight_init: Any, name: str, activation: str | None = None) -> Any:
    return nn.Dense(
        units,
        activation=activation,
        in_units=fan_in,
        flatten=False,
        weight_initializer=weight_init,
        bias_initializer=mx.init.Uniform(1.0 / math.sqrt(fan_in)),
        prefix=f"{name}_",
    )


class NeuMF(mx.gluon.HybridBlock):
    def __init__(
        self,
        num_users: int,
        num_items: int,
        mf_dim: int = MF_DIM,
        mlp_layers: Sequence[int] = MLP_LAYERS,
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(prefix="", **kwargs)
        self.shapes = weight_shapes(num_users, num_items, mf_dim, mlp_layers)
        glorot = mx.init.Xavier(rnd_type="uniform", factor_type="avg", magnitude=3)
        with self.name_scope():
            for name in EMBEDDINGS:
                rows, dim = self.shapes[f"{name}.embedding"]
                block = nn.Embedding(rows, dim, weight_initializer=mx.init.Normal(0.01), prefix=f"{name}_")
                setattr(self, name, block)
            self.mlp = nn.HybridSequential(prefix="")
            for name, fan_in, width in mlp_dense(mlp_layers):
                self.mlp.add(_dense(width, fan_in, glorot, name, activation="relu"))
                if dropout:
                    self.mlp.add(nn.Dropout(dropout))
            lecun = mx.init.Xavier(rnd_type="uniform", factor_type="in", magnitude=3)
            self.final = _dense(1, mlp_layers[-1] + mf_dim, lecun, "final")

    def hybrid_forward(self, F: Any, users: Any, items: Any) -> Any:
        gmf = self.mf_user(users) * self.mf_item(items)
        x = F.concat(self.mlp_user(users), self.mlp_item(items), dim=1)
        # Under AMP the MLP computes in bfloat16/float16 while the GMF product stays float32, and Gluon's
        # concat wants one dtype: cast both to the wider, as AMP does for its "widest type" ops (a no-op
        # in float32). The final dense is then cast down again by AMP, like every dense.
        gmf, mlp = F.amp_multicast(gmf, self.mlp(x), num_outputs=2)
        return self.final(F.concat(gmf, mlp, dim=1))


def build_model(cfg: RecommendationConfig, train: bool = True) -> NeuMF:
    """NeuMF for the family config, uninitialized (`initialize` gives every parameter its own init)."""
    return NeuMF(*table_sizes(cfg), cfg.factors, cfg.mlp_layers, cfg.dropout)


def initialize(net: NeuMF, cfg: RecommendationConfig, ctx: Any) -> None:
    net.initialize(ctx=ctx)


def add_negatives(inputs: tuple, spec: TaskSpec) -> tuple[tuple, tuple]:
    """A mode=train step's batch from its positives (users, items), on their context, as DLE's training
    loop does: `spec.device_negatives` negatives per positive, each the positive's user with an item drawn
    uniformly by MXNet's RNG (a drawn item may be one of the user's positives: tolerated, as in DLE);
    labels 1 for the positives, then 0. Returns ((users, items), (labels,))."""
    users, items = inputs
    k, num_items = spec.device_negatives, int(spec.inputs["item"].high)
    count, ctx = users.shape[0] * k, users.context
    negatives = mx.nd.random.randint(0, num_items, shape=(count,), ctx=ctx, dtype=items.dtype)
    labels = mx.nd.concat(mx.nd.ones(users.shape[0], ctx=ctx), mx.nd.zeros(count, ctx=ctx), dim=0)
    all_users = mx.nd.concat(users, mx.nd.tile(users, reps=(k,)), dim=0)
    return (all_users, mx.nd.concat(items, negatives, dim=0)), (labels,)


def _params(net: NeuMF) -> dict[str, tuple[Any, bool]]:
    """Neutral name -> (Gluon parameter, stored transposed?); Gluon's dense weight is (out, in)."""
    params = net.collect_params()
    out = {}
    for name in net.shapes:
        layer, kind = name.split(".")
        gluon_name = f"{layer}_weight" if kind in ("embedding", "kernel") else f"{layer}_bias"
        out[name] = (params[gluon_name], kind == "kernel")
    return out


def load_weights(net: NeuMF, weights: dict[str, np.ndarray]) -> None:
    """Copy framework-neutral weights (see layout.py) into an initialised block."""
    check_weights(weights, net.shapes)
    for name, (param, transposed) in _params(net).items():
        value = np.asarray(weights[name], dtype=np.float32)
        param.set_data(mx.nd.array(value.T if transposed else value, dtype=param.dtype))


def export_weights(net: NeuMF) -> dict[str, np.ndarray]:
    """The block's weights under the framework-neutral names, kernels as (in, out)."""
    out = {}
    for name, (param, transposed) in _params(net).items():
        value = param.data().astype("float32").asnumpy()
        out[name] = value.T.copy() if transposed else value
    return out


class RecommendationMXNet(MXNetFamily):
    """NeuMF (NCF) with negatives drawn on the device in mode=train, in MXNet."""

    build_model = staticmethod(build_model)
    initialize = staticmethod(initialize)
    add_negatives = staticmethod(add_negatives)
    export_weights = staticmethod(export_weights)
    load_weights = staticmethod(load_weights)
