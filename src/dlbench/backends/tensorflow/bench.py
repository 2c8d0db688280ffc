"""The TensorFlow Bench: one Keras model, optimizer, input batch and precision on one device.

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
import tensorflow as tf

from dlbench.backends.base import BackendUnavailable, TimedSource
from dlbench.backends.tensorflow.models import build_model, trainable_params
from dlbench.backends.tensorflow.precision import TFPrecision
from dlbench.config import JobConfig

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


class SyntheticSource:
    """One batch of random inputs (NHWC) and int labels made once on the device, reused each step."""

    def __init__(self, job: JobConfig, dtype: str) -> None:
        m = job.model
        shape = (job.batch_size, m.image_size, m.image_size, m.channels)
        x = tf.random.stateless_normal(shape, seed=(0, 0), dtype=tf.float32)
        self.x = tf.identity(tf.cast(x, dtype))
        self.y = tf.random.stateless_uniform(
            (job.batch_size,), seed=(0, 1), minval=0, maxval=m.num_classes, dtype=tf.int32
        )

    def next(self) -> tuple[tf.Tensor, tf.Tensor]:
        return self.x, self.y

    def close(self) -> None:
        self.x = self.y = None


def make_source(job: JobConfig, tf_device: str, dtype: str):
    """Synthetic tensors, or the dataset through DALI (imported only then: DALI is optional)."""
    if job.dataset.name == "synthetic":
        return SyntheticSource(job, dtype)
    from dlbench.backends.tensorflow.dali_source import DaliSource

    return DaliSource(job, tf_device)


class TFBench:
    """Builds model, optimizer and data under the precision's Keras policy; runs tf.function steps."""

    def __init__(self, job: JobConfig) -> None:
        self.job = job
        self._tf_device, self.on_gpu = pick_device(job.device)
        self.device = "cuda:0" if self.on_gpu else "cpu"
        self.samples_per_step = job.batch_size
        self.prec = TFPrecision(job.precision, self.on_gpu)  # sets the policy: before the model
        self.train = job.mode == "train"
        self._seen: dict[str, str] = {}
        self._out: tf.Tensor | None = None
        with tf.device(self._tf_device):
            self.model = build_model(job.model, input_dtype=self.prec.variable_dtype)
            self.stem = self.model.get_layer("stem_conv")
            # Same layers, two extra outputs: the first conv's and the last dense's real output
            # tensors, whose dtypes the step records while tracing (what the device really computes).
            self._net = keras.Model(
                self.model.inputs,
                [self.model.output, self.stem.output, self.model.get_layer("logits").output],
            )
            self.opt: keras.optimizers.Optimizer | None = None
            if self.train:
                self.opt = self.prec.wrap_optimizer(keras.optimizers.SGD(learning_rate=0.01, momentum=0.9))
                self.opt.build(self.model.trainable_variables)  # slots made eagerly, not in the trace
            self.source = TimedSource(make_source(job, self._tf_device, self.prec.variable_dtype))
        body = self._train_step if self.train else self._infer_step
        self._step = tf.function(body, jit_compile=bool(job.framework.xla))
        if self.on_gpu:
            tf.config.experimental.reset_memory_stats("GPU:0")

    def _record(self, conv: tf.Tensor, matmul: tf.Tensor) -> None:
        # Runs while tracing: a graph tensor's dtype is the dtype the kernels produce.
        self._seen.setdefault("conv", conv.dtype.name)
        self._seen.setdefault("matmul", matmul.dtype.name)

    def _train_step(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        variables = self.model.trainable_variables
        x = tf.cast(x, self.prec.variable_dtype)  # no-op unless a data source feeds another dtype
        with tf.GradientTape() as tape:
            logits, conv, matmul = self._net(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            scaled = self.opt.scale_loss(loss) if self.prec.loss_scaling else loss
        self._record(conv, matmul)
        grads = tape.gradient(scaled, variables)
        self.opt.apply(grads, variables)  # LossScaleOptimizer unscales and skips non-finite steps
        return loss

    def _infer_step(self, x: tf.Tensor) -> tf.Tensor:
        x = tf.cast(x, self.prec.variable_dtype)
        logits, conv, matmul = self._net(x, training=False)
        self._record(conv, matmul)
        return logits

    def step(self) -> None:
        x, y = self.source.next()
        with tf.device(self._tf_device):
            self._out = self._step(x, y) if self.train else self._step(x)

    def sync(self) -> None:
        if _SYNC_DEVICES is not None:
            _SYNC_DEVICES()
        elif self._out is not None:  # older TF: waits for the last output only (see module doc)
            tf.reduce_sum(tf.cast(self._out, tf.float32)).numpy()

    def loss(self) -> float | None:
        return float(self._out.numpy()) if (self.train and self._out is not None) else None

    def data_wait_s(self) -> float:
        return self.source.wait_s

    def memory(self) -> int | None:
        return int(tf.config.experimental.get_memory_info("GPU:0")["peak"]) if self.on_gpu else None

    def precision_report(self) -> dict[str, Any]:
        stem = self.stem
        return {
            # observed in a traced step; before any step, what the layer's policy says
            "compute_dtype": self._seen.get("conv", stem.compute_dtype),
            "matmul_dtype": self._seen.get("matmul", "unknown"),
            "layer_compute_dtype": stem.compute_dtype,
            "param_dtype": keras.backend.standardize_dtype(stem.kernel.dtype),
            "memory_format": "channels_last",
            "xla": bool(self.job.framework.xla),
            **self.prec.flags(self.opt),
            **self.source.facts(),
        }

    def params(self) -> int:
        return trainable_params(self.model)

    def close(self) -> None:
        self.source.close()
        self._out = None
        keras.backend.clear_session()
