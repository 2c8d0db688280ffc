"""Framework-neutral weights of the ResNets (CIFAR and ResNet-50) and VGG16, by layer order (numpy only).

The four frameworks define the networks' weighted layers in one order (stem conv, BN, then per block
conv1, bn1, conv2, bn2[, conv3, bn3], then ResNet-50's projection shortcut conv + BN, which Keras creates
first and its exporter moves; the CIFAR ResNet's option A shortcuts have no weights; then the classifier;
VGG16: its 13 convs, then its 3 dense layers), so a layer is named by its position and kind:
"007.conv.weight" (O, I, H, W), "008.bn.gamma|beta|mean|var", "019.dense.weight" (out, in) and ".bias"
(every dense; a conv only where it has one, VGG16's). The neutral layout is torch's, and each framework
converts its own in its family file (Keras: HWIO kernels, (in, out) dense; Flax the same).

VGG16's first dense reads the 7x7 adaptive-pooled map flattened; the neutral weight is torch's, (4096,
C*7*7) with input index c*49 + h*7 + w, the (C, H, W) order that torch and MXNet (NCHW) flatten in, and
JAX too (its VGG16 transposes the NHWC map to (C, H, W) before flattening). Keras flattens its NHWC map
as (H, W, C), so the TF family permutes that dense's input rows to and from the neutral order.
"""

from __future__ import annotations

import numpy as np

PARAMS = {"conv": ("weight",), "bn": ("gamma", "beta", "mean", "var"), "dense": ("weight", "bias")}


def name(index: int, kind: str, param: str) -> str:
    return f"{index:03d}.{kind}.{param}"


def neutral_shape(to_neutral, shape) -> tuple[int, ...]:
    """The shape `to_neutral` (None: the identity) gives an array of `shape`, from a zero-stride view: no
    copy is made (VGG16's first dense is 400 MB), as long as `to_neutral` only reshapes and transposes."""
    view = np.broadcast_to(np.float32(0), tuple(shape))
    return tuple((to_neutral(view) if to_neutral else view).shape)


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
