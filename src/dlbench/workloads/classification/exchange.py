"""Framework-neutral weights of the ResNets (CIFAR and ResNet-50), by layer order (numpy only).

The three frameworks define the networks' weighted layers in one order (stem conv, BN, then per block
conv1, bn1, conv2, bn2[, conv3, bn3], then ResNet-50's projection shortcut conv + BN, which Keras creates
first and its exporter moves; the CIFAR ResNet's option A shortcuts have no weights; then the classifier),
so a layer is named by its position and kind: "007.conv.weight" (O, I, H, W), "008.bn.gamma|beta|mean|var", "019.dense.weight"
(out, in) and ".bias". Each framework converts its own layout (Keras: HWIO kernels, (in, out) dense).
"""

from __future__ import annotations

import numpy as np

PARAMS = {"conv": ("weight",), "bn": ("gamma", "beta", "mean", "var"), "dense": ("weight", "bias")}


def name(index: int, kind: str, param: str) -> str:
    return f"{index:03d}.{kind}.{param}"


def check(expected: dict[str, tuple[int, ...]], weights: dict[str, np.ndarray]) -> None:
    """ValueError (one line) unless `weights` holds exactly the expected names and shapes."""
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    if missing or extra:
        raise ValueError(
            f"the weights do not fit this network: missing {missing[:3]}, unexpected {extra[:3]} "
            f"({len(expected)} arrays expected)"
        )
    for key, shape in expected.items():
        if tuple(weights[key].shape) != tuple(shape):
            raise ValueError(f"weight {key} has shape {tuple(weights[key].shape)}, the network wants {shape}")
