"""The MXNet Bench: one Gluon network, trainer, input batch and precision on one context."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from dlbench.backends.base import BackendUnavailable, TimedSource
from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.models import build_model, first_conv, initialize, trainable_params
from dlbench.backends.mxnet.precision import MXPrecision, cast_network, dtype_name
from dlbench.config import JobConfig

HOPPER = (9, 0)  # MXNet 1.9.1's CUDA builds (mxnet-cu117 and older) carry no sm_90 code


def gpu_info() -> tuple[str, tuple[int, int]] | None:
    """(name, compute capability) of GPU 0 from NVML, else from MXNet's CUDA build; None if none."""
    try:
        import pynvml
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError:
            pass
        else:
            try:
                if pynvml.nvmlDeviceGetCount() > 0:
                    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
                    name = pynvml.nvmlDeviceGetName(handle)
                    name = name.decode() if isinstance(name, bytes) else str(name)
                    major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
                    return name, (int(major), int(minor))
            except pynvml.NVMLError:
                pass
            finally:
                pynvml.nvmlShutdown()
    if mx.context.num_gpus() > 0:  # only a CUDA build of MXNet sees GPUs
        cc = int(mx.util.get_cuda_compute_capability(mx.gpu(0)))
        return "GPU 0", (cc // 10, cc % 10)
    return None


def pick_context(requested: str) -> tuple[Any, str | None]:
    """The context to run on and, when device=auto could not use a present GPU, the reason why."""
    if requested == "cpu":
        return mx.cpu(), None
    gpu = gpu_info()
    if gpu is not None and gpu[1] >= HOPPER:
        name, (major, minor) = gpu
        reason = (
            f"framework=mxnet device=cuda: MXNet 1.9.1 has no code for {name} (sm_{major}{minor}); its CUDA "
            "builds (mxnet-cu117 and older) stop before Hopper, so MXNet can only run on the CPU here"
        )
        if requested == "cuda":
            raise BackendUnavailable(reason)
        return mx.cpu(), reason.replace("device=cuda:", "device=auto fell back to cpu:", 1)
    if mx.context.num_gpus() > 0:
        return mx.gpu(0), None
    if requested == "cuda":
        raise BackendUnavailable(
            "framework=mxnet device=cuda: this MXNet build sees no GPU (PyPI's mxnet is CPU-only; a GPU "
            "needs an mxnet-cuXXX build); use device=cpu or device=auto"
        )
    if gpu is not None:
        return (
            mx.cpu(),
            f"framework=mxnet device=auto fell back to cpu: {gpu[0]} is present but this MXNet build is CPU-only",
        )
    return mx.cpu(), None


class SyntheticSource:
    """One batch of random inputs and integer labels made once on the context and reused every step."""

    def __init__(self, job: JobConfig, ctx: Any, dtype: Any) -> None:
        m = job.model
        rng = np.random.default_rng(0)
        shape = (job.batch_size, m.channels, m.image_size, m.image_size)
        x = mx.nd.array(rng.standard_normal(shape, dtype=np.float32), ctx=ctx)
        self.x = x if np.dtype(dtype) == np.float32 else mx.nd.amp_cast(x, dtype=dtype)
        labels = rng.integers(0, m.num_classes, job.batch_size)
        self.y = mx.nd.array(labels, ctx=ctx, dtype=np.float32)  # the loss picks with float indices

    def next(self) -> tuple[Any, Any]:
        return self.x, self.y

    def close(self) -> None:
        self.x = self.y = None


def make_source(job: JobConfig, ctx: Any, dtype: Any) -> Any:
    """Synthetic NDArrays, or the dataset through DALI (imported only then: DALI is optional)."""
    if job.dataset.name == "synthetic":
        return SyntheticSource(job, ctx, dtype)
    from dlbench.backends.mxnet.dali_source import DaliSource

    return DaliSource(job, ctx)


class MXNetBench:
    """Bench protocol (dlbench.backends.base.Bench) for Gluon: SGD momentum 0.9, softmax cross-entropy."""

    def __init__(self, job: JobConfig) -> None:
        self.job = job
        ctx, self.fallback = pick_context(job.device)
        if self.fallback:
            print(f"dlbench mxnet: warning: {self.fallback}", file=sys.stderr, flush=True)
        self.ctx = ctx
        self.device = "cuda:0" if ctx.device_type == "gpu" else "cpu"
        self.samples_per_step = job.batch_size
        desc = f"framework=mxnet precision={job.precision.name} device={self.device}"
        self.train = job.mode == "train"
        # before the net: amp.init rewraps the operators the net is built from
        self.prec = MXPrecision(job.precision, ctx, self.train, desc)
        net = build_model(job.model, train=self.train)
        initialize(net, job.model, ctx)
        if self.prec.param_name != "float32":
            cast_network(net, self.prec.param_name)
        self.hybridized = bool(job.framework.hybridize)
        self.loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
        if self.hybridized:
            net.hybridize(static_alloc=True, static_shape=True)
            self.loss_fn.hybridize(static_alloc=True, static_shape=True)
        self.net = net
        self.trainer = None
        if self.train:
            self.trainer = mx.gluon.Trainer(
                net.collect_params(),
                "sgd",
                # float16-cast weights: float32 master copies, as MXNet's fp16 training does
                {
                    "learning_rate": 0.01,
                    "momentum": 0.9,
                    "multi_precision": self.prec.param_name == "float16",
                },
            )
            self.prec.attach(self.trainer)
        self.source = TimedSource(make_source(job, ctx, self.prec.param_dtype))
        self._last_x: Any = None
        self._loss: Any = None
        self._out: Any = None
        self._mem_peak = 0
        self._report: dict[str, Any] | None = None

    def _batch(self) -> tuple[Any, Any]:
        x, y = self.source.next()
        # A cast network needs its own dtype (DALI has no bfloat16); under AMP the net casts itself.
        if self.prec.param_name != "float32" and dtype_name(x.dtype) != self.prec.param_name:
            x = mx.nd.amp_cast(x, dtype=self.prec.param_dtype)
        self._last_x = x
        return x, y

    def step(self) -> None:
        x, y = self._batch()
        if not self.train:
            self._out = self.net(x)  # outside autograd.record: predict mode (BN statistics, no dropout)
            return
        with mx.autograd.record():
            out = self.net(x)
            if self.prec.param_name != "float32":
                out = mx.nd.amp_cast(out, dtype=np.float32)  # softmax + log in float32
            loss = self.loss_fn(out, y)
        self.prec.backward(loss)
        self.trainer.step(self.samples_per_step)
        self._loss = loss

    def sync(self) -> None:
        mx.nd.waitall()
        if self.ctx.device_type == "gpu":
            self._mem_peak = max(self._mem_peak, self._gpu_used())

    def _gpu_used(self) -> int:
        free, total = mx.context.gpu_memory_info(self.ctx.device_id)
        return int(total - free)

    def loss(self) -> float | None:
        return float(self._loss.mean().asscalar()) if self._loss is not None else None

    def data_wait_s(self) -> float:
        return self.source.wait_s

    def memory(self) -> int | None:
        """GPU memory in use (MXNet's pooled allocator keeps what it took), max over syncs; None on CPU."""
        if self.ctx.device_type != "gpu":
            return None
        return max(self._mem_peak, self._gpu_used())

    def precision_report(self) -> dict[str, Any]:
        """Read back from real computation: the first conv's output dtype on the bench's own input and
        the amp_cast nodes AMP put into the traced graph."""
        if self._report is None:
            conv = first_conv(self.net)
            with mx.autograd.pause(train_mode=self.train):
                out = conv(self._last_x if self._last_x is not None else self._batch()[0])
                out.wait_to_read()
            sym = self.net(mx.sym.var("data"))
            casts = sum(
                1 for n in sym.get_internals().list_outputs() if "amp_cast" in n or "amp_multicast" in n
            )
            self._report = {
                "compute_dtype": dtype_name(out.dtype),
                "param_dtype": dtype_name(conv.weight.data(self.ctx).dtype),
                "amp_cast_ops": casts,
                "hybridized": self.hybridized,
                "context": str(self.ctx),
            }
            if self.fallback:
                self._report["device_fallback"] = self.fallback
            self._report |= self.source.facts()
        return {**self._report, **self.prec.flags()}

    def params(self) -> int:
        return trainable_params(self.net)

    def close(self) -> None:
        mx.nd.waitall()
        self.source.close()
