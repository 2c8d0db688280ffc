"""The accuracy mode's small CNN in Keras 3 (architecture, layout and init: workloads/classification/small_cnn_plan.py).

NHWC, so the canonical (PyTorch) weights are converted on load and export: conv kernels OIHW <-> HWIO,
dense kernels transposed, and fc1's inputs reordered from the canonical (channel, row, column) flatten
to Keras' (row, column, channel) one. Layer names follow the classification models' convention the
bench relies on: the first conv is "stem_conv", the last dense "logits", its float32 cast "logits_f32".
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers

from dlbench.workloads.classification.small_cnn_plan import (
    KERNEL,
    POOL,
    SmallCnnSizes,
    check_weights,
    fc1_from_nhwc,
    fc1_to_nhwc,
    initial_weights,
)
from dlbench.workloads.classification.tensorflow import _head

KERAS_NAMES = {"conv1": "stem_conv", "conv2": "conv2", "fc1": "fc1", "fc2": "logits"}


def small_cnn(sizes: SmallCnnSizes, input_dtype: str = "float32") -> keras.Model:
    """The uninitialised-by-us network (built under the current Keras dtype policy)."""
    s = sizes.image_size
    inputs = keras.Input(shape=(s, s, sizes.channels), dtype=input_dtype, name="images")
    x = layers.Conv2D(sizes.widths[0], KERNEL, padding="same", activation="relu", name="stem_conv")(inputs)
    x = layers.MaxPooling2D(POOL)(x)
    x = layers.Conv2D(sizes.widths[1], KERNEL, padding="same", activation="relu", name="conv2")(x)
    x = layers.MaxPooling2D(POOL)(x)
    x = layers.Dense(sizes.hidden, activation="relu", name="fc1")(layers.Flatten()(x))
    model = keras.Model(inputs, _head(x, sizes.num_classes), name="small_cnn")
    model.small_cnn_sizes = sizes  # what load_weights / export_weights convert against
    return model


def build_small_cnn(
    *,
    image_size: int = 28,
    channels: int = 1,
    num_classes: int = 10,
    widths: tuple[int, int] = (32, 64),
    hidden: int = 128,
    seed: int = 0,
    input_dtype: str = "float32",
) -> keras.Model:
    """The network with the seed's initial weights (identical to the other frameworks' for that seed)."""
    model = small_cnn(SmallCnnSizes(image_size, channels, num_classes, tuple(widths), hidden), input_dtype)
    load_weights(model, initial_weights(model.small_cnn_sizes, seed))
    return model


def load_seed(model: keras.Model, seed: int) -> bool:
    """Replace the weights with the seed's framework-neutral initial weights (always possible: True)."""
    load_weights(model, initial_weights(model.small_cnn_sizes, seed))
    return True


def load_weights(model: keras.Model, weights: dict[str, np.ndarray]) -> None:
    """Set canonical-layout numpy weights (converted to Keras' layout) on the model's layers."""
    sizes = model.small_cnn_sizes
    check_weights(sizes, weights)
    for layer, keras_name in KERAS_NAMES.items():
        w, b = weights[f"{layer}.weight"], weights[f"{layer}.bias"]
        if layer.startswith("conv"):
            kernel = w.transpose(2, 3, 1, 0)
        else:
            kernel = fc1_to_nhwc(w, sizes) if layer == "fc1" else w.T
        model.get_layer(keras_name).set_weights([kernel, b])


def export_weights(model: keras.Model) -> dict[str, np.ndarray]:
    """The model's weights as canonical-layout float32 numpy arrays."""
    sizes = model.small_cnn_sizes
    out: dict[str, np.ndarray] = {}
    for layer, keras_name in KERAS_NAMES.items():
        kernel, bias = (np.asarray(v, dtype=np.float32) for v in model.get_layer(keras_name).get_weights())
        if layer.startswith("conv"):
            w = kernel.transpose(3, 2, 0, 1)
        else:
            w = fc1_from_nhwc(kernel, sizes) if layer == "fc1" else kernel.T
        out[f"{layer}.weight"], out[f"{layer}.bias"] = np.ascontiguousarray(w), bias
    return out
