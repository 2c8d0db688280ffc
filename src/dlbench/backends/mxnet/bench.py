"""The MXNet Bench: the task's Gluon network, loss, trainer, input and precision on one context."""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.capability import HOPPER
from dlbench.backends.mxnet.family import MXNetFamily, trainable_params
from dlbench.backends.mxnet.optimizers import make_trainer
from dlbench.backends.mxnet.precision import LayerProbe, MXPrecision, cast_network, dtype_name
from dlbench.backends.skeleton import SpecBench
from dlbench.config import JobConfig
from dlbench.core.bench import Batch
from dlbench.core.precision import plan_precision
from dlbench.data.synthetic import HostBatch
from dlbench.errors import BackendUnavailable
from dlbench.telemetry.nvml import visible_gpus


def gpu_info() -> tuple[str, tuple[int, int]] | None:
    """(name, compute capability) of the first visible GPU from NVML, else from MXNet's CUDA build; None if
    none."""
    gpus = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"))
    if gpus:
        return gpus[0]
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


def as_outputs(out: Any) -> tuple:
    return tuple(out) if isinstance(out, (list, tuple)) else (out,)


class MXNetBench(SpecBench):
    """The job's workload as its MXNetFamily (workloads/<task>/mxnet.py) builds, initializes, runs and
    scores it."""

    def __init__(self, job: JobConfig) -> None:
        super().__init__(job)
        ctx, self.fallback = pick_context(job.device)
        if self.fallback:
            print(f"dlbench mxnet: warning: {self.fallback}", file=sys.stderr, flush=True)
        self.ctx = ctx
        self.device = "cuda:0" if ctx.device_type == "gpu" else "cpu"
        desc = f"framework=mxnet precision={job.precision.name} device={self.device}"
        plan = plan_precision(job.precision, "cuda" if ctx.device_type == "gpu" else "cpu")
        # before the net: amp.init rewraps the operators the net is built from
        self.prec = MXPrecision(plan, ctx, self.train, desc)
        mx.random.seed(job.schedule.seed)  # initial weights, dropout: the run's seed, in every mode
        family = self.load_family(MXNetFamily)
        net = family.build_model(job.model, train=self.train)
        family.initialize(net, job.model, ctx)
        self.seed_weights(net)
        if self.prec.param_name != "float32":
            cast_network(net, self.prec.param_name)
        self.hybridized = bool(job.framework.hybridize)
        self.loss_fn = family.loss(self.spec)
        if self.hybridized:
            net.hybridize(static_alloc=True, static_shape=True)
            self.loss_fn.hybridize(static_alloc=True, static_shape=True)
        self.net = net
        self.family_facts = family.run_facts(net)
        self.probe = LayerProbe(net, list(self.spec.inputs))
        self.trainer = None
        if self.train:
            multi = self.prec.param_name == "float16"
            self.trainer = make_trainer(net.collect_params(), self.spec.optimizer, multi)
            self.prec.attach(self.trainer)
        self.open_source(self._to_device)
        self._last: Batch | None = None
        self._loss: Any = None
        self._out: Any = None
        self._mem_peak = 0
        self._report: dict[str, Any] | None = None

    # ---- data ----------------------------------------------------------------------------------
    def _array(self, array: np.ndarray, is_float: bool, target: bool) -> Any:
        if not is_float:
            # Gluon's losses pick with float indices: integer targets travel as float32
            return mx.nd.array(array, ctx=self.ctx, dtype=np.float32 if target else array.dtype)
        x = mx.nd.array(array, ctx=self.ctx, dtype=np.float32)
        return x if self.prec.param_name == "float32" else mx.nd.amp_cast(x, dtype=self.prec.param_dtype)

    def _to_device(self, host: HostBatch) -> Batch:
        s = self.spec
        return Batch(
            tuple(self._array(host.inputs[k], t.is_float, False) for k, t in s.inputs.items()),
            tuple(
                self._array(host.targets[k], t.is_float, True)
                for k, t in s.targets.items()
                if k in host.targets  # absent: the step makes them (device negatives)
            ),
            host.units,
        )

    def _batch(self) -> Batch:
        batch = self._cast_inputs(self.source.next())
        self._last = batch
        return batch

    def _cast_inputs(self, batch: Batch) -> Batch:
        # A cast network needs its own dtype (DALI has no bfloat16); under AMP the net casts itself.
        if self.prec.param_name != "float32":
            inputs = tuple(
                mx.nd.amp_cast(x, dtype=self.prec.param_dtype)
                if np.issubdtype(np.dtype(x.dtype), np.floating)
                and dtype_name(x.dtype) != self.prec.param_name
                else x
                for x in batch.inputs
            )
            batch = Batch(inputs, batch.targets, batch.units)
        return batch

    def predict(self, host: HostBatch) -> Any:
        """The network's outputs for a host batch as float32 numpy (mode=converge scores them with
        the workload's eval): outside autograd.record, i.e. predict mode, in the job's precision."""
        inputs = self._cast_inputs(self._to_device(host)).inputs
        out = self.family.infer(self.net, inputs)
        outs = tuple(_float32_host(o) for o in as_outputs(out))
        return outs[0] if len(outs) == 1 else outs

    # ---- the step ------------------------------------------------------------------------------
    def step(self) -> None:
        batch = self._batch()
        if not self.train:  # outside autograd.record: predict mode (BN statistics, no dropout)
            self._out = self.family.infer(self.net, batch.inputs)
            return
        inputs, targets = self.with_negatives(batch.inputs, batch.targets)
        with mx.autograd.record():
            outs = as_outputs(self.net(*inputs))
            if self.prec.param_name != "float32":  # the loss (softmax + log...) in float32
                outs = tuple(mx.nd.amp_cast(o, dtype=np.float32) for o in outs)
            loss = self.loss_fn(*outs, *targets)
        self.prec.backward(loss)
        # per-sample losses are averaged over the rows really trained on (NCF: positives + negatives);
        # a loss that is already its batch's mean (e.g. per target token) is not divided again
        self.trainer.step(1 if self.family.loss_averaged else loss.shape[0])
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

    def memory(self) -> int | None:
        """GPU memory in use (MXNet's pooled allocator keeps what it took), max over syncs; None on CPU."""
        if self.ctx.device_type != "gpu":
            return None
        return max(self._mem_peak, self._gpu_used())

    def precision_report(self) -> dict[str, Any]:
        """Read back from real computation: the first and last weight-carrying ops of the network's graph
        run on the bench's own last batch, and the amp_cast nodes AMP put into that graph."""
        if self._report is None:
            batch = self._last if self._last is not None else self._batch()
            self.probe.observe(batch.inputs, self.train)
            first = next(iter(self.net.collect_params().values()), None)
            self._report = {
                **self.probe.record.facts(),
                "param_dtype": dtype_name(first.data(self.ctx).dtype) if first is not None else "unknown",
                "amp_cast_ops": self.probe.amp_cast_ops,
            }
        return {**self._report, **self.prec.flags()}

    def run_facts(self) -> dict[str, Any]:
        facts = {
            **super().run_facts(),
            "optimizer": self.spec.optimizer.kind if self.train else "none",
            "hybridized": self.hybridized,
            "context": str(self.ctx),
        }
        if self.fallback:
            facts["device_fallback"] = self.fallback
        return facts

    def params(self) -> int:
        return trainable_params(self.net)

    def close(self) -> None:
        mx.nd.waitall()
        super().close()


def _float32_host(out: Any) -> np.ndarray:
    """One output as float32 numpy. amp_cast casts floating
    arrays only: MKLDNN refuses an integer one (SSD's NMS labels, model.postprocess=true), so that one is
    read back first and cast by numpy. bfloat16 is floating though its numpy dtype is AMP's record of one
    uint16: read back as it is, its bits became the "values" (every negative logit above every positive
    one, so an argmax picked the least likely class)."""
    if dtype_name(out.dtype) == "bfloat16" or np.issubdtype(np.dtype(out.dtype), np.floating):
        return mx.nd.amp_cast(out, dtype=np.float32).asnumpy()
    return out.asnumpy().astype(np.float32)
