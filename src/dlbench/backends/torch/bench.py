"""The PyTorch Bench: one model, optimizer, input source and precision on one device."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dlbench.backends.base import BackendUnavailable, TimedSource
from dlbench.backends.torch.models import build_model
from dlbench.backends.torch.precision import DtypeProbe, TorchPrecision
from dlbench.config import JobConfig


def pick_device(requested: str) -> torch.device:
    if requested == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", 0)
    if requested == "cuda":
        raise BackendUnavailable("device=cuda: torch sees no CUDA GPU here; use device=cpu or device=auto")
    return torch.device("cpu")


class SyntheticSource:
    """A batch of random inputs and labels made once on the device and reused every step."""

    def __init__(self, job: JobConfig, device: torch.device, memory_format: torch.memory_format, dtype):
        m = job.model
        shape = (job.batch_size, m.channels, m.image_size, m.image_size)
        gen = torch.Generator(device="cpu").manual_seed(0)
        x = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
        self.x = x.contiguous(memory_format=memory_format)
        self.y = torch.randint(0, m.num_classes, (job.batch_size,), generator=gen).to(device)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x, self.y

    def close(self) -> None:
        pass


def make_source(job: JobConfig, device: torch.device, memory_format: torch.memory_format, dtype: torch.dtype):
    """Synthetic tensors, or the dataset through DALI (imported only then: DALI is optional)."""
    if job.dataset.name == "synthetic":
        return SyntheticSource(job, device, memory_format, dtype)
    from dlbench.backends.torch.dali_source import DaliSource

    return DaliSource(job, device, memory_format, dtype)


def resolve_optimizer_impl(requested: str, device: torch.device) -> str:
    """auto -> fused on CUDA. With fp16 loss scaling, a non-fused optimizer makes GradScaler read the
    overflow flag on the host (`.item()`) every step: the GPU drains and idles while the host queues the
    next step and fetches the next batch. The fused kernel takes the flag on the GPU instead."""
    if requested == "auto":
        return "fused" if device.type == "cuda" else "foreach"
    return requested


def make_optimizer(model: nn.Module, impl: str) -> torch.optim.Optimizer:
    """SGD with momentum, the optimizer of the ResNet/VGG papers, in the chosen implementation."""
    opt = torch.optim.SGD(
        model.parameters(), lr=0.01, momentum=0.9, fused=impl == "fused", foreach=impl == "foreach" or None
    )
    if impl == "fused":
        prime_momentum(opt)
    return opt


def prime_momentum(opt: torch.optim.Optimizer) -> None:
    """Start every momentum buffer at zero. torch's fused SGD (seen in 2.11 on CUDA and 2.14 on CPU)
    fills a missing buffer from the gradient even on a step GradScaler skips for overflow, and fp16's
    first steps always overflow: inf momentum, NaN or zero loss ever after. A zero buffer is what the
    first step makes anyway (buf = 0.9 * 0 + g), so the training is unchanged (tests compare foreach)."""
    for group in opt.param_groups:
        for p in group["params"]:
            opt.state[p]["momentum_buffer"] = torch.zeros_like(p)


class TorchBench:
    def __init__(self, job: JobConfig) -> None:
        self.job = job
        dev = pick_device(job.device)
        self.device = str(dev)
        self.dev = dev
        self.samples_per_step = job.batch_size
        self.prec = TorchPrecision(job.precision, dev)
        # channels_last feeds NHWC tensor-core kernels on CUDA; on CPU it is no faster for these nets.
        self.memory_format = torch.channels_last if dev.type == "cuda" else torch.contiguous_format
        model = build_model(job.model).to(device=dev, dtype=self.prec.param_dtype)
        model = model.to(memory_format=self.memory_format)
        self.train = job.mode == "train"
        model.train(self.train)
        self.model = model
        self.probe = DtypeProbe(model)
        fw = job.framework
        self.run_model = torch.compile(model, mode=fw.compile_mode) if fw.compile else model
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer_impl = resolve_optimizer_impl(fw.optimizer_impl, dev)
        self.opt = make_optimizer(model, self.optimizer_impl) if self.train else None
        self.source = TimedSource(make_source(job, dev, self.memory_format, self.prec.param_dtype))
        self._loss: torch.Tensor | None = None
        if dev.type == "cuda":
            torch.backends.cudnn.benchmark = True
            torch.cuda.reset_peak_memory_stats(dev)

    def step(self) -> None:
        self._step()
        if self.probe.active:  # the first step has shown the dtypes; no hook in the timed loop
            self.probe.remove()

    def _step(self) -> None:
        x, y = self.source.next()
        if not self.train:
            with torch.inference_mode(), self.prec.autocast():
                self.run_model(x)
            return
        with self.prec.autocast():
            loss = self.criterion(self.run_model(x), y)
        self.opt.zero_grad(set_to_none=True)
        scaler = self.prec.scaler
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(self.opt)
            scaler.update()
        else:
            loss.backward()
            self.opt.step()
        self._loss = loss.detach()

    def sync(self) -> None:
        if self.dev.type == "cuda":
            torch.cuda.synchronize(self.dev)

    def loss(self) -> float | None:
        return float(self._loss) if self._loss is not None else None

    def data_wait_s(self) -> float:
        return self.source.wait_s

    def memory(self) -> int | None:
        return torch.cuda.max_memory_allocated(self.dev) if self.dev.type == "cuda" else None

    def precision_report(self) -> dict[str, Any]:
        seen = self.probe.seen
        return {
            "compute_dtype": seen.get("conv", "unknown"),
            "matmul_dtype": seen.get("matmul", "unknown"),
            "param_dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
            "memory_format": "channels_last" if self.memory_format == torch.channels_last else "contiguous",
            "compiled": self.job.framework.compile_mode if self.job.framework.compile else False,
            "optimizer": f"sgd/{self.optimizer_impl}" if self.train else "none",
            **self.prec.flags(),
            **self.source.facts(),
        }

    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def close(self) -> None:
        self.probe.remove()
        self.source.close()
