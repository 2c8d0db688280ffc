"""What JAX needs of this machine (dlbench.backends.capability): every precision runs on a CPU, reduced
precision emulated where the CPU lacks the arithmetic (said, not skipped). Imports no framework."""

from __future__ import annotations

from dlbench.backends.capability import Where, emulated_note
from dlbench.config import JobConfig


def unsupported(job: JobConfig, where: Where) -> str | None:
    return None


def notes(job: JobConfig, where: Where) -> list[str]:
    return emulated_note(job, where)
