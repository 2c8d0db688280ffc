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
from dlbench.backends.mxnet.family import MXNetFamily
from dlbench.backends.skeleton import load_family
from dlbench.core.spec import ModelConfig
from dlbench.workloads.registry import task_spec


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


def graph_stats(sym: Any, input_shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """Parameters and Convolution / FullyConnected FLOPs per sample of `sym` for its inputs' shapes
    (batch first).

    Parameters are the graph's arguments other than the inputs (BatchNorm's running statistics are
    auxiliary states, not arguments: the trainable count, as torch counts it)."""
    internals = sym.get_internals()
    arg_shapes, out_shapes, _ = internals.infer_shape(**input_shapes)
    args = dict(zip(internals.list_arguments(), arg_shapes, strict=True))
    outs = dict(zip(internals.list_outputs(), out_shapes, strict=True))
    nodes = json.loads(sym.tojson())["nodes"]
    batch = next(iter(input_shapes.values()))[0]
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
    params = sum(_prod(shape) for name, shape in args.items() if name not in input_shapes)
    return {"params": params, **flops}


def model_stats(model_cfg: ModelConfig) -> dict[str, Any]:
    """{"params": trainable parameters, "gflops": forward GFLOPs per sample} of the Gluon network, for
    the task spec's inputs (batch 1, variable-length axes at their synthetic size).

    Shapes only: the block is traced to a symbol and nothing is allocated, so the worker can call
    this beside a built bench (VGG16 would otherwise cost another 550 MB)."""
    spec = task_spec(model_cfg)
    net = load_family(MXNetFamily, spec.task).build_model(model_cfg)
    shapes = {name: (1, *spec.sample_shape(t)) for name, t in spec.inputs.items()}
    out = net(*[mx.sym.var(name) for name in shapes])
    stats = graph_stats(mx.sym.Group(list(out)) if isinstance(out, (list, tuple)) else out, shapes)
    return {"params": stats["params"], "gflops": (stats["Convolution"] + stats["FullyConnected"]) / 1e9}
