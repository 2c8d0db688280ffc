"""What MXNet 1.9.1 needs of this machine (dlbench.backends.capability). Imports no framework.

- Its CUDA builds (mxnet-cu117 and older) carry no code for Hopper (sm_90) or later: on such a GPU it runs on
  the CPU (device=auto) or not at all (device=cuda).
- It has no whole-step compiler like XLA or torch.compile: `execution=compiled` is not run.
- On a CPU it has no float16 convolution or GEMM ("FP16 gemm on cpu not implemented!"), and computes bfloat16
  only with oneDNN's AVX-512 (avx512_core) kernels: an AVX2-only CPU, or oneDNN capped below AVX-512
  (ONEDNN_MAX_CPU_ISA=AVX2), cannot run its bfloat16 cells, which `precision=amp` means on a CPU.
"""

from __future__ import annotations

from dlbench.backends.capability import Where, emulated_note
from dlbench.config import JobConfig
from dlbench.core.cpu import onednn_avx512_core

HOPPER = (9, 0)


def runs_on_gpu(gpu: tuple[str, tuple[int, int]]) -> bool:
    return gpu[1] < HOPPER


def unsupported(job: JobConfig, where: Where) -> str | None:
    if job.execution == "compiled":
        return (
            "MXNet 1.9.1 has no whole-step compiler (hybridize builds a graph, which runs under execution=eager); "
            "compare it with execution=eager"
        )
    if where.kind == "cuda" and where.gpus and not runs_on_gpu(where.gpus[0]):
        name, (major, minor) = where.gpus[0]
        return (
            f"MXNet 1.9.1 has no code for {name} (sm_{major}{minor}); its CUDA builds stop before Hopper, so "
            "it runs only on the CPU here (device=auto or cpu)"
        )
    if where.kind != "cpu":
        return None
    dtype = where.compute_dtype(job)
    if dtype == "float16":
        return "MXNet 1.9.1 has no float16 convolution or GEMM on a CPU"
    if dtype == "bfloat16" and (why := onednn_avx512_core()):
        return f"MXNet 1.9.1 computes bfloat16 only with oneDNN's AVX-512 kernels (avx512_core), and {why}"
    return None


def notes(job: JobConfig, where: Where) -> list[str]:
    return emulated_note(job, where)
