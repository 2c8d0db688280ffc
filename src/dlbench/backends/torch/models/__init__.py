"""PyTorch networks, one module per task family (classification, ...); `build_model` picks by name."""

from dlbench.backends.torch.models.classification import build_model

__all__ = ["build_model"]
