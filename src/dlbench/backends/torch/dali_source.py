"""DALI-fed input for the PyTorch bench: `next() -> Batch((x,), (y,), batch size)` on the bench's device.

On CUDA the model runs channels_last, so DALI emits NHWC and `x` is its NCHW *view*
(`permute(0, 3, 1, 2)`): logically NCHW as torch modules expect, physically NHWC, no copy. On the
CPU the model is contiguous NCHW, so DALI emits NCHW. Batches reach torch by DLPack (zero copy) via
DALIGenericIterator; DALI's dynamic executor keeps each batch's buffer alive while torch holds it.
Pipeline failures are explained by the skeleton (backends.skeleton.ExplainedSource).
"""

from __future__ import annotations

import torch
from nvidia.dali.plugin.pytorch import DALIGenericIterator

from dlbench.backends.torch.precision import TorchPrecision
from dlbench.config import JobConfig
from dlbench.core.bench import Batch
from dlbench.data.pipelines import ImagePipeline
from dlbench.workloads.detection.coco_pipeline import CocoPipeline


class DaliSource:
    """Image batches from the job's dataset through DALI (dlbench.data.pipelines)."""

    def __init__(
        self, job: JobConfig, device: torch.device, memory_format: torch.memory_format, prec: TorchPrecision
    ) -> None:
        on_gpu = device.type == "cuda"
        device_id = (
            (device.index if device.index is not None else torch.cuda.current_device()) if on_gpu else None
        )
        self.nhwc = memory_format == torch.channels_last
        self.pipeline = ImagePipeline(
            job, device_id, "NHWC" if self.nhwc else "NCHW", prec.plan.input_dtype, label_dtype="int64"
        )
        self.skipped = self.pipeline.skipped
        # float16 input under fp16 autocast is what autocast would cast to anyway; otherwise the
        # model's parameter dtype (pure bf16: DALI has no bfloat16, so cast here).
        emitted = prec.input_dtype
        self.cast = None if emitted == prec.param_dtype or prec.plan.autocast else prec.param_dtype
        self.units = self.pipeline.batch_size
        self._it = DALIGenericIterator([self.pipeline.pipe], ["x", "y"])

    def next(self) -> Batch:
        batch = next(self._it)[0]
        x = batch["x"]
        if self.nhwc:
            x = x.permute(0, 3, 1, 2)  # NCHW view of NHWC memory == channels_last, zero copy
        if self.cast is not None:
            x = x.to(self.cast)  # preserve_format: stays channels_last
        return Batch((x,), (batch["y"],), self.units)

    def close(self) -> None:
        self._it = None
        self.pipeline.close()


class CocoSource(DaliSource):
    """Detection batches (COCO layout) through DALI (dlbench.workloads.detection.coco_pipeline): the image as above;
    targets loc (N, 4, anchors) float32 and labels (N, anchors) int32, encoded by DALI's box encoder.
    mode=infer reads the held-out split and has no targets."""

    def __init__(
        self, job: JobConfig, device: torch.device, memory_format: torch.memory_format, prec: TorchPrecision
    ) -> None:
        device_id = (device.index or 0) if device.type == "cuda" else None
        self.nhwc = memory_format == torch.channels_last
        self.pipeline = CocoPipeline.from_job(
            job, device_id, "NHWC" if self.nhwc else "NCHW", prec.plan.input_dtype
        )
        self.skipped = self.pipeline.skipped
        self.cast = None if prec.input_dtype == prec.param_dtype or prec.plan.autocast else prec.param_dtype
        self.units = self.pipeline.batch_size
        self.names = ["x", "loc", "labels"] if self.pipeline.train else ["x", "image_id"]
        self._it = DALIGenericIterator([self.pipeline.pipe], self.names)

    def next(self) -> Batch:
        batch = next(self._it)[0]
        x = batch["x"].permute(0, 3, 1, 2) if self.nhwc else batch["x"]
        if self.cast is not None:
            x = x.to(self.cast)
        targets = (batch["loc"], batch["labels"]) if self.pipeline.train else ()
        return Batch((x,), targets, self.units)
