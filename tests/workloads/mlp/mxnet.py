"""TEST ONLY: the 2-layer MLP of tests.workloads.mlp.spec (one logit per vector)."""

from __future__ import annotations

from typing import Any

from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.family import MXNetFamily
from tests.workloads.mlp.spec import MLPConfig


def build_model(cfg: MLPConfig, train: bool = True) -> Any:
    net = mx.gluon.nn.HybridSequential(prefix="mlp_")
    with net.name_scope():
        net.add(mx.gluon.nn.Dense(cfg.hidden, activation="relu", in_units=cfg.features))
        net.add(mx.gluon.nn.Dense(1, in_units=cfg.hidden))
    return net


def initialize(net: Any, cfg: MLPConfig, ctx: Any) -> None:
    """torch's nn.Linear default: U(+-1/sqrt(fan_in)) = Xavier uniform, in, magnitude 1."""
    net.initialize(mx.init.Xavier(rnd_type="uniform", factor_type="in", magnitude=1), ctx=ctx)


class MLPMXNet(MXNetFamily):
    """TEST ONLY: the 2-layer MLP, in MXNet."""

    build_model = staticmethod(build_model)
    initialize = staticmethod(initialize)
