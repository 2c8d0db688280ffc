"""Object detection (SSD300 v1.1, NVIDIA DeepLearningExamples): images in, per-default-box offsets and
class scores out, DLE's multibox loss on targets already encoded to the default boxes, SGD with momentum
as DLE trains it (lr 2.6e-3 at batch 32, momentum 0.9, weight decay 5e-4), measured in images per second.

Targets are encoded on the input side, once per batch: DALI's `fn.box_encoder` on COCO, the same numpy
encoder for synthetic data (1..max_boxes random boxes and labels per image), so the three frameworks
train on identical targets. At 300x300 there are 8,732 default boxes; smaller inputs (CPU smoke runs)
keep every layer and get the default boxes of the maps the network then makes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlbench.core.spec import ModelConfig, OptimizerSpec, TaskSpec, TensorSpec, count_batch
from dlbench.workloads.detection.boxes import ASPECT_RATIOS, NUM_CLASSES, default_boxes_for, encode_batch
from dlbench.workloads.detection.synthetic import random_ground_truth

MIN_IMAGE_SIZE = 32

# The SSD300 network every framework builds (DLE's SSD v1.1), written once here:
BOXES_PER_CELL = tuple(2 + 2 * len(r) for r in ASPECT_RATIOS)  # (4, 6, 6, 6, 4, 4) on 38, 19, 10, 5, 3, 1
FEATURE_CHANNELS = (1024, 512, 512, 256, 256, 256)  # channels of the six maps the heads see
EXTRA_MID_CHANNELS = (256, 256, 128, 128, 128)  # the 1x1 bottleneck of each extra block
RESNET_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 1))  # ResNet-50 backbone: width, blocks, first stride
NEG_POS_RATIO = 3  # hard negatives kept per positive box in the multibox loss


@dataclass
class DetectionConfig(ModelConfig):
    """conf/model/ssd300.yaml (Hydra schema `detection_schema`)."""

    name: str = "ssd300"
    task: str = "detection"
    image_size: int = 300
    num_classes: int = NUM_CLASSES  # 80 COCO categories + background
    max_boxes: int = 8  # synthetic data: 1..max_boxes objects per image
    postprocess: bool = False  # mode=infer: add box decoding + per-class NMS to the timed step
    batch_size: int = 32

    def check(self) -> list[tuple[bool, str]]:
        return [
            *super().check(),
            (
                self.image_size >= MIN_IMAGE_SIZE,
                f"model.image_size={self.image_size}: SSD300 needs {MIN_IMAGE_SIZE} or more (300 is the real network)",
            ),
            (
                self.num_classes >= 2,
                f"model.num_classes={self.num_classes}: must be 2 or more (0 is background)",
            ),
            (self.max_boxes >= 1, f"model.max_boxes={self.max_boxes}: must be 1 or more"),
        ]


def spec(cfg: DetectionConfig) -> TaskSpec:
    dboxes = default_boxes_for(cfg.image_size)
    anchors = dboxes.count

    def synthetic_targets(rng: np.random.Generator, batch_size: int) -> dict[str, np.ndarray]:
        boxes, labels = random_ground_truth(rng, batch_size, cfg.max_boxes, cfg.num_classes)
        loc, cls = encode_batch(boxes, labels, dboxes)
        return {"loc": loc, "labels": cls}

    return TaskSpec(
        task="detection",
        inputs={"image": TensorSpec((3, cfg.image_size, cfg.image_size), layout="CHW")},
        targets={
            "loc": TensorSpec((4, anchors)),
            "labels": TensorSpec((anchors,), "int32", 0, cfg.num_classes),
        },
        loss="ssd_multibox",
        metric="coco_map",
        optimizer=OptimizerSpec("sgd", lr=2.6e-3, momentum=0.9, weight_decay=5e-4),
        unit="images",
        count_units=count_batch,
        synthetic_targets=synthetic_targets,
    )
