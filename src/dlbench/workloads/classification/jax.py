"""Flax (linen, NHWC) definitions of the benchmark networks, equal to the torch ones.

ResNet-50 v1.5 (stride on the 3x3 conv), VGG16 (configuration D, adaptive 7x7 pooling before the
classifier) as torchvision defines them, the CIFAR ResNet of He et al. (option A shortcuts) and the small
CNN. Every padded layer pads explicitly and symmetrically like PyTorch. Convolutions and dense layers
compute in the network's `dtype` and keep their weights in `param_dtype`; batch normalization computes its
statistics in float32 (Flax's default) and the logits are cast to float32 for the loss. The first conv is
named "stem_conv" and the classifier "logits", as in the TF backend, so precision reports read alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dlbench.backends.jax.family import JaxFamily, Network
from dlbench.workloads.classification import exchange
from dlbench.workloads.classification import jax_small_cnn as small_cnn
from dlbench.workloads.classification.spec import ClassificationConfig

BN_EPS = 1e-5  # torch BatchNorm2d default
BN_MOMENTUM = 0.9  # flax momentum = 1 - torch momentum (0.1)
# torch's initializers, so first losses are comparable across frameworks (speed is unaffected):
# torchvision's kaiming_normal_(fan_out, relu) for convs, torch's default layer init elsewhere
# (U(+-1/sqrt(fan_in))), VGG's normal(0, 0.01) classifier.
HE_FAN_OUT = nn.initializers.variance_scaling(2.0, "fan_out", "normal")
TORCH_DEFAULT = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")
VGG_DENSE = nn.initializers.normal(0.01)


class _Layers(nn.Module):
    """The dtypes every layer of a network shares."""

    num_classes: int = 1000
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32

    def conv(self, features: int, kernel: int, stride: int = 1, init=HE_FAN_OUT, bias=False, name=None):
        pad = kernel // 2
        return nn.Conv(
            features, (kernel, kernel), (stride, stride), padding=((pad, pad), (pad, pad)), use_bias=bias,
            kernel_init=init, dtype=self.dtype, param_dtype=self.param_dtype, name=name,
        )  # fmt: skip

    def bn(self, train: bool, name=None):
        return nn.BatchNorm(
            use_running_average=not train, momentum=BN_MOMENTUM, epsilon=BN_EPS, dtype=self.dtype,
            param_dtype=self.param_dtype, name=name,
        )  # fmt: skip

    def dense(self, features: int, init=TORCH_DEFAULT, name=None):
        return nn.Dense(features, kernel_init=init, dtype=self.dtype, param_dtype=self.param_dtype, name=name)

    def head(self, x, init=TORCH_DEFAULT):
        return self.dense(self.num_classes, init, name="logits")(x).astype(jnp.float32)


# --- ResNet-50 v1.5 (torchvision.models.resnet50) --------------------------------------------------


class _Bottleneck(_Layers):
    width: int = 64
    stride: int = 1

    @nn.compact
    def __call__(self, x, train: bool):
        out_ch = self.width * 4
        shortcut = x
        if self.stride != 1 or x.shape[-1] != out_ch:
            shortcut = self.conv(out_ch, 1, self.stride, name="down_conv")(x)
            shortcut = self.bn(train, "down_bn")(shortcut)
        y = nn.relu(self.bn(train, "bn1")(self.conv(self.width, 1, name="conv1")(x)))
        y = nn.relu(self.bn(train, "bn2")(self.conv(self.width, 3, self.stride, name="conv2")(y)))  # v1.5
        y = self.bn(train, "bn3")(self.conv(out_ch, 1, name="conv3")(y))
        return nn.relu(y + shortcut)


class ResNet50(_Layers):
    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.relu(self.bn(train, "stem_bn")(self.conv(64, 7, 2, name="stem_conv")(x)))
        x = nn.max_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)))
        dtypes = {"dtype": self.dtype, "param_dtype": self.param_dtype}
        for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
            for i in range(blocks):
                stride = 2 if (stage > 0 and i == 0) else 1
                x = _Bottleneck(width=width, stride=stride, name=f"layer{stage + 1}_{i}", **dtypes)(x, train)
        return self.head(x.mean(axis=(1, 2)))


# --- VGG16 (torchvision.models.vgg16, configuration D, no batch norm) ------------------------------

_VGG16_CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def _pool_matrix(size: int, n: int) -> np.ndarray:
    """torch's adaptive-pool bins (start = floor(i·size/n), end = ceil((i+1)·size/n)) as an averaging matrix."""
    m = np.zeros((n, size), dtype=np.float32)
    for i in range(n):
        start, end = (i * size) // n, -((-(i + 1) * size) // n)
        m[i, start:end] = 1.0 / (end - start)
    return m


def adaptive_avg_pool(x, n: int):
    """torch.nn.AdaptiveAvgPool2d(n) on a static NHWC input (no parameters); the identity at n x n."""
    if x.shape[1] == n and x.shape[2] == n:
        return x
    ph, pw = (jnp.asarray(_pool_matrix(s, n), dtype=x.dtype) for s in x.shape[1:3])
    return jnp.einsum("ih,jw,nhwc->nijc", ph, pw, x)


class VGG16(_Layers):
    @nn.compact
    def __call__(self, x, train: bool = False):
        first = True
        for v in _VGG16_CFG:
            if v == "M":
                x = nn.max_pool(x, (2, 2), (2, 2))
                continue
            x = nn.relu(self.conv(v, 3, bias=True, name="stem_conv" if first else None)(x))
            first = False
        x = adaptive_avg_pool(x, 7)
        # torch flattens (C, H, W): the same order, so the classifier's weights mean the same
        x = jnp.transpose(x, (0, 3, 1, 2)).reshape(x.shape[0], -1)
        for _ in range(2):
            x = nn.relu(self.dense(4096, VGG_DENSE)(x))
            x = nn.Dropout(0.5, deterministic=not train)(x)
        return self.head(x, VGG_DENSE)


# --- CIFAR ResNet (He et al. 2016, sec. 4.2; option A shortcuts) -----------------------------------


class _BasicBlock(_Layers):
    features: int = 16
    stride: int = 1

    @nn.compact
    def __call__(self, x, train: bool):
        cin, cout = x.shape[-1], self.features
        y = nn.relu(self.bn(train, "bn1")(self.conv(cout, 3, self.stride, TORCH_DEFAULT, name="conv1")(x)))
        y = self.bn(train, "bn2")(self.conv(cout, 3, init=TORCH_DEFAULT, name="conv2")(y))
        shortcut = x
        if self.stride != 1 or cin != cout:  # subsample by 2, zero-pad the new channels at the end
            shortcut = jnp.pad(x[:, ::2, ::2, :], ((0, 0), (0, 0), (0, 0), (0, cout - cin)))
        return nn.relu(y + shortcut)


class CifarResNet(_Layers):
    depth: int = 56

    @nn.compact
    def __call__(self, x, train: bool = False):
        n = (self.depth - 2) // 6
        x = nn.relu(self.bn(train, "stem_bn")(self.conv(16, 3, init=TORCH_DEFAULT, name="stem_conv")(x)))
        dtypes = {"dtype": self.dtype, "param_dtype": self.param_dtype}
        for stage, width in enumerate((16, 32, 64)):
            for i in range(n):
                stride = 2 if (stage > 0 and i == 0) else 1
                x = _BasicBlock(features=width, stride=stride, name=f"stage{stage + 1}_{i}", **dtypes)(
                    x, train
                )
        return self.head(x.mean(axis=(1, 2)))


def _cifar(cfg: ClassificationConfig, **dtypes) -> nn.Module:
    depth = cfg.depth or 56
    if (depth - 2) % 6:
        raise ValueError(f"model.depth={depth}: a CIFAR ResNet has depth 6n+2 (20, 32, 44, 56, 110)")
    return CifarResNet(num_classes=cfg.num_classes, depth=depth, **dtypes)


def _small(cfg: ClassificationConfig, **dtypes) -> nn.Module:
    sizes = small_cnn.SmallCnnSizes(cfg.image_size, cfg.channels, cfg.num_classes)
    return small_cnn.SmallCnn(sizes=sizes, **dtypes)


MODELS: dict[str, Callable[..., nn.Module]] = {
    "resnet50": lambda cfg, **d: ResNet50(num_classes=cfg.num_classes, **d),
    "vgg16": lambda cfg, **d: VGG16(num_classes=cfg.num_classes, **d),
    "resnet_cifar": _cifar,
    "small_cnn": _small,
}


# --- the ResNets' and VGG16's framework-neutral weights (exchange.py: layers by order and kind) -------

# A block's weighted layers in torch's definition order (its projection shortcut last, as torchvision's
# `downsample`); Flax creates the shortcut first, so the order is spelled out, not read from the tree.
_BLOCK_LAYERS = ("conv1", "bn1", "conv2", "bn2", "conv3", "bn3", "down_conv", "down_bn")


def _block_order(name: str) -> tuple[int, int]:
    """ "layer2_3" (ResNet-50) or "stage2_3" (CIFAR ResNet) -> (2, 3)."""
    stage, index = name.removeprefix("layer").removeprefix("stage").split("_")
    return int(stage), int(index)


def resnet_layers(params: dict) -> list[tuple[str, tuple[str, ...]]]:
    """(kind, module path) of a Flax ResNet's weighted layers in exchange.py's order."""
    out = [("conv", ("stem_conv",)), ("bn", ("stem_bn",))]
    for block in sorted((k for k in params if k.startswith(("layer", "stage"))), key=_block_order):
        out += [("bn" if "bn" in n else "conv", (block, n)) for n in _BLOCK_LAYERS if n in params[block]]
    return [*out, ("dense", ("logits",))]


def vgg_layers(params: dict) -> list[tuple[str, tuple[str, ...]]]:
    """(kind, module path) of the Flax VGG16's weighted layers in exchange.py's order: stem_conv, Conv_0..11,
    Dense_0, Dense_1, logits. Its first dense reads the pooled map transposed to (C, H, W) (VGG16.__call__),
    torch's order, so its kernel is the neutral weight transposed, as every dense's is."""

    def numbered(prefix: str) -> list[str]:
        return sorted((k for k in params if k.startswith(prefix)), key=lambda k: int(k.split("_")[1]))

    convs, denses = (("conv", (k,)) for k in numbered("Conv_")), (("dense", (k,)) for k in numbered("Dense_"))
    return [("conv", ("stem_conv",)), *convs, *denses, ("dense", ("logits",))]


def _layers(net: Network) -> list[tuple[str, tuple[str, ...]]]:
    order = vgg_layers if isinstance(net.module, VGG16) else resnet_layers
    return order(net.variables["params"])


def _at(tree: dict, path: tuple[str, ...]) -> dict:
    for key in path:
        tree = tree[key]
    return tree


# neutral parameter -> (Flax collection, leaf, to Flax's layout, back to the neutral one)
_FLAX = {
    "conv": {
        "weight": ("params", "kernel", lambda w: w.transpose(2, 3, 1, 0), lambda k: k.transpose(3, 2, 0, 1)),
        "bias": ("params", "bias", None, None),  # VGG16's convs; the ResNets' have none
    },
    "bn": {
        "gamma": ("params", "scale", None, None), "beta": ("params", "bias", None, None),
        "mean": ("batch_stats", "mean", None, None), "var": ("batch_stats", "var", None, None),
    },
    "dense": {"weight": ("params", "kernel", np.transpose, np.transpose), "bias": ("params", "bias", None, None)},
}  # fmt: skip


def _present(variables: dict, kind: str, path: tuple[str, ...]) -> dict[str, tuple]:
    """The neutral parameters of one layer that it has (a conv's bias only where use_bias)."""
    return {p: spec for p, spec in _FLAX[kind].items() if spec[1] in _at(variables[spec[0]], path)}


def export_layers(net: Network) -> dict[str, np.ndarray]:
    """A Flax ResNet's or VGG16's weights under exchange.py's neutral names: conv (O, I, H, W), dense (out, in)."""
    variables = jax.device_get(net.variables)
    out = {}
    for i, (kind, path) in enumerate(_layers(net)):
        for param, (collection, leaf, _, back) in _present(variables, kind, path).items():
            value = np.asarray(_at(variables[collection], path)[leaf], np.float32)
            out[exchange.name(i, kind, param)] = np.ascontiguousarray(back(value) if back else value)
    return out


def load_layers(net: Network, weights: dict[str, np.ndarray]) -> None:
    """Set neutral weights (exchange.py) as a Flax ResNet's or VGG16's parameters (and BatchNorm statistics)."""
    variables = jax.tree.map(lambda x: x, dict(net.variables))  # fresh dicts, the same leaves
    expected = {}
    for i, (kind, path) in enumerate(_layers(net)):
        for param, (collection, leaf, _, back) in _present(variables, kind, path).items():
            shape = _at(variables[collection], path)[leaf].shape
            expected[exchange.name(i, kind, param)] = exchange.neutral_shape(back, shape)
    exchange.check(expected, weights)
    for i, (kind, path) in enumerate(_layers(net)):
        for param, (collection, leaf, to_flax, _) in _present(variables, kind, path).items():
            layer = _at(variables[collection], path)
            value = weights[exchange.name(i, kind, param)]
            layer[leaf] = jnp.asarray(to_flax(value) if to_flax else value, layer[leaf].dtype)
    net.variables = variables


_EXCHANGEABLE = (ResNet50, CifarResNet, VGG16)


class ClassificationJax(JaxFamily):
    """ResNet-50 v1.5, VGG16, the CIFAR ResNet and the small CNN, in Flax."""

    def build_model(self, cfg: ClassificationConfig, dtype: Any, param_dtype: Any) -> nn.Module:
        if cfg.name not in MODELS:
            raise ValueError(f"model={cfg.name}: the jax backend has no such model (has {sorted(MODELS)})")
        return MODELS[cfg.name](cfg, dtype=dtype, param_dtype=param_dtype)

    def load_seeded_weights(self, net: Network, cfg: ClassificationConfig, seed: int) -> bool:
        """Any mode: the seed's framework-neutral initial weights where the model has them (small_cnn)."""
        if cfg.name != "small_cnn":
            return False
        small_cnn.load_seed(net, seed)
        return True

    def export_weights(self, net: Network) -> dict[str, np.ndarray]:
        """Neutral names: the small CNN's own, and exchange.py's for the ResNets and VGG16."""
        if isinstance(net.module, small_cnn.SmallCnn):
            return small_cnn.export_weights(net)
        if isinstance(net.module, _EXCHANGEABLE):
            return export_layers(net)
        return super().export_weights(net)

    def load_weights(self, net: Network, weights: dict[str, np.ndarray]) -> None:
        if isinstance(net.module, small_cnn.SmallCnn):
            return small_cnn.load_weights(net, weights)
        if isinstance(net.module, _EXCHANGEABLE):
            return load_layers(net, weights)
        return super().load_weights(net, weights)
