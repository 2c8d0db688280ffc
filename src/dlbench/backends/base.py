"""The contract every framework backend fulfils (docs/architecture.md, "Backend protocol").

A backend is a package `dlbench.backends.<name>` exposing two functions:

    build(job: JobConfig) -> Bench      import-heavy work happens here, in the worker only
    versions() -> dict[str, str]        framework / CUDA / cuDNN versions for MLflow tags

The worker times `Bench.step()` calls (dlbench.timing) and never looks inside the model. Workloads
are described framework-neutrally by `JobConfig.model`; each backend builds the same network.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

# framework.name -> (backend module, the package whose absence means "not installed")
BACKENDS: dict[str, tuple[str, str, str]] = {
    "torch": ("dlbench.backends.torch", "torch", "pip install torch==2.14.1 torchvision==0.29.1"),
    "tf": ("dlbench.backends.tensorflow", "tensorflow", "pip install tensorflow==2.21.0"),
    "mxnet": (
        "dlbench.backends.mxnet",
        "dlbench.backends.mxnet._compat",
        "pip install mxnet==1.9.1 numpy==1.26.4",
    ),
}


class BackendUnavailable(RuntimeError):
    """The framework cannot run here (not installed, or no code for this GPU); one-line message."""


@runtime_checkable
class Bench(Protocol):
    """One built workload: model, optimizer, data and precision set up on the device."""

    samples_per_step: int  # batch size: samples consumed by one step()
    device: str  # "cpu" or "cuda:0": where it really runs

    def step(self) -> None:
        """One train step (forward, backward, update) or one inference batch. Must not sync."""

    def sync(self) -> None:
        """Block until all queued device work has finished."""

    def loss(self) -> float | None:
        """The last step's loss as a host float (None for inference). Called at window edges only."""

    def data_wait_s(self) -> float:
        """Seconds spent waiting for input since the start (0 for synthetic data)."""

    def memory(self) -> int | None:
        """Framework allocator peak in bytes on the device, None where the framework has none."""

    def precision_report(self) -> dict[str, Any]:
        """What is really in effect, read from the model after a step: e.g. conv compute dtype,
        param dtype, loss scaling, TF32 flags. Keys: compute_dtype (required), param_dtype, ..."""

    def params(self) -> int:
        """Number of trainable parameters."""

    def close(self) -> None:
        """Release the data pipeline and device memory."""


class TimedSource:
    """A bench's input source (synthetic or DALI) with its fetches timed, so that every backend
    reports `data_wait_s` the same way; also says how many corrupt images a DALI source skipped."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.wait_s = 0.0

    def next(self) -> Any:
        t = time.perf_counter()
        batch = self.source.next()
        self.wait_s += time.perf_counter() - t
        return batch

    def facts(self) -> dict[str, Any]:
        """{"data_skipped": n} for a source that can skip undecodable images, else {}."""
        skipped = getattr(self.source, "skipped", None)
        return {} if skipped is None else {"data_skipped": skipped}

    def close(self) -> None:
        self.source.close()


def load_backend(name: str) -> ModuleType:
    """Import the backend (and so the framework). Raises BackendUnavailable with the pip command."""
    module, package, pip = BACKENDS[name]
    if importlib.util.find_spec(package) is None:
        raise BackendUnavailable(
            f"framework={name}: {package} is not installed in {sys.executable}; install it with "
            f"`{sys.executable} -m {pip}` or point framework.python at an interpreter that has it"
        )
    importlib.import_module(package)  # the framework itself: the bulk of the worker's import time
    return importlib.import_module(module)
