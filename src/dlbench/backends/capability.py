"""Can this machine run a job's cell at all? Asked by the orchestrator before the job's run is made.

A cell (framework × precision × device × options) that the hardware cannot run is not a failure of the
benchmark: it is skipped with one line naming the reason, recorded on the sweep's parent run, and listed by
the report under "Not run on this machine". Only a cell that could run and then broke fails the sweep.

The answer is read from the machine without importing a framework (dlbench.core.cpu for the CPU and its
oneDNN cap, NVML for the GPUs), by rules each framework states in its `capability` module:
`unsupported(job, where) -> str | None` and `notes(job, where) -> list[str]` (what runs, but not as fast as
the hardware allows, e.g. emulated bfloat16). The worker's own probes stay as a backstop: a prediction that
missed still ends in one clear line, as a failed job.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field

from dlbench.backends.threads import PACKAGES
from dlbench.config import JobConfig
from dlbench.core.cpu import cap_text, native
from dlbench.core.precision import impossible, plan_precision
from dlbench.data.registry import data_format
from dlbench.errors import ConfigError
from dlbench.telemetry.nvml import visible_gpus
from dlbench.workloads.registry import workloads


@dataclass(frozen=True)
class Where:
    """Where a job would run: the GPUs it can see and the device kind its framework would pick."""

    gpus: list[tuple[str, tuple[int, int]]] = field(default_factory=list)
    kind: str = "cpu"  # "cuda" or "cpu"

    def compute_dtype(self, job: JobConfig) -> str:
        return plan_precision(job.precision, self.kind).compute_dtype


@dataclass(frozen=True)
class Capability:
    """The verdict: `reason` is None when the cell can run; `notes` are said and tagged either way."""

    reason: str | None = None
    notes: list[str] = field(default_factory=list)


def where(job: JobConfig, gpus: list[tuple[str, tuple[int, int]]] | None = None) -> Where:
    """The device kind the job's framework would use: device=auto means a visible GPU the framework has
    code for (MXNet has none for Hopper), else the CPU."""
    gpus = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES")) if gpus is None else gpus
    if job.device == "cpu" or not gpus:
        return Where(gpus, "cpu")
    module = _module(job.framework.name)
    has_code = getattr(module, "runs_on_gpu", None)  # MXNet's: no code for Hopper; others run on any GPU
    runs = job.device == "cuda" or has_code is None or has_code(gpus[0])
    return Where(gpus, "cuda" if runs else "cpu")


def check(job: JobConfig, gpus: list[tuple[str, tuple[int, int]]] | None = None) -> Capability:
    """Whether this machine can run `job`'s cell, and what it should know if it can. Settings that can
    only crash on the device the job would use raise ConfigError (a mistake, not a machine's limit)."""
    w = where(job, gpus)
    if why := impossible(job.precision, job.framework.name, w.kind, job.mode in ("train", "converge")):
        raise ConfigError(why)
    if job.device == "cuda" and not w.gpus:
        return Capability(
            "device=cuda: no NVIDIA GPU is visible here (NVML finds none); device=auto runs it on the CPU"
        )
    if job.data.decode == "gpu" and w.kind == "cpu" and data_format(job).dali:  # only DALI decodes
        return Capability(
            "data.decode=gpu: DALI's GPU decoder needs a GPU this job can use; use data.decode=cpu"
        )
    entry = workloads().get(job.model.task)
    if entry is not None and entry.unsupported is not None and (reason := entry.unsupported(job)):
        return Capability(reason)
    module = _module(job.framework.name)
    if module is None:
        return Capability()
    if reason := module.unsupported(job, w):
        return Capability(reason)
    return Capability(None, module.notes(job, w))


def _module(framework: str):
    if framework not in PACKAGES:
        return None
    return importlib.import_module(f"dlbench.backends.{PACKAGES[framework]}.capability")


def emulated_note(job: JobConfig, w: Where) -> list[str]:
    """The note for reduced precision a CPU has no arithmetic for: it runs, converted in software."""
    dtype = w.compute_dtype(job)
    if w.kind != "cpu" or native(dtype):
        return []
    hardware = {"bfloat16": "avx512_bf16 or amx_bf16", "float16": "avx512_fp16 or amx_fp16"}[dtype]
    return [
        f"{dtype} on this CPU is emulated (no {hardware}{cap_text()}): it runs, slowly, and measures "
        f"software conversion, not {dtype} hardware"
    ]
