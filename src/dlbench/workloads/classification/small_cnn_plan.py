"""The small CNN of the accuracy mode, described once without a framework: sizes, parameter layout,
FLOPs and seeded initial weights. Each backend's <framework>_small_cnn.py builds this network from it.

    conv1  3x3, `widths[0]` filters, padding 1, bias -> ReLU -> max-pool 2x2
    conv2  3x3, `widths[1]` filters, padding 1, bias -> ReLU -> max-pool 2x2
    fc1    dense `hidden` -> ReLU
    fc2    dense `num_classes` (logits)

At 28x28x1 (Fashion-MNIST) that is 421,642 parameters; at 8x8 (digits) 53,002.

Canonical layout (the keys and shapes of a weights dict, PyTorch's own layout): conv weights
(out, in, kh, kw), dense weights (out, in), and fc1's inputs in (channel, row, column) order, i.e. an
NCHW flatten. Backends that store weights otherwise (Keras: HWIO kernels, NHWC flatten) convert on load
and export, so one dict puts identical weights into all three frameworks.

Initial weights are drawn here, in numpy, from the run's seed (`data.seeds` stream "init"): the three
frameworks start from the same numbers for the same seed. The scheme is PyTorch's default layer init
for weights, U(-1/sqrt(fan_in), +1/sqrt(fan_in)), with zero biases.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlbench.data.seeds import stream

KERNEL = 3
POOL = 2
LAYERS = ("conv1", "conv2", "fc1", "fc2")


@dataclass(frozen=True)
class SmallCnnSizes:
    image_size: int = 28
    channels: int = 1
    num_classes: int = 10
    widths: tuple[int, int] = (32, 64)
    hidden: int = 128

    def __post_init__(self) -> None:
        if self.image_size < POOL * POOL:
            raise ValueError(
                f"small_cnn: image_size={self.image_size} is below {POOL * POOL} (two 2x2 pools)"
            )

    @property
    def feature_size(self) -> int:
        """Height (= width) of conv2's pooled output (pools round down, in every framework)."""
        return self.image_size // POOL // POOL

    @property
    def flat_features(self) -> int:
        return self.widths[1] * self.feature_size**2

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Canonical parameter shapes, keyed "<layer>.weight" / "<layer>.bias"."""
        c1, c2 = self.widths
        return {
            "conv1.weight": (c1, self.channels, KERNEL, KERNEL),
            "conv1.bias": (c1,),
            "conv2.weight": (c2, c1, KERNEL, KERNEL),
            "conv2.bias": (c2,),
            "fc1.weight": (self.hidden, self.flat_features),
            "fc1.bias": (self.hidden,),
            "fc2.weight": (self.num_classes, self.hidden),
            "fc2.bias": (self.num_classes,),
        }

    def params(self) -> int:
        return sum(int(np.prod(s)) for s in self.shapes().values())

    def flops(self) -> int:
        """Forward conv + dense FLOPs per sample, a multiply-add = 2 (what the backends' tools count)."""
        c1, c2 = self.widths
        s, half = self.image_size, self.image_size // POOL
        conv = 2 * KERNEL * KERNEL * (s * s * c1 * self.channels + half * half * c2 * c1)
        dense = 2 * (self.flat_features * self.hidden + self.hidden * self.num_classes)
        return conv + dense


def initial_weights(sizes: SmallCnnSizes, seed: int) -> dict[str, np.ndarray]:
    """float32 weights for run `seed` in the canonical layout: U(+-1/sqrt(fan_in)), zero biases."""
    rng = stream(seed, "init")
    out: dict[str, np.ndarray] = {}
    for name, shape in sizes.shapes().items():
        if name.endswith(".bias"):
            out[name] = np.zeros(shape, dtype=np.float32)
        else:
            bound = 1.0 / np.sqrt(np.prod(shape[1:]))
            out[name] = rng.uniform(-bound, bound, size=shape).astype(np.float32)
    return out


def fc1_to_nhwc(w: np.ndarray, sizes: SmallCnnSizes) -> np.ndarray:
    """fc1's canonical (out, C*H*W) weight as an (H*W*C, out) kernel: what an NHWC flatten feeds."""
    f = sizes.feature_size
    return w.reshape(sizes.hidden, sizes.widths[1], f, f).transpose(2, 3, 1, 0).reshape(-1, sizes.hidden)


def fc1_from_nhwc(k: np.ndarray, sizes: SmallCnnSizes) -> np.ndarray:
    """The inverse of fc1_to_nhwc: an (H*W*C, out) kernel back to the canonical (out, C*H*W) weight."""
    f = sizes.feature_size
    return k.reshape(f, f, sizes.widths[1], sizes.hidden).transpose(3, 2, 0, 1).reshape(sizes.hidden, -1)


def check_weights(sizes: SmallCnnSizes, weights: dict[str, np.ndarray]) -> None:
    """Every canonical key present with its shape; one line naming the first mismatch otherwise."""
    for name, shape in sizes.shapes().items():
        got = getattr(weights.get(name), "shape", None)
        if got != shape:
            raise ValueError(f"small_cnn weights: {name} has shape {got}, expected {shape}")
