"""Synthetic detection data: random images with 1..N random boxes and labels, encoded like real data.

Why: `dataset=synthetic` must exercise the same training step as COCO, so the targets go through the
same numpy encoder that DALI's `fn.box_encoder` matches (dlbench.workloads.detection.boxes). Boxes are drawn
with sides of 5%..60% of the image so that both small and large default boxes get matched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlbench.workloads.detection.boxes import NUM_CLASSES, DefaultBoxes, encode_batch


@dataclass
class DetectionBatch:
    """images (B, 3, S, S) float32; loc (B, 4, anchors) float32 offsets; labels (B, anchors) int32;
    plus the raw ground truth per image (ltrb boxes, labels) for metrics."""

    images: np.ndarray
    loc: np.ndarray
    labels: np.ndarray
    gt_boxes: list[np.ndarray]
    gt_labels: list[np.ndarray]


def random_ground_truth(
    rng: np.random.Generator, n_images: int, max_boxes: int = 8, num_classes: int = NUM_CLASSES
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per image 1..max_boxes boxes (ltrb, inside the unit square) and labels in 1..num_classes-1."""
    boxes, labels = [], []
    for _ in range(n_images):
        n = int(rng.integers(1, max_boxes + 1))
        wh = rng.uniform(0.05, 0.6, size=(n, 2))
        lt = rng.uniform(0.0, 1.0, size=(n, 2)) * (1.0 - wh)
        boxes.append(np.concatenate([lt, lt + wh], axis=1).astype(np.float32))
        labels.append(rng.integers(1, num_classes, size=n).astype(np.int32))
    return boxes, labels


def synthetic_batch(
    rng: np.random.Generator,
    batch_size: int,
    dboxes: DefaultBoxes,
    max_boxes: int = 8,
    num_classes: int = NUM_CLASSES,
    channels: int = 3,
) -> DetectionBatch:
    """A batch of normal-noise images (NCHW) with random ground truth encoded to the default boxes."""
    size = dboxes.fig_size
    boxes, labels = random_ground_truth(rng, batch_size, max_boxes, num_classes)
    loc, cls = encode_batch(boxes, labels, dboxes)
    images = rng.standard_normal((batch_size, channels, size, size), dtype=np.float32)
    return DetectionBatch(images, loc, cls, boxes, labels)
