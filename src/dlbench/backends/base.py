"""The registry of framework backends and their loader (docs/architecture.md, section 3, "The bench").

A backend is a package `dlbench.backends.<name>` exposing:

    build(job: JobConfig) -> Bench                 import-heavy work happens here, in the worker only
    versions() -> dict[str, str]                   framework / CUDA / cuDNN versions for MLflow tags
    model_stats(model: ModelConfig) -> dict        params and forward GFLOPs (parity check, worker)

The Bench protocol lives in dlbench.core.bench and BackendUnavailable in dlbench.errors (both
framework-free, so no lower layer imports from here).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from dlbench.errors import BackendUnavailable

# framework.name -> (backend module, the package whose absence means "not installed")
BACKENDS: dict[str, tuple[str, str, str]] = {
    "torch": ("dlbench.backends.torch", "torch", "pip install torch==2.14.1 torchvision==0.29.1"),
    "tf": ("dlbench.backends.tensorflow", "tensorflow", "pip install tensorflow==2.21.0"),
    "mxnet": (
        "dlbench.backends.mxnet",
        "dlbench.backends.mxnet._compat",
        "pip install mxnet==1.9.1 numpy==1.26.4",
    ),
    # its own environment (.venv-jax, requirements-jax.txt): numpy >= 2
    "jax": (
        "dlbench.backends.jax",
        "jax",
        "pip install jax==0.10.2 jaxlib==0.10.2 flax==0.12.8 optax==0.2.8 numpy==2.4.6",
    ),
}


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
