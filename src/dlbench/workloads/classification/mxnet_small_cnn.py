"""The accuracy mode's small CNN in Gluon (architecture, layout and init: workloads/classification/small_cnn_plan.py).

NCHW, and Gluon stores conv (out, in, kh, kw) and dense (out, in) weights as PyTorch does; Dense
flattens NCHW maps in (channel, row, column) order, so the canonical weights load unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbench.backends.mxnet._compat import mx
from dlbench.workloads.classification.small_cnn_plan import (
    KERNEL,
    POOL,
    SmallCnnSizes,
    check_weights,
    initial_weights,
)

nn = mx.gluon.nn


class SmallCnn(mx.gluon.HybridBlock):
    def __init__(self, sizes: SmallCnnSizes, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        c1, c2 = sizes.widths
        self.sizes = sizes
        with self.name_scope():
            self.conv1 = nn.Conv2D(c1, KERNEL, 1, KERNEL // 2, in_channels=sizes.channels, activation="relu")
            self.conv2 = nn.Conv2D(c2, KERNEL, 1, KERNEL // 2, in_channels=c1, activation="relu")
            self.pool = nn.MaxPool2D(POOL, POOL)
            self.fc1 = nn.Dense(sizes.hidden, activation="relu", in_units=sizes.flat_features)
            self.fc2 = nn.Dense(sizes.num_classes, in_units=sizes.hidden)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        x = self.pool(self.conv2(self.pool(self.conv1(x))))
        return self.fc2(self.fc1(x))

    def layers(self) -> dict[str, Any]:
        return {"conv1": self.conv1, "conv2": self.conv2, "fc1": self.fc1, "fc2": self.fc2}


def build_small_cnn(
    *,
    image_size: int = 28,
    channels: int = 1,
    num_classes: int = 10,
    widths: tuple[int, int] = (32, 64),
    hidden: int = 128,
    seed: int = 0,
    ctx: Any = None,
) -> SmallCnn:
    """The network on `ctx` (default CPU) with the seed's initial weights (as the other frameworks')."""
    net = SmallCnn(
        SmallCnnSizes(image_size, channels, num_classes, tuple(widths), hidden), prefix="smallcnn_"
    )
    initialize(net, ctx or mx.cpu(), seed)
    return net


def initialize(net: SmallCnn, ctx: Any, seed: int = 0) -> None:
    """Allocate the parameters on `ctx` and fill them with the seed's initial weights."""
    net.initialize(mx.init.Zero(), ctx=ctx)
    load_seed(net, seed)


def load_seed(net: SmallCnn, seed: int) -> bool:
    """Replace the weights with the seed's framework-neutral initial weights (always possible: True)."""
    load_weights(net, initial_weights(net.sizes, seed))
    return True


def load_weights(net: SmallCnn, weights: dict[str, np.ndarray]) -> None:
    """Set canonical-layout numpy weights on an initialized network (on every context it lives on)."""
    check_weights(net.sizes, weights)
    for name, block in net.layers().items():
        block.weight.set_data(mx.nd.array(weights[f"{name}.weight"], dtype=block.weight.dtype))
        block.bias.set_data(mx.nd.array(weights[f"{name}.bias"], dtype=block.bias.dtype))


def export_weights(net: SmallCnn) -> dict[str, np.ndarray]:
    """The network's weights as canonical-layout float32 numpy arrays."""
    out: dict[str, np.ndarray] = {}
    for name, block in net.layers().items():
        out[f"{name}.weight"] = block.weight.data().asnumpy().astype(np.float32)
        out[f"{name}.bias"] = block.bias.data().asnumpy().astype(np.float32)
    return out
