"""Parameter and FLOP counts of the torch networks, from torch's own FLOP counter.

torch.utils.flop_counter counts convolutions and matrix multiplies (a multiply-add = 2 FLOPs), the
same "conv + dense" the other backends count with their own tools; the parity check compares them.
The inputs are the task spec's (batch 1, variable-length axes at their synthetic size).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from dlbench.backends.skeleton import load_family
from dlbench.backends.torch.family import TorchFamily
from dlbench.core.spec import ModelConfig
from dlbench.workloads.registry import task_spec


def model_stats(cfg: ModelConfig) -> dict[str, Any]:
    """Trainable params and forward GFLOPs per sample (inference, batch 1, float32, CPU)."""
    spec = task_spec(cfg)
    model = load_family(TorchFamily, spec.task).build_model(cfg).eval()
    xs = [
        torch.zeros(
            (1, *spec.sample_shape(t)), dtype=torch.float32 if t.is_float else getattr(torch, t.dtype)
        )
        for t in spec.inputs.values()
    ]
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(*xs)
    return {
        "params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "gflops": counter.get_total_flops() / 1e9,
        "input_shapes": {name: list(x.shape) for name, x in zip(spec.inputs, xs, strict=True)},
    }
