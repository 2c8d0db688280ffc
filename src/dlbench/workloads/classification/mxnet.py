"""Gluon definitions of the benchmark networks, layer for layer the torch backend's.

gluon.model_zoo's `resnet50_v1` is ResNet v1 (stride on the first 1x1 conv of a bottleneck) and its
VGG has no adaptive pooling, so all three networks are defined here to be the torchvision / He et al.
networks exactly (same parameter counts at every image size, same conv/dense FLOPs):

- resnet50: ResNet-50 v1.5 (stride 2 on the 3x3 conv), bias-free convs, BatchNorm(eps 1e-5,
  momentum 0.9), projection shortcut conv1x1 + BN; 25,557,032 parameters at 1000 classes.
- vgg16: configuration D without BN, adaptive average pooling to 7x7 (as torchvision does, so the
  classifier is 25088 -> 4096 -> 4096 -> classes at any image size); 138,357,544 parameters.
- resnet_cifar: He et al. 2016 sec. 4.2, depth 6n+2, 16/32/64 channels, option A shortcuts
  (subsample by 2 and zero-pad the new channels: no parameters).

Layout is NCHW. Every layer is given its input size, so parameters have their shapes at initialize.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.family import MXNetFamily
from dlbench.workloads.classification import exchange
from dlbench.workloads.classification import mxnet_small_cnn as small_cnn
from dlbench.workloads.classification.small_cnn_plan import SmallCnnSizes
from dlbench.workloads.classification.spec import ClassificationConfig

nn = mx.gluon.nn
HybridBlock = mx.gluon.HybridBlock

_BN = {"epsilon": 1e-5, "momentum": 0.9}


def _conv(channels: int, kernel: int, stride: int, pad: int, cin: int, bias: bool = False) -> Any:
    return nn.Conv2D(channels, kernel, stride, pad, use_bias=bias, in_channels=cin)


class _Bottleneck(HybridBlock):
    """ResNet v1.5 bottleneck: 1x1 -> 3x3 (carries the stride) -> 1x1 (4x width), then add + ReLU."""

    def __init__(self, cin: int, width: int, stride: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        cout = 4 * width
        with self.name_scope():
            self.body = nn.HybridSequential(prefix="")
            self.body.add(
                _conv(width, 1, 1, 0, cin),
                nn.BatchNorm(in_channels=width, **_BN),
                nn.Activation("relu"),
                _conv(width, 3, stride, 1, width),
                nn.BatchNorm(in_channels=width, **_BN),
                nn.Activation("relu"),
                _conv(cout, 1, 1, 0, width),
                nn.BatchNorm(in_channels=cout, **_BN),
            )
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.HybridSequential(prefix="down_")
                self.downsample.add(_conv(cout, 1, stride, 0, cin), nn.BatchNorm(in_channels=cout, **_BN))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        shortcut = self.downsample(x) if self.downsample is not None else x
        return F.Activation(self.body(x) + shortcut, act_type="relu")


class ResNet50V15(HybridBlock):
    """torchvision.models.resnet50: stem 7x7/2 + maxpool, stages of 3/4/6/3 bottlenecks, avgpool, fc."""

    def __init__(self, num_classes: int = 1000, channels: int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(
                _conv(64, 7, 2, 3, channels),
                nn.BatchNorm(in_channels=64, **_BN),
                nn.Activation("relu"),
                nn.MaxPool2D(3, 2, 1),
            )
            cin = 64
            for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
                for i in range(blocks):
                    stride = 2 if (stage > 0 and i == 0) else 1
                    self.features.add(
                        _Bottleneck(cin, width, stride, prefix=f"stage{stage + 1}_unit{i + 1}_")
                    )
                    cin = 4 * width
            self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
            self.fc = nn.Dense(num_classes, in_units=cin)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.fc(self.features(x))


_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGG16(HybridBlock):
    """torchvision.models.vgg16: 13 conv3x3+bias+ReLU, 5 max-pools, adaptive avg-pool 7x7, 3 dense."""

    def __init__(
        self, num_classes: int = 1000, channels: int = 3, dropout: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            cin = channels
            for v in _VGG16:
                if v == "M":
                    self.features.add(nn.MaxPool2D(2, 2))
                else:
                    self.features.add(_conv(v, 3, 1, 1, cin, bias=True), nn.Activation("relu"))
                    cin = v
            self.classifier = nn.HybridSequential(prefix="")
            # Dropout is the identity at inference; left out there, since it has no bfloat16 kernel.
            units = cin * 7 * 7
            for _ in range(2):
                self.classifier.add(nn.Dense(4096, activation="relu", in_units=units))
                if dropout:
                    self.classifier.add(nn.Dropout(0.5))
                units = 4096
            self.classifier.add(nn.Dense(num_classes, in_units=units))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        # torchvision's AdaptiveAvgPool2d((7, 7)): identity at 224x224, replication below 112x112.
        x = F.contrib.AdaptiveAvgPooling2D(self.features(x), output_size=(7, 7))
        return self.classifier(x)


class _PadShortcut(HybridBlock):
    """Option A shortcut: take every second pixel and append `extra` zero channels (no parameters)."""

    def __init__(self, extra: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.extra = extra

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        sub = F.slice(x, begin=(None, None, None, None), end=(None, None, None, None), step=(1, 1, 2, 2))
        one = F.slice_axis(sub, axis=1, begin=0, end=1)
        zeros = F.tile(F.zeros_like(one), reps=(1, self.extra, 1, 1))
        return F.concat(sub, zeros, dim=1)


class _BasicBlock(HybridBlock):
    def __init__(self, cin: int, cout: int, stride: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.body = nn.HybridSequential(prefix="")
            self.body.add(
                _conv(cout, 3, stride, 1, cin),
                nn.BatchNorm(in_channels=cout, **_BN),
                nn.Activation("relu"),
                _conv(cout, 3, 1, 1, cout),
                nn.BatchNorm(in_channels=cout, **_BN),
            )
            self.shortcut = _PadShortcut(cout - cin) if (stride != 1 or cin != cout) else None

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        shortcut = self.shortcut(x) if self.shortcut is not None else x
        return F.Activation(self.body(x) + shortcut, act_type="relu")


class CifarResNet(HybridBlock):
    """He et al. 2016 CIFAR ResNet: conv3x3(16), 3 stages of n basic blocks (16/32/64), avgpool, fc."""

    def __init__(self, depth: int = 56, num_classes: int = 10, channels: int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if (depth - 2) % 6:
            raise ValueError(f"model.depth={depth}: a CIFAR ResNet has depth 6n+2 (20, 32, 44, 56, 110)")
        n = (depth - 2) // 6
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(
                _conv(16, 3, 1, 1, channels),
                nn.BatchNorm(in_channels=16, **_BN),
                nn.Activation("relu"),
            )
            cin = 16
            for stage, width in enumerate((16, 32, 64)):
                for i in range(n):
                    stride = 2 if (stage > 0 and i == 0) else 1
                    self.features.add(
                        _BasicBlock(cin, width, stride, prefix=f"stage{stage + 1}_unit{i + 1}_")
                    )
                    cin = width
            self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
            self.fc = nn.Dense(num_classes, in_units=cin)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.fc(self.features(x))


def build_model(spec: ClassificationConfig, train: bool = True) -> Any:
    """The HybridBlock for `spec` (uninitialized: the caller picks context, initializer and dtype).
    `train=False` builds the inference network (VGG16 without its Dropout layers, the identity there)."""
    if spec.name == "resnet50":
        return ResNet50V15(spec.num_classes, spec.channels, prefix="resnet50v15_")
    if spec.name == "vgg16":
        return VGG16(spec.num_classes, spec.channels, dropout=train, prefix="vgg16_")
    if spec.name == "resnet_cifar":
        depth = spec.depth or 56
        return CifarResNet(depth, spec.num_classes, spec.channels, prefix=f"resnet{depth}cifar_")
    if spec.name == "small_cnn":
        return small_cnn.SmallCnn(
            SmallCnnSizes(spec.image_size, spec.channels, spec.num_classes), prefix="smallcnn_"
        )
    raise ValueError(f"model={spec.name}: the mxnet backend has no such model")


def initialize(net: Any, spec: ClassificationConfig, ctx: Any) -> None:
    """Initialize as the torch backend does, so both frameworks train the same numbers.

    torchvision ResNet-50/VGG16: conv weights kaiming-normal (fan_out, ReLU) = Xavier gaussian, out, 2;
    VGG dense weights N(0, 0.01); other dense weights and the CIFAR ResNet use torch's default
    U(+-1/sqrt(fan_in)) = Xavier uniform, in, 1. Biases zero, BN gamma one / beta zero (the
    initializers' own rules for those names).
    """
    torch_default = mx.init.Xavier(rnd_type="uniform", factor_type="in", magnitude=1)
    if spec.name == "small_cnn":  # the numpy initial weights of seed 0 (load_seeded_weights: another seed)
        small_cnn.initialize(net, ctx)
        return
    if spec.name == "resnet_cifar":
        net.initialize(torch_default, ctx=ctx)
        return
    dense = mx.init.Normal(0.01) if spec.name == "vgg16" else torch_default
    net.collect_params(r".*dense\d+_weight").setattr("init", dense)
    net.initialize(mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2), ctx=ctx)


def load_seeded_weights(net: Any, spec: ClassificationConfig, seed: int) -> bool:
    """Any mode: the seed's framework-neutral initial weights where the model has them (small_cnn)."""
    return small_cnn.load_seed(net, seed) if spec.name == "small_cnn" else False


_KINDS = (("Conv2D", "conv"), ("BatchNorm", "bn"), ("Dense", "dense"))
_MX_PARAMS = {"bn": ("gamma", "beta", "running_mean", "running_var")}


def _ordered(block: Any) -> list[tuple[str, Any]]:
    """(kind, block) of the weighted layers in registration order (= execution order for CifarResNet)."""
    out = []
    for child in block._children.values():
        kind = next((k for cls, k in _KINDS if type(child).__name__ == cls), None)
        out += [(kind, child)] if kind else _ordered(child)
    return out


def _params(kind: str, layer: Any) -> dict[str, Any]:
    """Gluon's layouts are the neutral ones: OIHW kernels, (out, in) dense weights, and VGG16's first dense
    flattens the NCHW pooled map as (C, H, W), as torch does. Conv and dense biases where the layer has one."""
    if kind == "bn":
        return {p: getattr(layer, m) for p, m in zip(exchange.PARAMS["bn"], _MX_PARAMS["bn"], strict=True)}
    return {"weight": layer.weight} | ({"bias": layer.bias} if layer.bias is not None else {})


def export_layers(net: Any) -> dict[str, np.ndarray]:
    """A ResNet's (CIFAR or ResNet-50) or VGG16's weights under exchange.py's neutral names."""
    return {
        exchange.name(i, kind, p): param.data().asnumpy().astype(np.float32)
        for i, (kind, layer) in enumerate(_ordered(net))
        for p, param in _params(kind, layer).items()
    }


def load_layers(net: Any, weights: dict[str, np.ndarray]) -> None:
    layers = list(enumerate(_ordered(net)))
    expected = {exchange.name(i, k, p): q.shape for i, (k, lay) in layers for p, q in _params(k, lay).items()}
    exchange.check(expected, weights)  # from the shapes: no copy of the data, nor its first initialisation
    for i, (kind, layer) in layers:
        for p, param in _params(kind, layer).items():
            param.set_data(mx.nd.array(weights[exchange.name(i, kind, p)], dtype=param.dtype))


_EXCHANGEABLE = (CifarResNet, ResNet50V15, VGG16)


class ClassificationMXNet(MXNetFamily):
    """ResNet-50 v1.5, VGG16, the CIFAR ResNet and the small CNN, in MXNet."""

    build_model = staticmethod(build_model)
    initialize = staticmethod(initialize)
    load_seeded_weights = staticmethod(load_seeded_weights)

    def export_weights(self, net: Any) -> dict[str, np.ndarray]:
        """Neutral names: the small CNN's own, and exchange.py's for the ResNets and VGG16."""
        if isinstance(net, small_cnn.SmallCnn):
            return small_cnn.export_weights(net)
        if isinstance(net, _EXCHANGEABLE):
            return export_layers(net)
        return super().export_weights(net)

    def load_weights(self, net: Any, weights: dict[str, np.ndarray]) -> None:
        if isinstance(net, small_cnn.SmallCnn):
            return small_cnn.load_weights(net, weights)
        if isinstance(net, _EXCHANGEABLE):
            return load_layers(net, weights)
        return super().load_weights(net, weights)
