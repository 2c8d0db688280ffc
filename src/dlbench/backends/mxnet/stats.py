"""Parameter count and forward FLOPs read from MXNet's own graph, for the cross-framework parity check.

The FLOPs come from the symbol a Gluon block traces (the graph that hybridize runs), with every
node's shape from `infer_shape`: Convolution = 2 * out_elements * (in_channels/groups * kh * kw),
FullyConnected = 2 * out_features * in_features (a multiply-add counts as 2 FLOPs; bias adds,
BatchNorm, activations and pooling are left out; torch.utils.flop_counter counts the same way and
gives the same numbers for the torch backend's networks).
"""

from __future__ import annotations

import json
from typing import Any

from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.models import build_model
from dlbench.config import ModelConfig


def _prod(xs: Any) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _input_shape(nodes: list[dict], entry: list[int], args: dict, outs: dict) -> tuple[int, ...]:
    """Shape of a node input: a variable's, or (under AMP) the output of the amp_cast feeding it."""
    src = nodes[entry[0]]
    if src["op"] == "null":
        return args[src["name"]]
    name = f"{src['name']}_output"
    return outs[name] if name in outs else outs[f"{name}{entry[1]}"]


def graph_stats(sym: Any, data_shape: tuple[int, ...]) -> dict[str, int]:
    """Parameters and Convolution / FullyConnected FLOPs per sample of `sym` for `data_shape`.

    Parameters are the graph's arguments other than the input (BatchNorm's running statistics are
    auxiliary states, not arguments: the trainable count, as torch counts it)."""
    internals = sym.get_internals()
    arg_shapes, out_shapes, _ = internals.infer_shape(data=data_shape)
    args = dict(zip(internals.list_arguments(), arg_shapes, strict=True))
    outs = dict(zip(internals.list_outputs(), out_shapes, strict=True))
    nodes = json.loads(sym.tojson())["nodes"]
    batch = data_shape[0]
    flops = {"Convolution": 0, "FullyConnected": 0}
    for node in nodes:
        op = node["op"]
        if op not in flops:
            continue
        weight = _input_shape(nodes, node["inputs"][1], args, outs)
        out = outs[f"{node['name']}_output"]
        # weight is (out_ch, in_ch/groups, kh, kw) or (out_features, in_features): one output element
        # costs prod(weight[1:]) multiply-adds.
        flops[op] += 2 * _prod(out) * _prod(weight[1:]) // batch
    params = sum(_prod(shape) for name, shape in args.items() if name != "data")
    return {"params": params, **flops}


def model_stats(model_cfg: ModelConfig) -> dict[str, Any]:
    """{"params": trainable parameters, "gflops": forward GFLOPs per sample} of the Gluon network.

    Shapes only: the block is traced to a symbol and nothing is allocated, so the worker can call
    this beside a built bench (VGG16 would otherwise cost another 550 MB)."""
    net = build_model(model_cfg)
    shape = (1, model_cfg.channels, model_cfg.image_size, model_cfg.image_size)
    stats = graph_stats(net(mx.sym.var("data")), shape)
    return {"params": stats["params"], "gflops": (stats["Convolution"] + stats["FullyConnected"]) / 1e9}
