"""What the hand-written yardsticks (bare_ssd300.py, bare_transformer.py, bare_ncf.py) share: the precision
switches, the optional torch.compile, warm-up then synchronized timed windows, and the one `BARE {json}`
line each prints.

It imports nothing from dlbench on purpose: a yardstick is the loop a careful engineer writes by hand, and
dlbench's figure for the same job must come within 1% of it in the same command. Kept beside the scripts
(not in the package) so the yardsticks stay independent of the code they judge.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import math
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import bare_cli
import torch


def parser(doc: str, *, warmup: int, steps: int, windows: int) -> argparse.ArgumentParser:
    """The flags every yardstick takes (bare_cli.py), torch's own; each script adds its model and batch flags."""
    p = bare_cli.parser(doc, warmup=warmup, steps=steps, windows=windows, warmup_help="autotuning, compile")
    p.add_argument("--optimizer", default="fused", choices=["fused", "foreach"])
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-mode", default="default")
    bare_cli.profile_flag(p)
    return p


def run_all(p: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]) -> int:
    """One BARE line per (precision, mode) of the comma lists, in one process (bare_cli.run_all)."""
    return bare_cli.run_all(p, run, _release)


def _release(a: argparse.Namespace) -> None:
    """Free the last configuration's compiled graphs and cached GPU memory before the next one."""
    if a.compile:
        torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@dataclass
class Precision:
    """What a precision name means on a device: autocast dtype (None = none) and loss scaling (fp16 only)."""

    device: torch.device
    dtype: torch.dtype | None
    scaler: torch.amp.GradScaler | None

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)


def setup(a: argparse.Namespace) -> Precision:
    """Device, seed and precision switches. fp32 is true FP32 (TF32 off); `amp` is FP16 with a dynamic loss
    scale on CUDA and BF16 on the CPU (which has no fast FP16), as dlbench defines it."""
    dev = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device)
    torch.manual_seed(a.seed)
    torch.backends.cudnn.benchmark = True
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    fp16 = dev.type == "cuda" and a.precision == "amp"
    dtype = {"amp": torch.float16 if fp16 else torch.bfloat16, "bf16": torch.bfloat16}.get(a.precision)
    scaler = torch.amp.GradScaler("cuda") if fp16 and a.mode == "train" else None
    return Precision(dev, dtype, scaler)


def maybe_compile(fn: Callable, a: argparse.Namespace) -> Callable:
    return torch.compile(fn, mode=a.compile_mode) if a.compile else fn


def optimizer_kwargs(a: argparse.Namespace, dev: torch.device) -> dict:
    """fused: one kernel for all parameters, and GradScaler then checks fp16 overflow on the device instead
    of syncing the host every step. foreach is torch's default."""
    fused = a.optimizer == "fused"
    return {"fused": True} if fused else {"foreach": dev.type == "cuda"}


def update(loss: torch.Tensor, opt: torch.optim.Optimizer, prec: Precision) -> None:
    """Backward and optimizer step, through the loss scaler when there is one."""
    opt.zero_grad(set_to_none=True)
    if prec.scaler is not None:
        prec.scaler.scale(loss).backward()
        prec.scaler.step(opt)
        prec.scaler.update()
    else:
        loss.backward()
        opt.step()


def param_count(model: torch.nn.Module) -> int:
    """Trainable parameters, each counted once (tied weights too)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def measure(step: Callable[[], tuple[int, torch.Tensor | None]], a: argparse.Namespace, dev: torch.device):
    """bare_cli.measure, each window timed by `clock(dev)`. `step` returns (units done, loss or None).
    Returns (units/s per window, last loss)."""
    return bare_cli.measure(step, a, lambda _: None, lambda: clock(dev), profiler)


@contextlib.contextmanager
def profiler(folder: Path) -> Iterator[None]:
    """torch.profiler over the block (host and, on a GPU, CUDA activity), its trace kept as trace.json.gz
    (bare_cli.profile_window's profiler for every PyTorch yardstick)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        yield
    raw = folder / "trace.json"
    prof.export_chrome_trace(str(raw))
    with raw.open("rb") as src, gzip.open(folder / "trace.json.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()


def clock(dev: torch.device) -> contextlib.AbstractContextManager[Callable[[], float]]:
    """CUDA events on a GPU (what the GPU finished between them), the wall clock on the CPU."""
    return _cuda_clock(dev) if dev.type == "cuda" else bare_cli.host_clock()


@contextlib.contextmanager
def _cuda_clock(dev: torch.device) -> Iterator[Callable[[], float]]:
    elapsed = [math.nan]
    torch.cuda.synchronize(dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    yield lambda: elapsed[0]
    end.record()
    end.synchronize()
    elapsed[0] = start.elapsed_time(end) / 1000.0


def report(a: argparse.Namespace, prec: Precision, rates: list[float], loss, **facts) -> int:
    """The BARE line (bare_cli.report) with torch's facts; exit code 3 for a NaN or inf final loss."""
    mine = {
        "device": prec.device.type,
        "compute_dtype": str(prec.dtype or torch.float32).removeprefix("torch."),
        "torch": torch.__version__,
    }
    if prec.device.type == "cuda":
        mine["gpu"] = torch.cuda.get_device_name(prec.device)
    return bare_cli.report(a, rates, loss, {**facts, **mine})
