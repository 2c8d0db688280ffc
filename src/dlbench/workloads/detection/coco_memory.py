"""A COCO-layout detection set read whole into memory: the data of SSD300's `mode=converge`.

`dataset.format=coco_memory` (conf/dataset/coco_memory.yaml). The speed modes read COCO with DALI
(workloads/detection/coco_pipeline.py); training to quality on a CPU wants what the small image sets have instead: every
framework fed the same numbers in the same order for the same seed, and a held-out split scored with
pycocotools. So the JPEGs of train2017/ and val2017/ are decoded once with PIL, resized to
`model.image_size` square (as DLE resizes to 300x300, aspect not kept; boxes are fractions of the image,
so they do not change), and held as uint8. Batches are made with numpy:

- order and augmentation from the run's seed (data/epochs.EpochPlan over data/seeds.py streams): a
  permutation per epoch; with `data.hflip=true` each image and its boxes mirrored with probability 1/2;
- pixels normalised with ImageNet's mean and standard deviation, as DLE does, NCHW float32;
- targets encoded to the default boxes by the numpy encoder (workloads/detection/boxes.py), the same one synthetic
  data uses, and equal to DALI's box encoder to 1e-4.

Labels are 1..N in ascending category id (0 = background), DALI's and DLE's numbering. Training uses the
images that have boxes (DALI's reader skips the others too); evaluation uses every val2017 image, and the
metric receives `DetectionTruth`: the COCO ground truth of those images plus the default boxes to decode with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from dlbench.config import JobConfig
from dlbench.core.bench import Batch
from dlbench.core.spec import TaskSpec
from dlbench.data.epochs import EpochPlan, EpochSource
from dlbench.data.synthetic import HostBatch
from dlbench.errors import ConfigError
from dlbench.workloads.detection.boxes import DefaultBoxes, default_boxes_for, encode_batch
from dlbench.workloads.detection.coco import MAKE_HINT, CocoSplit, resolve_split

FORMAT = "coco_memory"
MEAN = np.array([0.485, 0.456, 0.406], np.float32) * 255  # ImageNet statistics, as DLE normalises
STD = np.array([0.229, 0.224, 0.225], np.float32) * 255


@dataclass(frozen=True)
class DetectionTruth:
    """What the detection metric compares with: the held-out images' COCO ground truth, their ids in
    the order the model saw them, and the default boxes the model's offsets are relative to."""

    gt: dict = field(repr=False)
    image_ids: np.ndarray
    dboxes: DefaultBoxes = field(repr=False)


@dataclass(frozen=True)
class DetectionImages:
    """One split in memory: uint8 N x S x S x 3 images, per image ltrb boxes (fractions) and labels 1..N."""

    images: np.ndarray
    boxes: list[np.ndarray]
    labels: list[np.ndarray]
    image_ids: np.ndarray
    gt: dict = field(repr=False)  # the COCO instances dict restricted to these images


def _read_image(path: str, size: int) -> np.ndarray:
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB").resize((size, size), Image.BILINEAR), np.uint8)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"image {path} cannot be decoded ({exc}); replace it or remove it from the annotations"
        ) from None


def load_images(split: CocoSplit, size: int, limit: int | None, annotated_only: bool) -> DetectionImages:
    """The split's first `limit` images (annotation-file order), resized to size x size, with their boxes."""
    label_of = {cid: i + 1 for i, cid in enumerate(split.category_ids())}
    by_image: dict[int, list[dict]] = {}
    for a in split.data["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    infos = [im for im in split.data["images"] if not annotated_only or by_image.get(im["id"])]
    infos = infos[:limit] if limit is not None else infos
    images, boxes, labels = [], [], []
    for im in infos:
        images.append(_read_image(f"{split.images_dir}/{im['file_name']}", size))
        anns = [a for a in by_image.get(im["id"], []) if not a.get("iscrowd", 0)]
        scale = np.array([im["width"], im["height"]] * 2, np.float32)
        xywh = np.array([a["bbox"] for a in anns], np.float32).reshape(-1, 4)
        ltrb = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1) / scale
        boxes.append(np.clip(ltrb, 0.0, 1.0))
        labels.append(np.array([label_of[a["category_id"]] for a in anns], np.int32))
    ids = {im["id"] for im in infos}
    gt = {
        **split.data,
        "images": infos,
        "annotations": [a for a in split.data["annotations"] if a["image_id"] in ids],
    }
    return DetectionImages(np.stack(images), boxes, labels, np.array([im["id"] for im in infos]), gt)


def normalize(images: np.ndarray) -> np.ndarray:
    """uint8 N x H x W x 3 -> float32 N x 3 x H x W, ImageNet mean and std."""
    return np.ascontiguousarray(((images.astype(np.float32) - MEAN) / STD).transpose(0, 3, 1, 2))


def hflip(images: np.ndarray, boxes: list[np.ndarray], flip: np.ndarray) -> tuple[np.ndarray, list]:
    """Mirror the images where `flip` is set, and their boxes with them (ltrb fractions)."""
    images = np.where(flip[:, None, None, None], images[:, :, ::-1], images)
    boxes = [
        np.stack([1 - b[:, 2], b[:, 1], 1 - b[:, 0], b[:, 3]], 1) if f else b
        for b, f in zip(boxes, flip, strict=True)
    ]
    return images, boxes


class CocoMemorySource(EpochSource):
    """The bench's source for dataset.format=coco_memory (the interface of data/epochs.EpochSource)."""

    def __init__(self, job: JobConfig, spec: TaskSpec, to_device: Callable[[HostBatch], Batch]) -> None:
        ds, size = job.dataset, job.model.image_size
        root = ds.path
        skip = job.data.skip_bad_boxes
        self.train = load_images(
            resolve_split(root, "train", skip), size, ds.num_samples, annotated_only=True
        )
        self.test = load_images(resolve_split(root, "val", skip), size, ds.eval_samples, annotated_only=False)
        self.dboxes = default_boxes_for(size)
        self.plan = EpochPlan(job.schedule.seed, job.batch_size, hflip=job.data.hflip)
        self.steps_per_epoch = self.plan.steps(len(self.train.images))
        self.to_device = to_device
        self.names = (next(iter(spec.inputs)), *spec.targets)  # image, loc, labels
        self.start()

    def _host(self, images: np.ndarray, boxes: list, labels: list) -> HostBatch:
        loc, cls = encode_batch(boxes, labels, self.dboxes)
        image, loc_name, labels_name = self.names
        return HostBatch({image: normalize(images)}, {loc_name: loc, labels_name: cls}, len(images))

    def epoch_batches(self, epoch: int) -> Iterator[HostBatch]:
        t, bs = self.train, self.plan.batch_size
        n = len(t.images)
        order, flips = self.plan.order(epoch, n), self.plan.flips(epoch, n)
        for step in range(self.steps_per_epoch):
            pick = slice(step * bs, (step + 1) * bs)
            idx = order[pick]
            images, boxes = hflip(t.images[idx], [t.boxes[i] for i in idx], flips[pick])
            yield self._host(images, boxes, [t.labels[i] for i in idx])

    def eval_batches(self, batch_size: int) -> Iterator[HostBatch]:
        """The held-out split, every image once, in annotation-file order (host batches: the bench predicts)."""
        t = self.test
        for start in range(0, len(t.images), batch_size):
            pick = slice(start, start + batch_size)
            yield self._host(t.images[pick], t.boxes[pick], t.labels[pick])

    @staticmethod
    def join_outputs(outputs: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        """The predictions of every eval batch as one array per output ((loc, conf), or the padded
        boxes, scores, labels of a framework's postprocess): what the metric takes."""
        return tuple(np.concatenate(parts) for parts in zip(*outputs, strict=True))

    @property
    def eval_labels(self) -> DetectionTruth:
        return DetectionTruth(self.test.gt, self.test.image_ids, self.dboxes)

    def facts(self) -> dict[str, Any]:
        """What decided the data this run saw (MLflow tags run.*)."""
        p = self.plan
        return {
            "seed": p.seed,
            "data_order": f"numpy permutation per epoch from seed {p.seed} (data/seeds.py stream 'order')",
            "augmentation": f"hflip p=0.5 (boxes mirrored), seed {p.seed} stream 'augment'"
            if p.hflip
            else "none",
            "train_samples": len(self.train.images),
            "eval_samples": len(self.test.images),
            "normalize": "ImageNet mean/std per channel (DLE); resized square, aspect not kept",
            "default_boxes": self.dboxes.count,
        }


def check_memory_set(job: JobConfig) -> dict[str, Any]:
    """Before a worker starts: both splits are there (data/coco.resolve_split: layout, JSON, image files),
    the model has an output per category and the training split fills a batch. Returns facts to log."""
    from dlbench.data.validate import resolve_path

    ds = job.dataset
    try:
        ds.path = resolve_path(job)  # written back: the worker reads exactly the folder checked here
    except ConfigError as exc:
        raise ConfigError(f"{exc} (or {MAKE_HINT})") from None
    skip = job.data.skip_bad_boxes
    train, val = resolve_split(ds.path, "train", skip), resolve_split(ds.path, "val", skip)
    classes = len(train.data["categories"])
    if classes >= job.model.num_classes:
        raise ConfigError(
            f"dataset {train.annotations_file} has {classes} categories but model.num_classes="
            f"{job.model.num_classes} (background included): use model.num_classes={classes + 1}"
        )
    images = min(train.annotated_images, ds.num_samples or train.annotated_images)
    if images < job.batch_size:
        raise ConfigError(
            f"dataset {train.root} has {images} training images with boxes, fewer than the batch "
            f"({job.batch_size}): use a smaller schedule.batch_size or more images (dataset.num_samples)"
        )
    return {
        "dataset.resolved_path": train.root,
        "dataset.resolved_format": FORMAT,
        "dataset.found_samples": images,
        "dataset.eval_samples": min(val.num_images, ds.eval_samples or val.num_images),
        "dataset.found_classes": classes,
        "dataset.skipped_boxes": train.skipped_boxes + val.skipped_boxes,
    }
