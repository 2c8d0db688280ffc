"""DALI-fed input for the JAX bench: `next() -> Batch((x,), targets, batch size)` as jax.Arrays on the bench's
device.

DALI's JAX plugin (`nvidia.dali.plugin.jax.DALIGenericIterator`) hands each output to JAX by DLPack: with a
GPU the batch is made on the bench's GPU and never visits the host; on the CPU the outputs are JAX CPU
arrays. Flax convolutions are NHWC, so DALI emits NHWC. A float image is cast to the parameters' dtype, as the
synthetic path does (`JaxBench._array`; DALI has no bfloat16). Pipeline failures are explained by the skeleton
(backends.skeleton.ExplainedSource).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from nvidia.dali.plugin.jax import DALIGenericIterator

from dlbench.backends.jax.precision import JaxPrecision
from dlbench.config import JobConfig
from dlbench.core.bench import Batch
from dlbench.data.pipelines import ImagePipeline
from dlbench.workloads.detection.coco_pipeline import CocoPipeline


def _device_id(dev: jax.Device) -> int | None:
    """The DALI pipeline's GPU: the bench's device; None (a CPU-only pipeline) on the CPU."""
    return dev.id if dev.platform == "gpu" else None


class DaliSource:
    """Image batches from the job's dataset through DALI (dlbench.data.pipelines)."""

    names = ("x", "y")

    def __init__(self, job: JobConfig, dev: jax.Device, prec: JaxPrecision) -> None:
        self.pipeline: Any = ImagePipeline(
            job, _device_id(dev), "NHWC", prec.plan.input_dtype, label_dtype="int32"
        )
        self._open(prec)

    def _open(self, prec: JaxPrecision) -> None:
        self.skipped = self.pipeline.skipped
        emitted = np.dtype(prec.plan.input_dtype)
        self.cast = None if emitted == np.dtype(prec.param_dtype) else prec.param_dtype
        self.units = self.pipeline.batch_size
        self._it = DALIGenericIterator([self.pipeline.pipe], list(self.names))

    def _image(self, batch: dict[str, jax.Array]) -> jax.Array:
        x = batch["x"]
        return x if self.cast is None else x.astype(self.cast)

    def next(self) -> Batch:
        batch = next(self._it)
        return Batch((self._image(batch),), (batch["y"],), self.units)

    def close(self) -> None:
        self._it = None
        self.pipeline.close()


class CocoSource(DaliSource):
    """Detection batches (COCO layout) through DALI (dlbench.workloads.detection.coco_pipeline): the image as
    above; targets loc (N, 4, anchors) float32 and labels (N, anchors) int32, encoded by DALI's box encoder.
    mode=infer reads the held-out split and has no targets."""

    def __init__(self, job: JobConfig, dev: jax.Device, prec: JaxPrecision) -> None:
        self.pipeline = CocoPipeline.from_job(job, _device_id(dev), "NHWC", prec.plan.input_dtype)
        self.names = ("x", "loc", "labels") if self.pipeline.train else ("x", "image_id")
        self._open(prec)

    def next(self) -> Batch:
        batch = next(self._it)
        targets = (batch["loc"], batch["labels"]) if self.pipeline.train else ()
        return Batch((self._image(batch),), targets, self.units)
