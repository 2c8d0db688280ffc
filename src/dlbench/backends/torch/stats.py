"""Parameter and FLOP counts of the torch networks, from torch's own FLOP counter.

torch.utils.flop_counter counts convolutions and matrix multiplies (a multiply-add = 2 FLOPs), the
same "conv + dense" the other backends count with their own tools; the parity check compares them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from dlbench.backends.torch.models import build_model
from dlbench.config import ModelConfig


def model_stats(spec: ModelConfig) -> dict[str, Any]:
    """Trainable params and forward GFLOPs per sample (inference, batch 1, float32, CPU)."""
    model = build_model(spec).eval()
    x = torch.zeros(1, spec.channels, spec.image_size, spec.image_size)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(x)
    return {
        "params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "gflops": counter.get_total_flops() / 1e9,
        "input_shape": list(x.shape),
    }
