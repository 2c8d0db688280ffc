"""Parameter and FLOP counts of a Keras model, from TensorFlow's own graph tooling.

The parity check (same network in every framework) compares these numbers with the other backends,
so the counts come from TF's view of the network, not from a formula we wrote: the inference forward
pass (batch 1, float32, the task spec's inputs in TF's layout) is traced into a concrete function and
its graph goes through tf.compat.v1.profiler, which uses the FLOP statistics registered for each op
(Conv2D and MatMul count a multiply-add as 2 FLOPs).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from dlbench.backends.skeleton import load_family
from dlbench.backends.tensorflow.family import TFFamily, call_model, trainable_params
from dlbench.core.spec import ModelConfig
from dlbench.workloads.registry import task_spec

# Op types that make up "conv + dense" FLOPs (what torch.utils.flop_counter counts for these nets).
MATMUL_OPS = ("Conv2D", "MatMul", "BatchMatMulV2", "DepthwiseConv2dNative")


def _flops_by_op(graph: tf.Graph) -> dict[str, int]:
    """FLOPs per op type. The profiler's "op" view returns a chain of nodes, one per op type, where
    `float_ops` is the node's own count (total_float_ops also sums the rest of the chain)."""
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    options = builder(builder.float_operation()).with_empty_output().build()
    root = tf.compat.v1.profiler.profile(graph=graph, cmd="op", options=options)
    out: dict[str, int] = {}
    stack = list(root.children)
    while stack:
        node = stack.pop()
        out[node.name] = out.get(node.name, 0) + int(node.float_ops)
        stack.extend(node.children)
    return out


def _input_signature(cfg: ModelConfig) -> list[tf.TensorSpec]:
    spec = task_spec(cfg)
    out = []
    for t in spec.inputs.values():
        shape = spec.sample_shape(t)
        if t.layout and t.layout[0] == "C":  # channels last, as the bench feeds it
            shape = (*shape[1:], shape[0])
        out.append(tf.TensorSpec((1, *shape), tf.float32 if t.is_float else tf.as_dtype(t.dtype)))
    return out


def model_stats(cfg: ModelConfig) -> dict[str, Any]:
    """Trainable params and forward GFLOPs per sample (inference graph, batch 1, float32).

    gflops counts conv + dense (bias, BN, activations and pooling excluded: frameworks fuse and
    count those differently); gflops_all is everything the profiler has a FLOP count for.
    """
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    try:
        with tf.device("/CPU:0"):
            model = load_family(TFFamily, cfg.task).build_model(cfg)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    signature = _input_signature(cfg)
    forward = tf.function(lambda *xs: call_model(model, xs, False))
    graph = forward.get_concrete_function(*signature).graph
    by_op = _flops_by_op(graph)
    dense = sum(v for k, v in by_op.items() if k in MATMUL_OPS)
    return {
        "params": trainable_params(model),
        "gflops": dense / 1e9,
        "gflops_all": sum(by_op.values()) / 1e9,
        "flops_by_op": by_op,
        "input_shapes": [list(s.shape) for s in signature],
    }
