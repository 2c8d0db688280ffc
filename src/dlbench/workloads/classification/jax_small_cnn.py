"""The accuracy mode's small CNN in Flax (architecture, layout and init: workloads/classification/small_cnn_plan.py).

NHWC, so the canonical (PyTorch) weights are converted on load and export, as for Keras: conv kernels
OIHW <-> HWIO, dense kernels transposed, fc1's inputs reordered from the canonical (channel, row, column)
flatten to the (row, column, channel) one. The weights live in the Network's variables (a Flax module has
none), so loading replaces them there.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dlbench.backends.jax.family import Network
from dlbench.workloads.classification.small_cnn_plan import (
    KERNEL,
    POOL,
    SmallCnnSizes,
    check_weights,
    fc1_from_nhwc,
    fc1_to_nhwc,
    initial_weights,
)

FLAX_NAMES = {"conv1": "stem_conv", "conv2": "conv2", "fc1": "fc1", "fc2": "logits"}


class SmallCnn(nn.Module):
    sizes: SmallCnnSizes = SmallCnnSizes()
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = False):
        dt = {"dtype": self.dtype, "param_dtype": self.param_dtype}
        pad = ((KERNEL // 2, KERNEL // 2),) * 2
        for layer, width in zip(("conv1", "conv2"), self.sizes.widths, strict=True):
            x = nn.relu(nn.Conv(width, (KERNEL, KERNEL), padding=pad, name=FLAX_NAMES[layer], **dt)(x))
            x = nn.max_pool(x, (POOL, POOL), (POOL, POOL))
        x = nn.relu(nn.Dense(self.sizes.hidden, name="fc1", **dt)(x.reshape(x.shape[0], -1)))
        return nn.Dense(self.sizes.num_classes, name="logits", **dt)(x).astype(jnp.float32)


def load_seed(net: Network, seed: int) -> None:
    """Replace the weights with the seed's framework-neutral initial weights."""
    load_weights(net, initial_weights(net.module.sizes, seed))


def load_weights(net: Network, weights: dict[str, np.ndarray]) -> None:
    """Set canonical-layout numpy weights (converted to Flax's layout) as the network's parameters."""
    sizes: SmallCnnSizes = net.module.sizes
    check_weights(sizes, weights)
    dtype = net.module.param_dtype
    params = {}
    for layer, flax_name in FLAX_NAMES.items():
        w, b = weights[f"{layer}.weight"], weights[f"{layer}.bias"]
        if layer.startswith("conv"):
            kernel = w.transpose(2, 3, 1, 0)
        else:
            kernel = fc1_to_nhwc(w, sizes) if layer == "fc1" else w.T
        params[flax_name] = {"kernel": jnp.asarray(kernel, dtype), "bias": jnp.asarray(b, dtype)}
    net.variables = {**net.variables, "params": params}


def export_weights(net: Network) -> dict[str, np.ndarray]:
    """The network's weights as canonical-layout float32 numpy arrays."""
    sizes: SmallCnnSizes = net.module.sizes
    out: dict[str, np.ndarray] = {}
    params = jax.device_get(net.params)
    for layer, flax_name in FLAX_NAMES.items():
        kernel = np.asarray(params[flax_name]["kernel"], dtype=np.float32)
        if layer.startswith("conv"):
            w = kernel.transpose(3, 2, 0, 1)
        else:
            w = fc1_from_nhwc(kernel, sizes) if layer == "fc1" else kernel.T
        out[f"{layer}.weight"] = np.ascontiguousarray(w)
        out[f"{layer}.bias"] = np.asarray(params[flax_name]["bias"], dtype=np.float32)
    return out
