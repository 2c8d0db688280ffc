"""What the JAX yardsticks (bare_jax_*.py) share: flags, the precision switches, warm-up then timed windows
synchronized only at their edges with `jax.block_until_ready`, and the one `BARE {json}` line each prints
(the keys of the TF yardsticks' line, with "framework": "jax", "jit" and the jax/flax/optax versions).

It imports nothing from dlbench on purpose: a yardstick is the loop a careful Flax + Optax user writes by
hand, and dlbench's figure for the same job must come within 1% of it in the same command.

Precision, as dlbench defines it (JAX has no autocast: a Flax layer computes in its `dtype` and keeps its
weights in `param_dtype`):
  fp32 -> dtype float32, jax_default_matmul_precision "highest" (true FP32)
  tf32 -> dtype float32, "tensorfloat32"
  amp  -> dtype float16 with dynamic loss scaling on a GPU; bfloat16 (no loss scaling) on the CPU
  bf16 -> dtype bfloat16
  (amp and bf16 leave the matmul precision at "default", as dlbench does: no float32 dots remain)
Weights stay float32 (param_dtype); float inputs arrive as float32 and the first layer casts.

The step is one `jax.jit` call with the state (weights, optimizer state, batch statistics, PRNG key) donated
to its outputs (--no-jit: op by op, nothing donated); a call returns once its work is dispatched. The key is
XLA's RngBitGenerator ("rbg", Philox on a GPU), as dlbench's JAX worker draws its dropout masks;
`--prng threefry2x32` (JAX's default) times the other generator: other masks of the same distribution.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # as dlbench's JAX worker

import bare_cli  # noqa: E402
import flax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402


def parser(doc: str, *, warmup: int, steps: int, windows: int) -> argparse.ArgumentParser:
    """The flags every yardstick takes (bare_cli.py), JAX's own; each script adds its model and batch flags."""
    p = bare_cli.parser(
        doc, warmup=warmup, steps=steps, windows=windows, warmup_help="tracing, XLA, autotune"
    )
    p.add_argument("--no-jit", dest="jit", action="store_false", help="run the step op by op")
    p.add_argument(
        "--prng", default="rbg", choices=("rbg", "threefry2x32"),
        help="the training step's PRNG implementation (dropout masks): rbg as dlbench (default)",
    )  # fmt: skip
    bare_cli.profile_flag(p)
    return p


def step_key(a: argparse.Namespace) -> jax.Array:
    """The training state's PRNG key, of the implementation --prng names."""
    return jax.random.key(0, impl=a.prng)


def run_all(p: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]) -> int:
    """One BARE line per (precision, mode) of the comma lists, in one process (bare_cli.run_all); the last
    configuration's compiled steps are dropped between them."""
    return bare_cli.run_all(p, run, lambda _: jax.clear_caches())


@dataclass
class Precision:
    """What a precision name means on a device: the device, the layers' compute dtype, loss scaling
    (float16 training only) and the matmul precision."""

    device: str  # "cuda" | "cpu"
    jax_device: Any
    compute_dtype: str
    loss_scaling: bool
    matmul_precision: str

    @property
    def dtype(self) -> Any:
        return jnp.dtype(self.compute_dtype)


def setup(a: argparse.Namespace) -> Precision:
    """The device, the matmul precision and the compute dtype."""
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # no GPU backend in this jaxlib
        gpus = []
    if a.device == "cuda" and not gpus:
        sys.exit(f"--device cuda: jax {jax.__version__} sees no GPU here")
    on_gpu = bool(gpus) and a.device != "cpu"
    dev = gpus[0] if on_gpu else jax.devices("cpu")[0]
    jax.config.update("jax_default_device", dev)
    compute = {"amp": "float16" if on_gpu else "bfloat16", "bf16": "bfloat16"}.get(a.precision, "float32")
    matmul = {"tf32": "tensorfloat32", "fp32": "highest"}.get(a.precision, "default")
    jax.config.update("jax_default_matmul_precision", matmul)
    return Precision(
        device="cuda" if on_gpu else "cpu",
        jax_device=dev,
        compute_dtype=compute,
        loss_scaling=compute == "float16" and a.mode == "train",
        matmul_precision=matmul,
    )


def jit(fn: Callable, a: argparse.Namespace, donate: tuple[int, ...] = ()) -> Callable:
    """The step `jax.jit`-compiled with `donate` arguments donated; --no-jit: the function as it is."""
    return jax.jit(fn, donate_argnums=donate) if a.jit else fn


def train_step(apply_loss: Callable, tx: optax.GradientTransformation, prec: Precision) -> Callable:
    """The plain Flax + Optax step over a state (params, batch_stats, opt_state, scale, key):
    `apply_loss(params, batch_stats, key, *batch)` returns (float32 loss, new batch_stats). float16:
    Flax's DynamicScale (a step with inf/NaN gradients is skipped and the scale halved)."""

    def step(state, *batch):
        params, stats, opt_state, scale, key = state
        key, sub = jax.random.split(key)

        def loss_of(p):
            return apply_loss(p, stats, sub, *batch)

        if scale is None:
            (loss, new_stats), grads = jax.value_and_grad(loss_of, has_aux=True)(params)
        else:
            scale, finite, (loss, new_stats), grads = scale.value_and_grad(loss_of, has_aux=True)(params)
        updates, new_opt = tx.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        if scale is not None:
            keep = lambda new, old: jax.tree.map(lambda x, y: jnp.where(finite, x, y), new, old)  # noqa: E731
            new_params, new_opt = keep(new_params, params), keep(new_opt, opt_state)
        return (new_params, new_stats, new_opt, scale, key), loss

    return step


def loss_scale(prec: Precision) -> Any:
    from flax.training.dynamic_scale import DynamicScale

    return DynamicScale() if prec.loss_scaling else None


def param_count(params: Any) -> int:
    """Trainable parameters (batch statistics excluded, like torch's buffers)."""
    return int(sum(math.prod(p.shape) for p in jax.tree.leaves(params)))


def measure(step: Callable[[], tuple[int, Any]], a: argparse.Namespace) -> tuple[list[float], Any]:
    """bare_cli.measure, the windows' edges block_until_ready on the last step's outputs (which depend on every
    earlier step). `step` returns (units done, its outputs). Returns (units/s per window, last outputs)."""
    return bare_cli.measure(
        step, a, jax.block_until_ready, profiler=lambda folder: jax.profiler.trace(str(folder))
    )


def report(a: argparse.Namespace, prec: Precision, rates: list[float], loss, **facts) -> int:
    """The BARE line (bare_cli.report) with JAX's facts; exit code 3 for a NaN or inf final loss."""
    mine = {
        "framework": "jax",
        "compile": bool(a.jit),  # jax.jit, read by yardsticks/page.py (its compiler is "jit")
        "device": prec.device,
        "compute_dtype": prec.compute_dtype,
        "loss_scale": "dynamic" if prec.loss_scaling else "none",
        "matmul_precision": prec.matmul_precision,
        "tf32": prec.matmul_precision == "tensorfloat32",
        "jax": jax.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
    }
    if prec.device == "cuda":
        mine["gpu"] = prec.jax_device.device_kind
    return bare_cli.report(a, rates, loss, {**facts, **mine})
