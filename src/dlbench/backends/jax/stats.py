"""Parameter and FLOP counts of the JAX networks, read from the forward pass's jaxpr.

Every convolution (`conv_general_dilated`) and matrix multiply (`dot_general`) in the traced program is
counted, a multiply-add = 2 FLOPs: the same "conv + dense" the other backends count with their own tools
(the parity check compares them). The inputs are the task spec's (batch 1, variable axes at their size).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from dlbench.backends.jax.family import JaxFamily, example_inputs
from dlbench.backends.skeleton import load_family
from dlbench.core.spec import ModelConfig
from dlbench.workloads.registry import task_spec


def _conv_macs(eqn) -> int:
    out, rhs = eqn.outvars[0].aval.shape, eqn.invars[1].aval.shape
    out_features = rhs[eqn.params["dimension_numbers"].rhs_spec[0]]
    return math.prod(out) * math.prod(rhs) // out_features


def _dot_macs(eqn) -> int:
    (contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval.shape
    return math.prod(eqn.outvars[0].aval.shape) * math.prod(lhs[i] for i in contract)


def _sub_jaxprs(value: Any) -> list:
    """The jaxprs an equation's parameter holds (pjit, custom_jvp/vjp calls, remat...)."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    return [getattr(v, "jaxpr", v) for v in values if hasattr(getattr(v, "jaxpr", v), "eqns")]


def count_macs(jaxpr) -> int:
    """Multiply-adds of every convolution and dot in `jaxpr` and the jaxprs nested in it."""
    total = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "conv_general_dilated":
            total += _conv_macs(eqn)
        elif eqn.primitive.name == "dot_general":
            total += _dot_macs(eqn)
        for value in eqn.params.values():
            total += sum(count_macs(sub) for sub in _sub_jaxprs(value))
    return total


def model_stats(cfg: ModelConfig) -> dict[str, Any]:
    """Trainable params and forward GFLOPs per sample (inference, batch 1, float32, CPU)."""
    spec = task_spec(cfg)
    family = load_family(JaxFamily, spec.task)
    module = family.build_model(cfg, jnp.float32, jnp.float32)
    xs = example_inputs(spec, jnp.float32)
    variables = jax.eval_shape(lambda: family.init(module, jax.random.key(0), xs))
    closed = jax.make_jaxpr(lambda v, *a: module.apply(v, *a, train=False))(variables, *xs)
    return {
        "params": sum(math.prod(p.shape) for p in jax.tree.leaves(variables["params"])),
        "gflops": 2 * count_macs(closed.jaxpr) / 1e9,
        "input_shapes": {name: list(x.shape) for name, x in zip(spec.inputs, xs, strict=True)},
    }
