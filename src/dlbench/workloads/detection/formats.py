"""Detection's data formats (data/registry.py): the COCO layout read by a DALI pipeline (`coco`, the default
of a detection job's real dataset) and the same layout decoded once into memory (`coco_memory`, the data of
mode=converge)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlbench.data.generic_formats import open_dali
from dlbench.data.registry import DataFormat
from dlbench.errors import ConfigError


def check_coco(job: Any) -> dict[str, Any]:
    """Detection reads the COCO layout (workloads/detection/coco.py): the mode's split, a model with an
    output per category (background included) and enough images for the shards."""
    from dlbench.data.validate import check_data_settings, resolve_path
    from dlbench.workloads.detection import coco

    check_data_settings(job)
    ds = job.dataset
    ds.path = resolve_path(job)
    split = coco.resolve_split(ds.path, "val" if job.mode == "infer" else "train", job.data.skip_bad_boxes)
    classes = len(split.data["categories"])
    if classes >= job.model.num_classes:
        raise ConfigError(
            f"dataset {split.annotations_file} has {classes} categories but model.num_classes="
            f"{job.model.num_classes} (background included): use model.num_classes={classes + 1} or more"
        )
    images = split.num_images if job.mode == "infer" else split.annotated_images
    if images < job.data.num_shards:
        raise ConfigError(
            f"dataset {split.root} has {images} images, fewer than data.num_shards={job.data.num_shards}"
        )
    return {
        "dataset.resolved_path": split.root,
        "dataset.resolved_format": "coco",
        "dataset.split": split.name,
        "dataset.found_samples": images,
        "dataset.found_classes": classes,
        "dataset.skipped_boxes": split.skipped_boxes,
    }


def coco_pipeline(job: Any, device_id: int | None, layout: str, dtype: str) -> Any:
    """mode=data: the COCO reader with DLE's SSD augmentations and box encoding (imports DALI)."""
    from dlbench.workloads.detection.coco_pipeline import CocoPipeline

    return CocoPipeline.from_job(job, device_id, layout, dtype)


def check_coco_memory(job: Any) -> dict[str, Any]:
    from dlbench.workloads.detection.coco_memory import check_memory_set

    return check_memory_set(job)


def open_coco_memory(bench: Any, to_device: Callable[[Any], Any]) -> Any:
    from dlbench.workloads.detection.coco_memory import CocoMemorySource

    return CocoMemorySource(bench.job, bench.spec, to_device)


FORMATS = (
    DataFormat(
        "coco",
        check_coco,
        open_dali,
        in_memory=False,
        pipeline=coco_pipeline,
        tasks=("detection",),
        default_for=("detection",),
        about="COCO 2017 (train2017/, val2017/, annotations/instances_*.json)",
    ),
    DataFormat(
        "coco_memory",
        check_coco_memory,
        open_coco_memory,
        in_memory=True,
        tasks=("detection",),
        about="the COCO layout decoded once into memory with PIL",
    ),
)
