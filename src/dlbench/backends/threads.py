"""How many CPU threads a job's framework uses, the same rule for every framework.

`threads=null` means the CPUs in the worker's affinity mask. Each framework's `threads` module says
what must be in the environment before its import (`env`) and applies/reads back the count after
(`apply`); a framework's `environment` module adds other settings its import reads (`worker_env`), and may name one of them for an out-of-memory line (`oom_hint`). This module imports no framework: the supervisor uses it to build the worker's environment.
"""

from __future__ import annotations

import importlib
import importlib.util
import os

PACKAGES = {"torch": "torch", "tf": "tensorflow", "mxnet": "mxnet", "jax": "jax"}
# frameworks whose devices=N job is one process driving all its devices (its pools shared by them)
ONE_PROCESS_FRAMEWORKS = ("jax", "tf")


def available_cpus() -> int:
    """CPUs this process may run on (its affinity), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def resolve(threads: int | None) -> int:
    return threads if threads else available_cpus()


def rank_threads(threads: int | None, devices: int, framework: str) -> int | None:
    """The threads each rank of a job gets: the job's count (null: the affinity's CPUs) split evenly
    between its `devices` ranks, at least one each, so two ranks on two cores do not oversubscribe them.
    One device, or a framework that runs every device in one process (ONE_PROCESS_FRAMEWORKS), keeps the setting."""
    if devices == 1 or framework in ONE_PROCESS_FRAMEWORKS:
        return threads
    return max(1, resolve(threads) // devices)


def _module(framework: str):
    return importlib.import_module(f"dlbench.backends.{PACKAGES[framework]}.threads")


def thread_env(framework: str, threads: int | None) -> dict[str, str]:
    """What the worker's environment must hold so `framework` starts its pools with the job's threads."""
    if framework not in PACKAGES:
        return {}
    return _module(framework).env(resolve(threads))


def worker_env(framework: str, threads: int | None, devices: int = 1) -> dict[str, str]:
    """The worker's environment beyond ours: the thread settings, plus what a framework's `environment`
    module asks for before its import (JAX: no up-front GPU memory reservation, and for devices>1 that
    many host devices on the CPU)."""
    out = thread_env(framework, threads)
    module = _environment(framework)
    return out | module.env(devices) if module else out


def oom_hint(framework: str) -> str:
    """What a framework's `environment` module adds to an out-of-memory line about the settings it made
    ("" when it has none to offer)."""
    module = _environment(framework)
    return module.oom_hint() if module and hasattr(module, "oom_hint") else ""


def _environment(framework: str):
    """The framework's `environment` module (settings its import reads), or None where it has none."""
    name = f"dlbench.backends.{PACKAGES.get(framework, '')}.environment"
    if framework in PACKAGES and importlib.util.find_spec(name) is not None:
        return importlib.import_module(name)
    return None


def apply_threads(framework: str, threads: int | None) -> dict[str, int]:
    """Apply the job's threads in this (worker) process after the framework import; return the counts
    the framework reports: {"intra_op": n, "inter_op": m}."""
    return _module(framework).apply(resolve(threads))
