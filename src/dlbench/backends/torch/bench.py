"""The PyTorch Bench: the task's model, loss, optimizer, input source and precision on one device, or
one rank's device of a data-parallel job (DistributedDataParallel)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from dlbench.backends.skeleton import SpecBench
from dlbench.backends.torch import ranks
from dlbench.backends.torch.family import TorchFamily
from dlbench.backends.torch.optimizers import make_optimizer, make_schedule, resolve_optimizer_impl
from dlbench.backends.torch.precision import LayerProbe, TorchPrecision, dtype_name
from dlbench.config import JobConfig
from dlbench.core.bench import Batch
from dlbench.core.precision import plan_precision
from dlbench.data.synthetic import HostBatch
from dlbench.errors import BackendUnavailable


def pick_device(requested: str, index: int = 0) -> torch.device:
    """The job's device; `index`: the GPU of a rank of a job on several devices (its local rank)."""
    if requested == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        if index:  # a rank's own GPU (NCCL's collectives run on the current device)
            if index >= torch.cuda.device_count():
                raise BackendUnavailable(
                    f"devices: rank {index} needs GPU {index}; torch sees {torch.cuda.device_count()} here"
                )
            torch.cuda.set_device(index)
        return torch.device("cuda", index)
    if requested == "cuda":
        raise BackendUnavailable("device=cuda: torch sees no CUDA GPU here; use device=cpu or device=auto")
    return torch.device("cpu")


class TorchBench(SpecBench):
    """The job's workload as its TorchFamily (workloads/<task>/torch.py) builds, runs and scores it."""

    def __init__(self, job: JobConfig) -> None:
        super().__init__(job)
        self.ranked = ranks.active()  # devices>1: one rank of a data-parallel job (backends/torch/ranks.py)
        dev = pick_device(job.device, dist.get_rank() if self.ranked else 0)
        self.dev, self.device = dev, str(dev)
        self.prec = TorchPrecision(plan_precision(job.precision, dev.type), dev)
        # channels_last feeds NHWC tensor-core kernels on CUDA (4-D tensors only); on CPU it is no faster.
        self.memory_format = torch.channels_last if dev.type == "cuda" else torch.contiguous_format
        torch.manual_seed(job.schedule.seed)  # initial weights, dropout: the run's seed, in every mode
        family = self.load_family(TorchFamily)
        model = family.build_model(job.model)
        self.seed_weights(model)
        model = model.to(device=dev, dtype=self.prec.param_dtype)
        model = model.to(memory_format=self.memory_format)
        model.train(self.train)
        self.model = model
        self.family_facts = family.run_facts(model)
        self.probe = LayerProbe(model)
        fw = job.framework
        # The probed first step runs this one (eager); on several devices it is the DDP wrapper too, so
        # that every step all-reduces the gradients and the ranks keep the same weights.
        self.eager_model = self._data_parallel(model) if self.ranked else model
        run = self.eager_model
        self.run_model = torch.compile(run, mode=fw.compile_mode) if fw.compile else run
        self.loss_fn = family.loss(self.spec)
        self.optimizer_impl = resolve_optimizer_impl(fw.optimizer_impl, dev)
        self.opt = make_optimizer(model, self.optimizer_impl, self.spec.optimizer) if self.train else None
        self.schedule = make_schedule(self.opt, self.spec.optimizer) if self.train else None
        self.open_source(self._to_device)
        self._loss: torch.Tensor | None = None
        if dev.type == "cuda":
            torch.backends.cudnn.benchmark = True
            torch.cuda.reset_peak_memory_stats(dev)

    def _data_parallel(self, model: torch.nn.Module) -> torch.nn.Module:
        """DistributedDataParallel over the job's ranks: rank 0's weights broadcast at construction,
        gradients averaged over the ranks in every backward."""
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.dev.index] if self.dev.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    # ---- data ----------------------------------------------------------------------------------
    def _tensor(self, array: np.ndarray, is_float: bool) -> torch.Tensor:
        # copy=True: torch's own (64-byte aligned) memory even on the CPU, where .to() would keep numpy's
        # buffer (32-byte aligned here), on which a CPU convolution measured 15% slower.
        dtype = self.prec.param_dtype if is_float else None
        t = torch.from_numpy(array).to(device=self.dev, dtype=dtype, copy=True)
        return t.contiguous(memory_format=self.memory_format) if is_float and t.dim() == 4 else t

    def _to_device(self, host: HostBatch) -> Batch:
        spec = self.spec
        return Batch(
            tuple(self._tensor(host.inputs[k], t.is_float) for k, t in spec.inputs.items()),
            tuple(
                self._tensor(host.targets[k], t.is_float)
                for k, t in spec.targets.items()
                if k in host.targets
            ),
            host.units,
        )

    # ---- the step ------------------------------------------------------------------------------
    def step(self) -> None:
        self._step(self.source.next())
        if self.probe.active:  # the first step has shown the dtypes; no hook in the timed loop
            self.probe.remove()

    def _step(self, batch: Batch) -> None:
        # The probed first step runs eagerly: compiled with the probe's hooks, the graph would be compiled
        # again once they are removed (dynamo guards on a module's hooks), doubling the compile time.
        model = self.eager_model if self.probe.active else self.run_model
        if not self.train:
            with torch.inference_mode(), self.prec.autocast():
                self.family.infer(model, batch.inputs)
            return
        inputs, targets = self.with_negatives(batch.inputs, batch.targets)
        with self.prec.autocast():
            loss = self.loss_fn(model(*inputs), *targets)
        self.opt.zero_grad(set_to_none=True)
        scaler = self.prec.scaler
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(self.opt)
            scaler.update()
        else:
            loss.backward()
            self.opt.step()
        if self.schedule is not None:
            self.schedule.step()
        self._loss = loss.detach()

    def predict(self, host: HostBatch) -> Any:
        """The model's outputs for a host batch as float32 numpy (mode=converge scores them with
        the workload's eval): evaluation mode, the job's precision, no gradients."""
        inputs = self._to_device(host).inputs
        self.model.eval()
        try:
            with torch.inference_mode(), self.prec.autocast():
                out = self.family.infer(self.run_model, inputs)
        finally:
            self.model.train(self.train)
        outs = tuple(o.float().cpu().numpy() for o in (out if isinstance(out, (tuple, list)) else (out,)))
        return outs[0] if len(outs) == 1 else outs

    def sync(self) -> None:
        if self.dev.type == "cuda":
            torch.cuda.synchronize(self.dev)
        if self.ranked:  # a window's edge is where the last rank gets there
            ranks.barrier()

    def units(self) -> int:
        """The units the job's steps consumed: on several devices, the sum over the ranks (a collective,
        which the window's edges call on every rank), so the throughput is counted once, for the job."""
        mine = super().units()
        return int(ranks.all_reduce_sum(mine)) if self.ranked else mine

    def loss(self) -> float | None:
        return float(self._loss) if self._loss is not None else None

    def memory(self) -> int | None:
        return torch.cuda.max_memory_allocated(self.dev) if self.dev.type == "cuda" else None

    def precision_report(self) -> dict[str, Any]:
        return {
            **self.probe.record.facts(),
            "param_dtype": dtype_name(next(self.model.parameters()).dtype),
            **self.prec.flags(),
        }

    def run_facts(self) -> dict[str, Any]:
        opt = f"{self.spec.optimizer.kind}/{self.optimizer_impl}" if self.train else "none"
        return {
            **super().run_facts(),
            "optimizer": opt,
            "memory_format": "channels_last" if self.memory_format == torch.channels_last else "contiguous",
            "compiled": self.job.framework.compile_mode if self.job.framework.compile else False,
        }

    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def close(self) -> None:
        self.probe.remove()
        super().close()
