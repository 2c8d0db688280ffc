"""What the TensorFlow yardsticks (bare_tf_*.py) share: flags, the precision switches, the tf.function step
(XLA or graph), warm-up then timed windows synchronized only at their edges, and the one `BARE {json}` line
each prints (the keys of the PyTorch yardsticks' line, plus "framework": "tf", "xla", "tf" and "params").

It imports nothing from dlbench on purpose: a yardstick is the loop a careful Keras user writes by hand, and
dlbench's figure for the same job must come within 1% of it in the same command.

Precision, as dlbench defines it (set before a model is built: Keras layers read the global policy then):
  fp32 -> policy float32, TF32 off (TF enables TF32 by default, so true FP32 must switch it off)
  tf32 -> policy float32, TF32 on
  amp  -> mixed_float16 + LossScaleOptimizer on a GPU (its finiteness check of an embedding's sparse gradient
          made on the looked-up rows: SparseLossScaleOptimizer); mixed_bfloat16 (no loss scaling) on the CPU
  bf16 -> mixed_bfloat16
Float inputs arrive as float32 (the variables' dtype, as dlbench's synthetic data does): the first layer casts.

The step is one tf.function call per step (jit_compile=True with --xla), as dlbench's TF bench runs it; a
call returns once its kernels are enqueued on a GPU, so the device is synchronized only at window edges,
with tf.test.experimental.sync_devices() (what dlbench's TF bench uses): it waits for all queued work,
the optimizer's variable updates included, which reading the loss back would not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bare_cli  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def parser(doc: str, *, warmup: int, steps: int, windows: int) -> argparse.ArgumentParser:
    """The flags every yardstick takes (bare_cli.py), TF's own; each script adds its model and batch flags."""
    p = bare_cli.parser(
        doc, warmup=warmup, steps=steps, windows=windows, warmup_help="tracing, XLA, autotune"
    )
    p.add_argument("--xla", action="store_true", help="tf.function(jit_compile=True); else graph mode")
    return p


def run_all(p: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]) -> int:
    """One BARE line per (precision, mode) of the comma lists, each configuration in a process of its own
    (this script again, with one precision and one mode), as dlbench runs each job. In one process, TF32
    switched on after an fp32 run left the convolutions at fp32's speed (graph-mode SSD300 training on an
    H100: 166 img/s after fp32, 290 alone) while matmuls followed the switch (Transformer-base): TF keeps
    the convolution algorithms it autotuned first, it seems. Returns the worst exit code."""
    a = bare_cli.parse(p)
    configs = bare_cli.configurations(a)
    if len(configs) == 1:
        return run(a)
    # SIGTERM ends this process through SystemExit, so subprocess.run kills the running configuration too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    code = 0
    for precision, mode in configs:  # argparse keeps the last of a repeated flag
        one = [sys.executable, sys.argv[0], *sys.argv[1:], "--precision", precision, "--mode", mode]
        rc = subprocess.run(one).returncode
        code = max(code, rc if rc >= 0 else 128 - rc)  # a child killed by signal N: 128 + N, as a shell says
    return code


class SparseLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras' LossScaleOptimizer, checking a sparse gradient (tf.IndexedSlices, an embedding's looked-up rows)
    on its rows only. Keras's `ops.isfinite` densifies one with a bool `tf.tensor_scatter_nd_update`, which
    has no GPU kernel: in graph mode TF runs it on the host, every step (NCF's four tables at 2^20 samples:
    about 400 MB of bools copied to the host and scattered there). The rows left out are zeros, so the
    verdict is the same; a Keras user who profiles the step writes this."""

    def check_finite(self, grads):
        return super().check_finite([g.values if isinstance(g, tf.IndexedSlices) else g for g in grads])


@dataclass
class Precision:
    """What a precision name means on a device: the Keras policy, compute dtype, variable dtype, loss
    scaling (float16 training only) and the TF device string."""

    device: str  # "cuda" | "cpu"
    tf_device: str  # "/GPU:0" | "/CPU:0"
    policy: str
    compute_dtype: str
    variable_dtype: str
    loss_scaling: bool

    def scope(self) -> contextlib.AbstractContextManager:
        return tf.device(self.tf_device)

    def wrap(self, opt: keras.optimizers.Optimizer) -> keras.optimizers.Optimizer:
        return SparseLossScaleOptimizer(opt) if self.loss_scaling else opt


def setup(a: argparse.Namespace) -> Precision:
    """Device (memory growth on), seeds, TF32 switch and the global Keras dtype policy."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        with contextlib.suppress(RuntimeError):  # already initialised by an earlier configuration
            tf.config.experimental.set_memory_growth(gpu, True)
    if a.device == "cuda" and not gpus:
        sys.exit(f"--device cuda: TensorFlow {tf.__version__} sees no GPU here")
    on_gpu = bool(gpus) and a.device != "cpu"
    if gpus and not on_gpu:
        with contextlib.suppress(RuntimeError):
            tf.config.set_visible_devices([], "GPU")
    keras.utils.set_random_seed(a.seed)
    tf.config.experimental.enable_tensor_float_32_execution(a.precision == "tf32")
    compute = {"amp": "float16" if on_gpu else "bfloat16", "bf16": "bfloat16"}.get(a.precision, "float32")
    policy = f"mixed_{compute}" if compute != "float32" else "float32"
    keras.mixed_precision.set_global_policy(policy)
    return Precision(
        device="cuda" if on_gpu else "cpu",
        tf_device="/GPU:0" if on_gpu else "/CPU:0",
        policy=policy,
        compute_dtype=compute,
        variable_dtype="float32",
        loss_scaling=compute == "float16" and a.mode == "train",
    )


def function(fn: Callable, a: argparse.Namespace) -> Callable:
    """The step as a tf.function: XLA-compiled with --xla, a TF graph otherwise."""
    return tf.function(fn, jit_compile=bool(a.xla))


def on_device(array: np.ndarray, dtype: str | None = None) -> tf.Tensor:
    """A host array copied to the current device once (call inside Precision.scope())."""
    return tf.identity(tf.constant(array, dtype=dtype))


def train_step(model: keras.Model, opt: keras.optimizers.Optimizer, loss_of: Callable, prec: Precision):
    """The plain Keras 3 custom training step: tape, (scaled) gradients, optimizer.apply. `loss_of(model,
    *batch)` returns the float32 scalar loss."""
    variables = model.trainable_variables

    def step(*batch):
        with tf.GradientTape() as tape:
            loss = loss_of(model, *batch)
            scaled = opt.scale_loss(loss) if prec.loss_scaling else loss
        grads = tape.gradient(scaled, variables)
        opt.apply(grads, variables)  # LossScaleOptimizer unscales and skips non-finite steps
        return loss

    return step


def build_optimizer(opt: keras.optimizers.Optimizer, model: keras.Model, prec: Precision):
    """Wrap for loss scaling and make the slots eagerly (not inside the first trace)."""
    opt = prec.wrap(opt)
    opt.build(model.trainable_variables)
    return opt


def param_count(model: keras.Model) -> int:
    """Trainable parameters (BN moving statistics excluded, like torch's buffers)."""
    return int(sum(np.prod(v.shape) for v in model.trainable_weights))


def sync() -> None:
    tf.test.experimental.sync_devices()


def measure(step: Callable[[], tuple[int, tf.Tensor | None]], a: argparse.Namespace, prec: Precision):
    """bare_cli.measure in the precision's scope, the windows' edges draining the devices (`sync`). `step`
    returns (units done, loss or None). Returns (units/s per window, last loss)."""
    with prec.scope():
        return bare_cli.measure(step, a, lambda _: sync())


def gpu_name() -> str | None:
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    details = tf.config.experimental.get_device_details(gpus[0])
    return details.get("device_name")


def report(a: argparse.Namespace, prec: Precision, rates: list[float], loss, **facts) -> int:
    """The BARE line (bare_cli.report) with TF's facts; exit code 3 for a NaN or inf final loss."""
    mine = {
        "framework": "tf",
        "compile": False,  # torch.compile: never here (the execution mode is "xla"); read by yardsticks/page.py
        "device": prec.device,
        "compute_dtype": prec.compute_dtype,
        "policy": prec.policy,
        "loss_scale": "dynamic" if prec.loss_scaling else "none",
        "tf32": bool(tf.config.experimental.tensor_float_32_execution_enabled()),
        "tf": tf.__version__,
        "keras": keras.__version__,
        "pid": os.getpid(),  # one process per configuration (run_all)
    }
    if prec.device == "cuda":
        mine["gpu"] = gpu_name()
    return bare_cli.report(a, rates, loss, {**facts, **mine})
