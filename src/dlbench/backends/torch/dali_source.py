"""DALI-fed input for the PyTorch bench: `next() -> (x, y)` torch tensors on the bench's device.

On CUDA the model runs channels_last, so DALI emits NHWC and `x` is its NCHW *view*
(`permute(0, 3, 1, 2)`): logically NCHW as torch modules expect, physically NHWC, no copy. On the
CPU the model is contiguous NCHW, so DALI emits NCHW. Batches reach torch by DLPack (zero copy) via
DALIGenericIterator; DALI's dynamic executor keeps each batch's buffer alive while torch holds it.
"""

from __future__ import annotations

import torch
from nvidia.dali.plugin.pytorch import DALIGenericIterator

from dlbench.config import JobConfig
from dlbench.data.pipelines import ImagePipeline


class DaliSource:
    """Image batches from the job's dataset through DALI (dlbench.data.pipelines)."""

    def __init__(
        self, job: JobConfig, device: torch.device, memory_format: torch.memory_format, dtype: torch.dtype
    ) -> None:
        on_gpu = device.type == "cuda"
        device_id = (
            (device.index if device.index is not None else torch.cuda.current_device()) if on_gpu else None
        )
        self.nhwc = memory_format == torch.channels_last
        self.pipeline = ImagePipeline(job, device_id, "NHWC" if self.nhwc else "NCHW", label_dtype="int64")
        self.skipped = self.pipeline.skipped
        # float16 input under fp16 autocast is what autocast would cast to anyway; otherwise the
        # model's parameter dtype (pure bf16: DALI has no bfloat16, so cast here).
        emitted = torch.float16 if self.pipeline.dtype == "float16" else torch.float32
        self.cast = None if emitted == dtype or job.precision.autocast else dtype
        self._it = DALIGenericIterator([self.pipeline.pipe], ["x", "y"])

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        try:
            batch = next(self._it)[0]
        except RuntimeError as exc:
            if (err := self.pipeline.explain(exc)) is not None:
                raise err from exc
            raise
        x = batch["x"]
        if self.nhwc:
            x = x.permute(0, 3, 1, 2)  # NCHW view of NHWC memory == channels_last, zero copy
        if self.cast is not None:
            x = x.to(self.cast)  # preserve_format: stays channels_last
        return x, batch["y"]

    def close(self) -> None:
        self._it = None
        self.pipeline.close()
