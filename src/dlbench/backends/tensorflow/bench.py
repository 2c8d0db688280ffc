"""The TensorFlow Bench: the task's Keras model, loss, optimizer, input and precision on one device, or
mirrored over several (devices=N: tf.distribute.MirroredStrategy in this process, backends/tensorflow/replicas.py).

Steps are tf.functions (XLA when framework.xla). A tf.function call returns once its kernels are
*enqueued* on a GPU stream, so step() does not wait for the GPU; on CPU, TF's default synchronous
eager executor returns only when the function has run, so there every step is implicitly synced
(that is TF's behaviour, not something the timing can avoid).

sync() uses tf.test.experimental.sync_devices() (TF >= 2.12): it runs a SyncDevice op on every
logical device and then drains the eager executor's queue, so it waits for *all* queued work,
including the optimizer's variable updates that come after the loss. Reading the loss (.numpy())
would only wait for the kernels the loss depends on, and would under-measure a train step.
"""

from __future__ import annotations

import contextlib
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from dlbench.backends.skeleton import SpecBench
from dlbench.backends.tensorflow import replicas
from dlbench.backends.tensorflow.capability import bf16_under_cap
from dlbench.backends.tensorflow.family import TFFamily, call_model, trainable_params
from dlbench.backends.tensorflow.optimizers import make_optimizer
from dlbench.backends.tensorflow.precision import LayerProbe, TFPrecision
from dlbench.config import JobConfig
from dlbench.core.bench import Batch, TimedSource
from dlbench.core.precision import plan_precision
from dlbench.data.synthetic import HostBatch
from dlbench.errors import BackendUnavailable

_SYNC_DEVICES = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)


def pick_device(requested: str) -> tuple[str, bool]:
    """Return (TF device name, on_gpu). Configures GPUs first: memory growth must be set before
    anything initialises the GPU, or TF reserves nearly all of its memory at start."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        # RuntimeError: the runtime was initialised by an earlier build in this process
        with contextlib.suppress(RuntimeError):
            tf.config.experimental.set_memory_growth(gpu, True)
    if requested == "cuda" and not gpus:
        cuda = tf.sysconfig.get_build_info().get("is_cuda_build", False)
        raise BackendUnavailable(
            f"framework=tf device=cuda: TensorFlow {tf.__version__} sees no GPU here (CUDA build: {cuda}); "
            "use device=cpu or device=auto, or install tensorflow[and-cuda]"
        )
    if requested == "cpu" or not gpus:
        if gpus:
            # RuntimeError: already initialised; the tf.device("/CPU:0") scope still pins the work
            with contextlib.suppress(RuntimeError):
                tf.config.set_visible_devices([], "GPU")
        return "/CPU:0", False
    return "/GPU:0", True


def to_tf_layout(tensor: tf.Tensor, layout: str | None) -> tf.Tensor:
    """Channels last, as Keras convolutions want: a "C.." per-sample layout moves C to the end. Done where
    the tensor lives (the GPU), as PyTorch's channels-last copy is: a host transpose of a batch of images
    costs tens of milliseconds, which a served query would pay."""
    rank = len(tensor.shape)
    if layout and layout[0] == "C" and rank == len(layout) + 1:
        return tf.transpose(tensor, [0, *range(2, rank), 1])
    return tensor


class TFBench(SpecBench):
    """The job's workload as its TFFamily (workloads/<task>/tensorflow.py) builds, runs and scores it; its
    `infer` is traced into the inference tf.function unless the family marks it `eager_infer`."""

    def __init__(self, job: JobConfig) -> None:
        super().__init__(job)
        self._tf_device, self.on_gpu = pick_device(job.device)
        self.device = "cuda:0" if self.on_gpu else "cpu"
        # devices>1 only: the strategy that mirrors the model over the devices; one device has none
        self.strategy = replicas.mirrored(job.devices, self.on_gpu) if job.devices > 1 else None
        plan = plan_precision(job.precision, "cuda" if self.on_gpu else "cpu")
        if not self.on_gpu and plan.compute_dtype == "bfloat16" and (why := bf16_under_cap()):
            raise BackendUnavailable(f"framework=tf precision={job.precision.name}: {why}")
        self.prec = TFPrecision(plan)  # before the model
        self._out: tf.Tensor | None = None
        keras.utils.set_random_seed(job.schedule.seed)  # initial weights, dropout: the run's seed, every mode
        family = self.load_family(TFFamily)
        with self._placed():
            self.model = family.build_model(job.model, float_dtype=self.prec.variable_dtype)
            self.seed_weights(self.model)
            self.family_facts = family.run_facts(self.model)
            self.probe = LayerProbe(self.model)
            self.loss_fn = family.loss(self.spec)
            self.opt: keras.optimizers.Optimizer | None = None
            if self.train:
                self.opt = self.prec.wrap_optimizer(make_optimizer(self.spec.optimizer))
                self.opt.build(self.model.trainable_variables)  # slots made eagerly, not in the trace
            self._open_sources()
        body = self._train_step if self.train else self._infer_step
        # an `infer` marked eager runs a host loop (greedy decoding reads a device flag per step);
        # reduce_retracing: batches whose sequence lengths vary get one relaxed trace, not one each
        eager = not self.train and family.eager_infer
        if family.eager_infer:
            family.compile_infer(self.model, bool(job.framework.xla))
        # devices>1: mode=train only, and never XLA (both refused by config.devices_problems)
        if self.strategy is not None:
            self._step = tf.function(replicas.replicated(self.strategy, body), reduce_retracing=True)
        else:
            self._step = (
                body
                if eager
                else tf.function(body, jit_compile=bool(job.framework.xla), reduce_retracing=True)
            )
        # mode=converge's evaluation (predict) runs the inference step, traced unless `infer` is eager
        self._predict = (
            self._infer_step
            if family.eager_infer
            else tf.function(self._infer_step, jit_compile=bool(job.framework.xla), reduce_retracing=True)
        )
        if self.on_gpu:
            tf.config.experimental.reset_memory_stats("GPU:0")

    def _placed(self) -> Any:
        """Where the model, optimizer and data are made: the strategy's scope (mirrored variables), else
        the one device."""
        return self.strategy.scope() if self.strategy is not None else tf.device(self._tf_device)

    # ---- data ----------------------------------------------------------------------------------
    def _open_sources(self) -> None:
        """The job's source; on several devices one per replica, each with the replica's data shard and
        its batches on the replica's device, read together by a ReplicaSource."""
        if self.strategy is None:
            self.open_source(self._to_device)
            return
        data, sources = self.job.data, []
        shard = (data.shard_id, data.num_shards)
        try:
            for r, device in enumerate(self.strategy.extended.worker_devices):
                data.shard_id, data.num_shards = r, len(self.strategy.extended.worker_devices)
                with tf.device(device):
                    self.open_source(self._to_device)
                sources.append(self.source)
        finally:
            data.shard_id, data.num_shards = shard
        self.source = TimedSource(replicas.ReplicaSource(self.strategy, sources))

    def _tensor(self, array: np.ndarray, is_float: bool, layout: str | None) -> tf.Tensor:
        tensor = tf.identity(tf.constant(array, dtype=self.prec.variable_dtype if is_float else None))
        return to_tf_layout(tensor, layout)

    def _to_device(self, host: HostBatch) -> Batch:
        s = self.spec
        return Batch(
            tuple(self._tensor(host.inputs[k], t.is_float, t.layout) for k, t in s.inputs.items()),
            tuple(
                self._tensor(host.targets[k], t.is_float, t.layout)
                for k, t in s.targets.items()
                if k in host.targets  # absent: the step makes them (device negatives)
            ),
            host.units,
        )

    def _cast(self, inputs: tuple) -> tuple:
        # no-op unless a data source feeds floats in another dtype than the model's variables
        return tuple(tf.cast(x, self.prec.variable_dtype) if x.dtype.is_floating else x for x in inputs)

    # ---- the step ------------------------------------------------------------------------------
    def _train_step(self, inputs: tuple, targets: tuple) -> tf.Tensor:
        variables = self.model.trainable_variables
        inputs, targets = self.with_negatives(self._cast(inputs), targets)  # traced: drawn every call
        with tf.GradientTape() as tape:
            loss = self.loss_fn(call_model(self.model, inputs, True), *targets)
            # on several devices each replica's share of the global batch's mean (replicas.py)
            share = loss / self.strategy.num_replicas_in_sync if self.strategy is not None else loss
            scaled = self.opt.scale_loss(share) if self.prec.loss_scaling else share
        grads = tape.gradient(scaled, variables)
        self.opt.apply(grads, variables)  # LossScaleOptimizer unscales and skips non-finite steps
        return loss

    def _infer_step(self, inputs: tuple, targets: tuple) -> Any:
        inputs = self._cast(inputs)
        return self.family.infer(self.model, inputs)

    def step(self) -> None:
        batch = self.source.next()
        with self._placed():
            self._out = self._step(batch.inputs, batch.targets)
        if self.probe.active:  # the first trace has shown the dtypes; later traces stay unwrapped
            self.probe.remove()

    def predict(self, host: HostBatch) -> Any:
        """The model's outputs for a host batch as float32 numpy (mode=converge scores them with
        the workload's eval): inference mode (training=False), the job's precision."""
        batch = self._to_device(host)
        with tf.device(self._tf_device):
            out = self._predict(batch.inputs, batch.targets)
        outs = tuple(np.asarray(tf.cast(o, tf.float32)) for o in tf.nest.flatten(out))
        return outs[0] if len(outs) == 1 else outs

    def sync(self) -> None:
        if _SYNC_DEVICES is not None:
            _SYNC_DEVICES()
        elif self._out is not None:  # older TF: waits for the last output only (see module doc)
            first = tf.nest.flatten(self._out)[0]
            tf.reduce_sum(tf.cast(first, tf.float32)).numpy()

    def loss(self) -> float | None:
        return float(self._out.numpy()) if (self.train and self._out is not None) else None

    def memory(self) -> int | None:
        """The allocator's peak on one GPU: the largest over the replicas' GPUs with devices>1 (as torch's
        rank 0 and JAX's mesh report it: per device, not summed); None on the CPU."""
        if not self.on_gpu:
            return None
        names = self.strategy.extended.worker_devices if self.strategy is not None else ("GPU:0",)
        return max(int(tf.config.experimental.get_memory_info(n.split("device:")[-1])["peak"]) for n in names)

    def precision_report(self) -> dict[str, Any]:
        weights = self.model.trainable_weights
        return {
            **self.probe.record.facts(),  # observed on real output tensors while the step was traced
            "param_dtype": keras.backend.standardize_dtype(weights[0].dtype) if weights else "unknown",
            **self.prec.flags(self.opt),
        }

    def run_facts(self) -> dict[str, Any]:
        return {
            **super().run_facts(),
            "optimizer": self.spec.optimizer.kind if self.train else "none",
            **(
                {"memory_format": "channels_last"} if any(t.layout for t in self.spec.inputs.values()) else {}
            ),
            "xla": bool(self.job.framework.xla),
        }

    def ranks_facts(self) -> dict[str, Any]:
        """devices>1: the strategy, its replicas and their devices (recorded as ranks.*); {} on one device."""
        return replicas.strategy_facts(self.strategy, self.on_gpu) if self.strategy is not None else {}

    def params(self) -> int:
        return trainable_params(self.model)

    def close(self) -> None:
        super().close()
        self._out = None
        keras.backend.clear_session()
