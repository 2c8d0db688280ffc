"""The generic data formats (data/registry.py): synthetic data, and the image formats a DALI pipeline reads for
classification (a folder of class folders, TFRecord, MXNet RecordIO: data/validate.py checks their layout).
Workload formats (ratings, parallel text, COCO) are registered by their workload packages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlbench.data.registry import SYNTHETIC, DataFormat, register_format


def _no_check(job: Any) -> dict[str, Any]:
    """Synthetic data has nothing on disk to check."""
    return {}


def open_synthetic(bench: Any, to_device: Callable[[Any], Any]) -> Any:
    """The spec's numpy batches, put on the device once, before timing, and cycled."""
    from dlbench.data.synthetic import PoolSource, concat_batches, synthetic_pool

    job = bench.job
    if bench.local_devices > 1:  # one process feeds them all (JAX): device d its own batch, seed d
        seeds = list(range(bench.local_devices))
    else:  # a rank's own batch (backends/torch/ranks.py)
        seeds = [job.data.shard_id if job.devices > 1 else 0]
    pools = [synthetic_pool(bench.spec, job.batch_size, job.mode == "train", seed=s) for s in seeds]
    return PoolSource(
        [to_device(concat_batches(list(per_device))) for per_device in zip(*pools, strict=True)]
    )


def open_dali(bench: Any, to_device: Callable[[Any], Any]) -> Any:
    """The family's DALI adapter (imported only now: DALI is optional), its failures explained in one line
    (an undecodable image named)."""
    from dlbench.core.bench import ExplainedSource

    return ExplainedSource(bench.family.dali_source(bench))


def check_images(job: Any) -> dict[str, Any]:
    from dlbench.data.validate import check_image_layout

    return check_image_layout(job)


def image_pipeline(job: Any, device_id: int | None, layout: str, dtype: str) -> Any:
    from dlbench.data.pipelines import ImagePipeline

    return ImagePipeline(job, device_id, layout, dtype)


register_format(
    DataFormat(SYNTHETIC, _no_check, open_synthetic, in_memory=False, about="the spec's own batches")
)
for _name, _about in (
    ("folder", "ROOT/<class>/<image> (or train/ and val/ splits of that)"),
    ("tfrecord", "TFRecord files of tf.train.Example with DALI indexes"),
    ("recordio", "MXNet RecordIO (.rec + .idx)"),
):
    register_format(
        DataFormat(
            _name,
            check_images,
            open_dali,
            in_memory=False,
            pipeline=image_pipeline,
            tasks=("classification",),
            about=_about,
        )
    )
