"""The accuracy mode's small CNN in PyTorch (architecture, layout and init: workloads/classification/small_cnn_plan.py).

PyTorch's layout is the canonical one, so loading and exporting weights is a plain state-dict copy.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dlbench.workloads.classification.small_cnn_plan import (
    KERNEL,
    POOL,
    SmallCnnSizes,
    check_weights,
    initial_weights,
)


class SmallCnn(nn.Module):
    def __init__(self, sizes: SmallCnnSizes) -> None:
        super().__init__()
        c1, c2 = sizes.widths
        self.sizes = sizes
        self.conv1 = nn.Conv2d(sizes.channels, c1, KERNEL, padding=KERNEL // 2)
        self.conv2 = nn.Conv2d(c1, c2, KERNEL, padding=KERNEL // 2)
        self.fc1 = nn.Linear(sizes.flat_features, sizes.hidden)
        self.fc2 = nn.Linear(sizes.hidden, sizes.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), POOL)
        x = F.max_pool2d(F.relu(self.conv2(x)), POOL)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def build_small_cnn(
    *,
    image_size: int = 28,
    channels: int = 1,
    num_classes: int = 10,
    widths: tuple[int, int] = (32, 64),
    hidden: int = 128,
    seed: int = 0,
) -> SmallCnn:
    """The network with the seed's initial weights (identical to the other frameworks' for that seed)."""
    model = SmallCnn(SmallCnnSizes(image_size, channels, num_classes, tuple(widths), hidden))
    load_weights(model, initial_weights(model.sizes, seed))
    return model


def load_seed(model: SmallCnn, seed: int) -> bool:
    """Replace the weights with the seed's framework-neutral initial weights (always possible: True)."""
    load_weights(model, initial_weights(model.sizes, seed))
    return True


def load_weights(model: SmallCnn, weights: dict[str, np.ndarray]) -> None:
    """Copy canonical-layout numpy weights into the model (in place, keeping its device and dtype)."""
    check_weights(model.sizes, weights)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(torch.from_numpy(np.ascontiguousarray(weights[name])))


def export_weights(model: SmallCnn) -> dict[str, np.ndarray]:
    """The model's weights as canonical-layout float32 numpy arrays."""
    return {name: p.detach().float().cpu().numpy().copy() for name, p in model.named_parameters()}
