"""Image classification (ResNet-50, VGG16, the CIFAR ResNet): images in, class logits out, softmax
cross-entropy, SGD with momentum 0.9 as in the ResNet/VGG papers, measured in images per second."""

from __future__ import annotations

from dataclasses import dataclass

from dlbench.core.spec import ModelConfig, OptimizerSpec, TaskSpec, TensorSpec, count_batch


@dataclass
class ClassificationConfig(ModelConfig):
    """conf/model/{resnet50,vgg16,resnet_cifar}.yaml (Hydra schema `classification_schema`)."""

    image_size: int = 224
    channels: int = 3
    num_classes: int = 1000
    depth: int | None = None  # resnet_cifar: 6n+2 layers (56 = ResNet-56)

    def check(self) -> list[tuple[bool, str]]:
        return [
            *super().check(),
            (self.image_size >= 8, f"model.image_size={self.image_size}: must be 8 or more"),
            (self.num_classes >= 2, "model.num_classes: must be 2 or more"),
            (self.channels >= 1, f"model.channels={self.channels}: must be 1 or more"),
        ]


def spec(cfg: ClassificationConfig) -> TaskSpec:
    return TaskSpec(
        task="classification",
        inputs={"image": TensorSpec((cfg.channels, cfg.image_size, cfg.image_size), layout="CHW")},
        targets={"label": TensorSpec((), "int64", 0, cfg.num_classes)},
        loss="softmax_cross_entropy",
        metric="top1",
        optimizer=OptimizerSpec("sgd", lr=0.01, momentum=0.9),
        unit="images",
        count_units=count_batch,
    )
