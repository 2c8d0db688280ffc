"""PyTorch definitions of the benchmark networks.

ResNet-50 (v1.5: stride on the 3x3 conv) and VGG16 come from torchvision, which defines the
reference architecture the other backends match. The CIFAR ResNet of He et al. (2016, sec. 4.2) is
defined here: 3 stages of 16/32/64 channels, n basic blocks each (depth 6n+2), identity shortcuts
with zero-padded channels where the shape changes (the paper's option A).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from dlbench.backends.torch.family import TorchFamily
from dlbench.workloads.classification import exchange
from dlbench.workloads.classification import torch_small_cnn as small_cnn
from dlbench.workloads.classification.spec import ClassificationConfig


class _PadShortcut(nn.Module):
    """Option A shortcut: subsample by 2 and zero-pad the new channels (no parameters)."""

    def __init__(self, extra_channels: int) -> None:
        super().__init__()
        self.extra = extra_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, 0, self.extra))


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = _PadShortcut(cout - cin) if (stride != 1 or cin != cout) else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    def __init__(self, depth: int = 56, num_classes: int = 10, channels: int = 3) -> None:
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"model.depth={depth}: a CIFAR ResNet has depth 6n+2 (20, 32, 44, 56, 110)")
        n = (depth - 2) // 6
        self.conv = nn.Conv2d(channels, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        blocks: list[nn.Module] = []
        cin = 16
        for stage, width in enumerate((16, 32, 64)):
            for i in range(n):
                blocks.append(_BasicBlock(cin, width, 2 if (stage > 0 and i == 0) else 1))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.conv(x)))
        x = self.blocks(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def build_model(spec: ClassificationConfig) -> nn.Module:
    if spec.name == "resnet50":
        return torchvision.models.resnet50(weights=None, num_classes=spec.num_classes)
    if spec.name == "vgg16":
        return torchvision.models.vgg16(weights=None, num_classes=spec.num_classes)
    if spec.name == "resnet_cifar":
        return CifarResNet(spec.depth or 56, spec.num_classes, spec.channels)
    if spec.name == "small_cnn":
        return small_cnn.build_small_cnn(
            image_size=spec.image_size, channels=spec.channels, num_classes=spec.num_classes
        )
    raise ValueError(f"model={spec.name}: the torch backend has no such model")


def load_seeded_weights(model: nn.Module, spec: ClassificationConfig, seed: int) -> bool:
    """Any mode: the seed's framework-neutral initial weights where the model has them (small_cnn)."""
    return small_cnn.load_seed(model, seed) if spec.name == "small_cnn" else False


_KINDS = ((nn.Conv2d, "conv"), (nn.BatchNorm2d, "bn"), (nn.Linear, "dense"))


def _ordered(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(kind, layer) of the weighted layers in definition order (= execution order for CifarResNet)."""
    return [(kind, m) for m in model.modules() for cls, kind in _KINDS if isinstance(m, cls)]


def _tensors(kind: str, m: nn.Module) -> dict[str, torch.Tensor]:
    if kind == "bn":
        return {"gamma": m.weight, "beta": m.bias, "mean": m.running_mean, "var": m.running_var}
    return {"weight": m.weight, **({"bias": m.bias} if m.bias is not None else {})}


def _exchangeable(model: nn.Module) -> bool:
    """The ResNets and VGG16, whose weighted layers every framework defines in one order (exchange.py)."""
    return isinstance(model, (CifarResNet, torchvision.models.ResNet, torchvision.models.VGG))


def export_layers(model: nn.Module) -> dict[str, np.ndarray]:
    """A ResNet's (CIFAR or ResNet-50) or VGG16's weights under exchange.py's neutral names: torch's
    layouts are the neutral ones (VGG16's first dense reads the pooled map flattened as (C, H, W))."""
    return {
        exchange.name(i, kind, p): t.detach().float().cpu().numpy().copy()
        for i, (kind, m) in enumerate(_ordered(model))
        for p, t in _tensors(kind, m).items()
    }


def load_layers(model: nn.Module, weights: dict[str, np.ndarray]) -> None:
    exchange.check({k: v.shape for k, v in export_layers(model).items()}, weights)
    with torch.no_grad():
        for i, (kind, m) in enumerate(_ordered(model)):
            for p, t in _tensors(kind, m).items():
                t.copy_(torch.from_numpy(np.ascontiguousarray(weights[exchange.name(i, kind, p)])))


class ClassificationTorch(TorchFamily):
    """ResNet-50 v1.5, VGG16, the CIFAR ResNet and the small CNN, in PyTorch."""

    build_model = staticmethod(build_model)
    load_seeded_weights = staticmethod(load_seeded_weights)

    def export_weights(self, model: nn.Module) -> dict[str, np.ndarray]:
        """Neutral names: the small CNN's own, and exchange.py's for the ResNets and VGG16."""
        if isinstance(model, small_cnn.SmallCnn):
            return small_cnn.export_weights(model)
        if _exchangeable(model):
            return export_layers(model)
        return super().export_weights(model)

    def load_weights(self, model: nn.Module, weights: dict[str, np.ndarray]) -> None:
        if isinstance(model, small_cnn.SmallCnn):
            return small_cnn.load_weights(model, weights)
        if _exchangeable(model):
            return load_layers(model, weights)
        return super().load_weights(model, weights)
