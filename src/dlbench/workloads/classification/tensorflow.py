"""Keras 3 (functional API, NHWC) definitions of the benchmark networks, equal to the torch ones.

keras.applications is not used: its ResNet50 is v1 (stride on the first 1x1 conv, biased convs) and
its VGG16 has no adaptive pooling, so parameters and FLOPs would differ from torchvision. Every
strided or padded layer pads explicitly and symmetrically like PyTorch (TF's "same" pads the
bottom/right side more for stride 2 on even sizes, which shifts the sampling grid).

The logits pass through a float32 cast "logits_f32" (Keras' advice for mixed precision: keep the final
activation in float32; the dense itself runs in the compute dtype, like torch autocast).
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers, ops

from dlbench.backends.tensorflow.family import TFFamily
from dlbench.workloads.classification import exchange
from dlbench.workloads.classification.spec import ClassificationConfig

BN_EPS = 1e-5  # torch BatchNorm2d default
BN_MOMENTUM = 0.9  # keras momentum = 1 - torch momentum (0.1)
# Initializers as in torch, so first losses are comparable across frameworks (speed is unaffected):
# torchvision's kaiming_normal_(fan_out, relu) for convs, torch's default layer init
# (kaiming_uniform_(a=sqrt(5)) = U(+-1/sqrt(fan_in))) elsewhere, and VGG's normal(0, 0.01) classifier.
# Each is a factory called once per layer: a Keras 3 initializer instance keeps the seed it drew when made,
# so one instance shared by several layers gives every layer of one shape the same weights (all 3x3 convs of
# a ResNet stage identical), a start that trains unlike torch's independent draws.


def he_fan_out() -> keras.initializers.Initializer:
    return keras.initializers.VarianceScaling(2.0, mode="fan_out", distribution="untruncated_normal")


def torch_default() -> keras.initializers.Initializer:
    return keras.initializers.VarianceScaling(1.0 / 3.0, mode="fan_in", distribution="uniform")


def vgg_dense() -> keras.initializers.Initializer:
    return keras.initializers.RandomNormal(stddev=0.01)


def _conv(x, filters: int, kernel: int, stride: int = 1, init=he_fan_out, name: str | None = None):
    """Bias-free conv with PyTorch padding (kernel // 2 on every side); `init` is an initializer factory,
    called here so that each layer draws its own weights."""
    pad = kernel // 2
    if stride > 1 and pad:
        x = layers.ZeroPadding2D(pad, name=f"{name}_pad" if name else None)(x)
        padding = "valid"
    else:
        padding = "same"  # stride 1, odd kernel: symmetric, equal to torch's padding=kernel//2
    return layers.Conv2D(
        filters,
        kernel,
        strides=stride,
        padding=padding,
        use_bias=False,
        kernel_initializer=init(),
        name=name,
    )(x)


def _bn(x, name: str | None = None):
    return layers.BatchNormalization(epsilon=BN_EPS, momentum=BN_MOMENTUM, name=name)(x)


def _head(x, num_classes: int, init=torch_default):
    """Logits dense in the compute dtype, then a float32 cast for a numerically safe loss."""
    x = layers.Dense(num_classes, kernel_initializer=init(), name="logits")(x)
    return layers.Activation("linear", dtype="float32", name="logits_f32")(x)


def _input(spec: ClassificationConfig, dtype: str):
    return keras.Input(shape=(spec.image_size, spec.image_size, spec.channels), dtype=dtype, name="images")


# --- ResNet-50 v1.5 (torchvision.models.resnet50) --------------------------------------------------


def _bottleneck(x, width: int, stride: int, name: str):
    out_ch = width * 4
    shortcut = x
    if stride != 1 or x.shape[-1] != out_ch:
        shortcut = layers.Conv2D(
            out_ch,
            1,
            strides=stride,
            use_bias=False,
            kernel_initializer=he_fan_out(),
            name=f"{name}_down_conv",
        )(x)
        shortcut = _bn(shortcut, f"{name}_down_bn")
    y = layers.ReLU()(_bn(_conv(x, width, 1, name=f"{name}_conv1"), f"{name}_bn1"))
    y = layers.ReLU()(_bn(_conv(y, width, 3, stride, name=f"{name}_conv2"), f"{name}_bn2"))  # v1.5
    y = _bn(_conv(y, out_ch, 1, name=f"{name}_conv3"), f"{name}_bn3")
    return layers.ReLU()(layers.Add()([y, shortcut]))


def resnet50(spec: ClassificationConfig, input_dtype: str = "float32") -> keras.Model:
    inputs = _input(spec, input_dtype)
    x = layers.ReLU()(_bn(_conv(inputs, 64, 7, 2, name="stem_conv"), "stem_bn"))
    x = layers.ZeroPadding2D(1)(x)  # after ReLU, so zeros equal torch's -inf max-pool padding
    x = layers.MaxPooling2D(3, strides=2)(x)
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for i in range(blocks):
            x = _bottleneck(x, width, 2 if (stage > 0 and i == 0) else 1, f"layer{stage + 1}_{i}")
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, _head(x, spec.num_classes), name="resnet50")


# --- VGG16 (torchvision.models.vgg16, configuration D, no batch norm) ------------------------------


class AdaptiveAvgPool2D(layers.Layer):
    """torch.nn.AdaptiveAvgPool2d for a static NHWC input: out = P_h · x · P_wᵀ with averaging
    matrices P built from torch's bin rule (start = floor(i·H/n), end = ceil((i+1)·H/n)).

    No parameters. VGG16 needs it so its classifier sees 7x7x512 (25088 inputs) at any image size;
    at 224 the map is already 7x7 and the layer is skipped.
    """

    def __init__(self, output_size: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.output_size = output_size

    @staticmethod
    def _matrix(size: int, n: int) -> np.ndarray:
        m = np.zeros((n, size), dtype=np.float32)
        for i in range(n):
            start, end = (i * size) // n, -((-(i + 1) * size) // n)
            m[i, start:end] = 1.0 / (end - start)
        return m

    def call(self, x):
        ph = ops.convert_to_tensor(self._matrix(x.shape[1], self.output_size), dtype=x.dtype)
        pw = ops.convert_to_tensor(self._matrix(x.shape[2], self.output_size), dtype=x.dtype)
        return ops.einsum("ih,jw,nhwc->nijc", ph, pw, x)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.output_size, self.output_size, input_shape[3])

    def get_config(self) -> dict:
        return {**super().get_config(), "output_size": self.output_size}


_VGG16_CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def vgg16(spec: ClassificationConfig, input_dtype: str = "float32") -> keras.Model:
    inputs = _input(spec, input_dtype)
    x = inputs
    first = True
    for v in _VGG16_CFG:
        if v == "M":
            x = layers.MaxPooling2D(2, strides=2)(x)
            continue
        name = "stem_conv" if first else None
        x = layers.Conv2D(v, 3, padding="same", kernel_initializer=he_fan_out(), name=name)(x)
        x = layers.ReLU()(x)
        first = False
    if x.shape[1] != 7 or x.shape[2] != 7:
        x = AdaptiveAvgPool2D(7, name="adaptive_pool")(x)
    x = layers.Flatten()(x)
    for _ in range(2):
        x = layers.Dense(4096, activation="relu", kernel_initializer=vgg_dense())(x)
        x = layers.Dropout(0.5)(x)
    return keras.Model(inputs, _head(x, spec.num_classes, vgg_dense), name="vgg16")


# --- CIFAR ResNet (He et al. 2016, sec. 4.2; option A shortcuts) -----------------------------------


class PadShortcut(layers.Layer):
    """Option A shortcut: subsample by 2 and zero-pad the new channels at the end (no parameters)."""

    def __init__(self, extra_channels: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.extra = extra_channels

    def call(self, x):
        return ops.pad(x[:, ::2, ::2, :], [[0, 0], [0, 0], [0, 0], [0, self.extra]])

    def compute_output_shape(self, input_shape):
        h, w = input_shape[1], input_shape[2]
        half = lambda s: None if s is None else (s + 1) // 2  # noqa: E731
        return (input_shape[0], half(h), half(w), input_shape[3] + self.extra)

    def get_config(self) -> dict:
        return {**super().get_config(), "extra_channels": self.extra}


def _basic_block(x, cout: int, stride: int, name: str):
    cin = x.shape[-1]
    y = layers.ReLU()(_bn(_conv(x, cout, 3, stride, torch_default, f"{name}_conv1"), f"{name}_bn1"))
    y = _bn(_conv(y, cout, 3, init=torch_default, name=f"{name}_conv2"), f"{name}_bn2")
    shortcut = PadShortcut(cout - cin, name=f"{name}_pad")(x) if (stride != 1 or cin != cout) else x
    return layers.ReLU()(layers.Add()([y, shortcut]))


def resnet_cifar(spec: ClassificationConfig, input_dtype: str = "float32") -> keras.Model:
    depth = spec.depth or 56
    if (depth - 2) % 6:
        raise ValueError(f"model.depth={depth}: a CIFAR ResNet has depth 6n+2 (20, 32, 44, 56, 110)")
    n = (depth - 2) // 6
    inputs = _input(spec, input_dtype)
    x = layers.ReLU()(_bn(_conv(inputs, 16, 3, init=torch_default, name="stem_conv"), "stem_bn"))
    for stage, width in enumerate((16, 32, 64)):
        for i in range(n):
            x = _basic_block(x, width, 2 if (stage > 0 and i == 0) else 1, f"stage{stage + 1}_{i}")
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, _head(x, spec.num_classes), name=f"resnet{depth}_cifar")


def _small_cnn(spec: ClassificationConfig, input_dtype: str = "float32") -> keras.Model:
    from dlbench.workloads.classification import (
        tensorflow_small_cnn as small_cnn,  # it reuses _head from this module
    )

    return small_cnn.build_small_cnn(
        image_size=spec.image_size,
        channels=spec.channels,
        num_classes=spec.num_classes,
        input_dtype=input_dtype,
    )


MODELS = {"resnet50": resnet50, "vgg16": vgg16, "resnet_cifar": resnet_cifar, "small_cnn": _small_cnn}


def build_model(spec: ClassificationConfig, float_dtype: str = "float32") -> keras.Model:
    """Build under the current Keras dtype policy (set it first: layers read it when created); the image
    input arrives as `float_dtype` (NHWC)."""
    if spec.name not in MODELS:
        raise ValueError(f"model={spec.name}: the tf backend has no such model (has {sorted(MODELS)})")
    return MODELS[spec.name](spec, float_dtype)


def load_seeded_weights(model: keras.Model, spec: ClassificationConfig, seed: int) -> bool:
    """Any mode: the seed's framework-neutral initial weights where the model has them (small_cnn)."""
    if spec.name != "small_cnn":
        return False
    from dlbench.workloads.classification import tensorflow_small_cnn as small_cnn

    return small_cnn.load_seed(model, seed)


_KINDS = ((layers.Conv2D, "conv"), (layers.BatchNormalization, "bn"), (layers.Dense, "dense"))


def _ordered(model: keras.Model) -> list[tuple[str, layers.Layer]]:
    """(kind, layer) of the weighted layers in the order torch and MXNet define them: creation order,
    except that a ResNet-50 block's shortcut (made first here) comes after the block's bn3 there."""
    weighted = [(k, lay) for lay in model.layers for cls, k in _KINDS if isinstance(lay, cls)]
    by_name = {lay.name: (k, lay) for k, lay in weighted}
    out = []
    for kind, lay in weighted:
        if "_down_" in lay.name:
            continue
        out.append((kind, lay))
        if lay.name.endswith("_bn3"):
            block = lay.name.removesuffix("_bn3")
            out += [by_name[n] for n in (f"{block}_down_conv", f"{block}_down_bn") if n in by_name]
    return out


def _flattened(model: keras.Model) -> dict[str, tuple[int, int, int]]:
    """The dense layer after each Flatten of an NHWC map (VGG16's first classifier layer) -> the map's
    (H, W, C): Keras flattens it as (H, W, C), the neutral layout (torch's) as (C, H, W)."""
    out, pending = {}, None
    for lay in model.layers:
        if isinstance(lay, layers.Flatten) and len(lay.input.shape) == 4:
            pending = tuple(int(d) for d in lay.input.shape[1:])
        elif isinstance(lay, layers.Dense) and pending is not None:
            out[lay.name], pending = pending, None
    return out


def _variables(kind: str, lay: layers.Layer, hwc: tuple[int, int, int] | None = None) -> dict[str, tuple]:
    """param -> (variable, numpy from neutral layout, numpy to neutral layout); `hwc`: the dense reads a
    flattened (H, W, C) map, so its input rows are permuted from and to the neutral (C, H, W) order."""
    same = (lambda a: a, lambda a: a)
    if kind == "bn":
        return {p: (getattr(lay, v), *same) for p, v in zip(exchange.PARAMS["bn"], ("gamma", "beta", "moving_mean", "moving_variance"), strict=True)}  # fmt: skip
    bias = {"bias": (lay.bias, *same)} if lay.use_bias else {}
    if kind == "conv":  # Keras HWIO <-> OIHW
        return {"weight": (lay.kernel, lambda a: a.transpose(2, 3, 1, 0), lambda a: a.transpose(3, 2, 0, 1))} | bias  # fmt: skip
    if hwc is None:  # dense (in, out) <-> (out, in)
        return {"weight": (lay.kernel, lambda a: a.T, lambda a: a.T)} | bias
    h, w, c = hwc  # (out, C*H*W) <-> (H*W*C, out)
    return {
        "weight": (
            lay.kernel,
            lambda a: a.reshape(-1, c, h, w).transpose(2, 3, 1, 0).reshape(h * w * c, -1),
            lambda a: a.reshape(h, w, c, -1).transpose(3, 2, 0, 1).reshape(-1, c * h * w),
        )
    } | bias


def _exchangeable(model: keras.Model) -> bool:
    """The ResNets (CIFAR and ResNet-50) and VGG16: exchange.py's order holds for them."""
    resnet = model.name == "resnet50" or (model.name.startswith("resnet") and model.name.endswith("_cifar"))
    return resnet or model.name == "vgg16"


def export_layers(model: keras.Model) -> dict[str, np.ndarray]:
    """A ResNet's or VGG16's weights under exchange.py's neutral names."""
    flat = _flattened(model)
    return {
        exchange.name(i, kind, p): np.asarray(to_neutral(np.asarray(var.numpy(), np.float32))).copy()
        for i, (kind, lay) in enumerate(_ordered(model))
        for p, (var, _, to_neutral) in _variables(kind, lay, flat.get(lay.name)).items()
    }


def load_layers(model: keras.Model, weights: dict[str, np.ndarray]) -> None:
    flat = _flattened(model)
    expected = {
        exchange.name(i, kind, p): exchange.neutral_shape(to_neutral, var.shape)
        for i, (kind, lay) in enumerate(_ordered(model))
        for p, (var, _, to_neutral) in _variables(kind, lay, flat.get(lay.name)).items()
    }
    exchange.check(expected, weights)
    for i, (kind, lay) in enumerate(_ordered(model)):
        for p, (var, from_neutral, _) in _variables(kind, lay, flat.get(lay.name)).items():
            var.assign(
                np.ascontiguousarray(from_neutral(weights[exchange.name(i, kind, p)])).astype(var.dtype)
            )


class ClassificationTF(TFFamily):
    """ResNet-50 v1.5, VGG16, the CIFAR ResNet and the small CNN, in TensorFlow."""

    build_model = staticmethod(build_model)
    load_seeded_weights = staticmethod(load_seeded_weights)

    def export_weights(self, model: keras.Model) -> dict[str, np.ndarray]:
        """Neutral names: the small CNN's own (its model carries small_cnn_sizes), exchange.py's for the
        ResNets and VGG16."""
        if hasattr(model, "small_cnn_sizes"):
            from dlbench.workloads.classification import tensorflow_small_cnn as small_cnn

            return small_cnn.export_weights(model)
        if _exchangeable(model):
            return export_layers(model)
        return super().export_weights(model)

    def load_weights(self, model: keras.Model, weights: dict[str, np.ndarray]) -> None:
        if hasattr(model, "small_cnn_sizes"):
            from dlbench.workloads.classification import tensorflow_small_cnn as small_cnn

            return small_cnn.load_weights(model, weights)
        if _exchangeable(model):
            return load_layers(model, weights)
        return super().load_weights(model, weights)
