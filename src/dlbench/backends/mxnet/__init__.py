"""MXNet (Gluon) backend: the task spec's networks (workloads/<task>/mxnet.py), defined to equal the torch nets.

MXNet itself is imported only through `_compat` (the numpy shim), and only when a function here is
called: `load_backend` finds this package before MXNet is imported.
"""

from __future__ import annotations

from typing import Any

from dlbench.config import JobConfig, ModelConfig


def build(job: JobConfig) -> Any:
    """Build the Bench for `job` (model, trainer, synthetic batch, precision) on its context."""
    from dlbench.backends.mxnet.bench import MXNetBench

    return MXNetBench(job)


def versions() -> dict[str, str]:
    """MXNet version, build features (CUDA, cuDNN, oneDNN = MKLDNN) and visible GPU count for tags."""
    from dlbench.backends.mxnet._compat import mx

    features = mx.runtime.Features()
    out = {
        "mxnet": mx.__version__,
        "mxnet_cuda": str(features.is_enabled("CUDA")).lower(),
        "mxnet_cudnn": str(features.is_enabled("CUDNN")).lower(),
        "mxnet_mkldnn": str(features.is_enabled("MKLDNN")).lower(),
        "mxnet_features": ",".join(sorted(name for name, f in features.items() if f.enabled)),
        "mxnet_gpus": str(mx.context.num_gpus()),
    }
    return out


def model_stats(model_cfg: ModelConfig) -> dict[str, Any]:
    """{"params", "gflops"} of the network, read from MXNet's own graph (for the parity check)."""
    from dlbench.backends.mxnet.stats import model_stats as _stats

    return _stats(model_cfg)
