"""Classification's data formats held in memory (data/registry.py): small image sets read whole with numpy,
the data of mode=converge. Its streamed image formats (folder, tfrecord, recordio) are generic
(data/generic_formats.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlbench.data.registry import DataFormat


def check_small_images(job: Any) -> dict[str, Any]:
    from dlbench.workloads.classification.small_images import check_image_set

    ds = job.dataset
    return check_image_set(ds.name, ds.path, job.model, ds.num_samples, ds.eval_samples)


def open_small_images(bench: Any, to_device: Callable[[Any], Any]) -> Any:
    from dlbench.workloads.classification.memory_source import MemorySource

    return MemorySource(bench.job, bench.spec, to_device)


FORMATS = tuple(
    DataFormat(
        name, check_small_images, open_small_images, in_memory=True, tasks=("classification",), about=about
    )
    for name, about in (("idx", "Fashion-MNIST's IDX files"), ("sklearn", "scikit-learn's digits"))
)
