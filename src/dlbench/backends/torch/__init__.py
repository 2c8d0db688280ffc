"""PyTorch backend: the task spec's networks (workloads/<task>/torch.py), trained or run on one device."""

from __future__ import annotations

from typing import Any

from dlbench.config import JobConfig, ModelConfig


def build(job: JobConfig):
    from dlbench.backends.torch.bench import TorchBench

    return TorchBench(job)


def versions() -> dict[str, str]:
    import torch
    import torchvision

    out = {"torch": torch.__version__, "torchvision": torchvision.__version__}
    if torch.cuda.is_available():
        out["cuda"] = str(torch.version.cuda)
        out["cudnn"] = str(torch.backends.cudnn.version())
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def model_stats(model_cfg: ModelConfig) -> dict[str, Any]:
    """{"params", "gflops" (conv + dense, per sample)} from torch's FLOP counter, for the parity check."""
    from dlbench.backends.torch.stats import model_stats as _model_stats

    return _model_stats(model_cfg)
