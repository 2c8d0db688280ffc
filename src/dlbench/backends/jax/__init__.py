"""JAX backend (Flax linen + Optax, NHWC): the task spec's networks (workloads/<task>/jax.py), each defined
to be the same network as the torch backend's (equal parameter counts, equal conv + dense FLOPs).

JAX is imported inside the functions, so importing this package stays cheap; the worker imports jax
itself first (dlbench.backends.base.load_backend) to time the import.
"""

from __future__ import annotations

from typing import Any

from dlbench.config import JobConfig, ModelConfig
from dlbench.core.bench import Bench


def build(job: JobConfig) -> Bench:
    from dlbench.backends.jax.bench import JaxBench

    return JaxBench(job)


def versions() -> dict[str, str]:
    """jax, jaxlib, flax, optax, and on a GPU its name and the CUDA plugin's platform version."""
    import flax
    import jax
    import jaxlib
    import optax

    out = {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "flax": flax.__version__}
    out["optax"] = optax.__version__
    dev = jax.devices()[0]
    if dev.platform == "gpu":
        out["gpu"] = dev.device_kind
        out["cuda"] = cuda_version(str(getattr(getattr(dev, "client", None), "platform_version", "unknown")))
    return out


def cuda_version(platform_version: str) -> str:
    """'13.0' for the CUDA plugin's 'cuda 13000' (CUDA's integer version, 1000 x major + 10 x minor), as
    torch and TensorFlow write theirs; anything else as it is."""
    number = platform_version.removeprefix("cuda").strip()
    if not number.isdigit():
        return platform_version
    return f"{int(number) // 1000}.{int(number) % 1000 // 10}"


def model_stats(model_cfg: ModelConfig) -> dict[str, Any]:
    """{"params", "gflops" (conv + dense, per sample)} counted on the network's jaxpr, for the parity check."""
    from dlbench.backends.jax.stats import model_stats as _model_stats

    return _model_stats(model_cfg)
