"""What TensorFlow needs of this machine (dlbench.backends.capability). Imports no framework.

Every precision runs on a CPU, reduced precision emulated where the CPU lacks the arithmetic (said, not
skipped), with one exception: TensorFlow 2.21 decides from the CPU's own flags, not from oneDNN's ISA cap,
that oneDNN computes its bfloat16 matmuls and convolutions. On an AVX-512 CPU with oneDNN capped below
avx512_core (ONEDNN_MAX_CPU_ISA=AVX2, the tests' stand-in for an AVX2-only laptop) oneDNN then has no kernel
to give: measured on an AVX-512 EPYC, a traced step fails ("could not create a primitive descriptor for the
convolution forward propagation primitive") and an eager bfloat16 matmul kills the process (SIGSEGV). A
CPU that really lacks AVX-512 is not affected: TensorFlow keeps its bfloat16 off oneDNN there.
"""

from __future__ import annotations

from collections.abc import Mapping

from dlbench.backends.capability import Where, emulated_note
from dlbench.config import JobConfig
from dlbench.core import cpu


def bf16_under_cap(env: Mapping[str, str] | None = None) -> str | None:
    """Why TensorFlow cannot compute bfloat16 on this CPU under the oneDNN cap in force, or None."""
    if "avx512f" not in cpu.cpu_flags() or cpu.cap_allows("AVX512_CORE", env):
        return None
    cap = cpu.cap_text(env).removeprefix(", and ")
    return (
        f"on this AVX-512 CPU TensorFlow hands bfloat16 to oneDNN whatever its cap, and {cap}, below its "
        "bfloat16 kernels; unset the cap (or raise it to AVX512_CORE) to run TensorFlow's bfloat16 cells"
    )


def unsupported(job: JobConfig, where: Where) -> str | None:
    if where.kind == "cpu" and where.compute_dtype(job) == "bfloat16":
        return bf16_under_cap()
    return None


def notes(job: JobConfig, where: Where) -> list[str]:
    return emulated_note(job, where)
